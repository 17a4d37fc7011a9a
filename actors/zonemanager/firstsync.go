package zonemanager

// firstSync is a node's way to readiness: every source syncs, then every
// zone actor answers a barrier (it has published what the sources sent),
// so that a node, or a reloaded configuration, never turns ready with
// zones still empty. Its transitions are pure; the Manager sends the
// barriers and publishes the directory they lead to.
type firstSync struct {
	unsynced map[string]bool // sources that have not synced yet
	barriers int             // zone actors yet to answer the sync barrier
	synced   bool            // every source synced and every zone published it
	timedOut bool            // the startup timeout passed before that
}

func newFirstSync(sources []string) firstSync {
	s := firstSync{unsynced: make(map[string]bool, len(sources))}
	for _, name := range sources {
		s.unsynced[name] = true
	}
	return s
}

// sourceSynced counts source as synced and reports whether it was the
// last one: the zones get their barrier then. A source syncing again, or
// unknown, changes nothing.
func (s *firstSync) sourceSynced(source string) (last bool) {
	if !s.unsynced[source] {
		return false
	}
	delete(s.unsynced, source)
	return len(s.unsynced) == 0
}

// barriersSent notes that n zones were sent the barrier, and reports
// whether the node is synced at once (no zone to wait for).
func (s *firstSync) barriersSent(n int) bool {
	s.barriers = n
	return n == 0
}

// barrierDone counts a zone's answer and reports whether it was the last
// one the node waited for: the node is synced then.
func (s *firstSync) barrierDone() bool {
	s.barriers--
	return s.barriers == 0 && len(s.unsynced) == 0 && !s.synced
}

// timeout notes that the startup timeout passed and reports whether that
// changes what is served: what is known is served from then on, while
// readiness keeps waiting for the real sync.
func (s *firstSync) timeout() bool {
	if s.synced {
		return false
	}
	s.timedOut = true
	return true
}

// serving reports whether the directory says synced: names not found are
// denied (NXDOMAIN) rather than SERVFAIL.
func (s *firstSync) serving() bool { return s.synced || s.timedOut }
