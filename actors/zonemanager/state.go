package zonemanager

import (
	"maps"
	"slices"
	"time"
)

// State is the part of the Manager's decisions that Step makes, as a
// state machine without an actor or a clock: what a ring change does to
// the zones known here, which lost zones stay in their grace period
// until it ends, when the replay that loads zones is over, when the node
// is synced, what loads once replicas still syncing did not announce, and
// which zone actors a routed batch of changes spawns, reaches and stops
// (the routing itself is routes.apply's, routing.go). Step returns the
// effects of a message (spawns, tells, stops, replays, timers, what the
// Observer is told) and the Manager carries
// them out (carry, in manager.go), so the decisions are table-tested as
// message sequences (state_test.go). Zones are named by key: the actors
// that serve them are the Manager's.
type State struct {
	// Grace is how long a lost zone keeps serving (Config.Grace).
	Grace time.Duration
	grace map[string]bool // lost zones still held for a while
	// graceChanged says grace gained or lost a key since the Observer
	// was last told.
	graceChanged bool
	replay       replayState // the replay that loads gained zones (lifecycle.go)
	sync         firstSync   // the way to readiness (firstsync.go)
}

func newState(grace time.Duration, sources []string) State {
	return State{Grace: grace, grace: map[string]bool{}, sync: newFirstSync(sources)}
}

// Messages Step takes; the Manager makes them from its own.

// ringMoved is RingChanged once the Manager has taken the new ring and
// what it defers: known are the zones known here, sharded says the
// sources watch only this replica's namespaces.
type ringMoved struct {
	known   []string
	sharded bool
}

// graceOver is the end of the grace period of the zones one ring change
// lost (releaseZones). same names those whose actor is still the one the
// grace began with: a zone emptied and spawned again since is another,
// which the release leaves alone.
type graceOver struct {
	zones []string
	same  map[string]bool
}

// replayAsked says the sources were asked to replay (the Manager set
// replay.waiting to those it asked): with none to wait for, the loading
// zones get the barrier at once.
type replayAsked struct{}

// pendingGaveUp is the end of the wait for the replicas still syncing
// without them (loadDeferred), before the Manager stops deferring: known
// are the zones known here.
type pendingGaveUp struct {
	known   []string
	sharded bool
}

// syncZones are the zones running once every source has synced: each
// gets the sync barrier.
type syncZones struct{ keys []string }

// applied is a batch of changes routed (routes.apply): the part of each
// zone, and the zones it emptied. replay is the Replay.ID the batch
// answers (0: live changes); sharded says the sources watch only this
// replica's namespaces.
type applied struct {
	zones   []zoneBatch
	emptied []string
	replay  uint64
	sharded bool
}

// Step also takes *ReplayDone, a source's end of a replay; *barrierDone,
// a zone's answer to a replay's barrier or to the sync barrier (tag 0);
// *Synced, a source's first sync; *startupTimeout.

// Effect is what Step asks the Manager to do.
type Effect interface{ effect() }

// SpawnZone starts the actor of a zone, hidden from queries until a
// replay has loaded it when Hidden.
type SpawnZone struct {
	Key    string
	Hidden bool
}

// StopZones releases lost zones: their actors stop once the placement
// sends their queries elsewhere, and the zones kept are built again.
type StopZones struct{ Keys []string }

// Timer sends Msg to the Manager After a while.
type Timer struct {
	After time.Duration
	Msg   any
}

// graceEnds is the message of the timer a ring change's lost zones wait
// for; the Manager pins each zone's actor to it (releaseZones).
type graceEnds struct{ zones []string }

// LoadZones asks the sources to replay their objects, to load Keys
// (hidden until loaded) and any zone still loading.
type LoadZones struct{ Keys []string }

// CheckLoaded says nothing loads for this message: the replica is loaded
// unless a replay is under way or it waits for replicas still syncing.
type CheckLoaded struct{}

// SendBatches sends each zone of Zones its part of a batch of changes,
// once its actor runs (a SpawnZone before it starts those that do not).
type SendBatches struct{ Zones []zoneBatch }

// StopZone stops the actor of zone Key, whose last object went, after
// what was sent to it before: it applies its last batch first.
type StopZone struct{ Key string }

// TellZone sends Msg to the actor of zone Key.
type TellZone struct {
	Key string
	Msg any
}

// FinishReplay shows the zones a replay loaded to queries: every source
// answered and every loading zone published what they sent.
type FinishReplay struct{}

// RebuildRestarted rebuilds the zones restarted before every source had
// synced (rebuild.go); it comes before the sync barrier, which waits for
// them.
type RebuildRestarted struct{}

// SyncBarrier asks the Manager for the zones running now (syncZones), to
// send each the sync barrier.
type SyncBarrier struct{}

// MarkSynced says every source synced and every zone published what they
// sent: the node is ready.
type MarkSynced struct{}

// ServeUnsynced says the startup timeout passed before the sources
// synced: what is known is served, while readiness keeps waiting.
type ServeUnsynced struct{ Waiting []string }

// WarnDeferredLoad says the replicas still syncing did not announce in
// time: this replica loads Zones zones they would have owned.
type WarnDeferredLoad struct{ Zones int }

// Settle says a release is over without anything to stop.
type Settle struct{}

// ObserveHandoff tells the Observer how many zones a ring change gained
// and lost.
type ObserveHandoff struct{ Gained, Lost int }

// ObserveGrace tells the Observer which zones are in their grace period.
type ObserveGrace struct{ Keys []string }

// ObserveLoading tells the Observer a load or a release begins.
type ObserveLoading struct{}

func (SpawnZone) effect()        {}
func (StopZones) effect()        {}
func (StopZone) effect()         {}
func (SendBatches) effect()      {}
func (Timer) effect()            {}
func (LoadZones) effect()        {}
func (CheckLoaded) effect()      {}
func (Settle) effect()           {}
func (TellZone) effect()         {}
func (FinishReplay) effect()     {}
func (RebuildRestarted) effect() {}
func (SyncBarrier) effect()      {}
func (MarkSynced) effect()       {}
func (ServeUnsynced) effect()    {}
func (WarnDeferredLoad) effect() {}
func (ObserveHandoff) effect()   {}
func (ObserveGrace) effect()     {}
func (ObserveLoading) effect()   {}

// Step decides what msg does, given what f says of each zone key (whether
// the ring gives it here, whether it is deferred, whether its actor runs;
// the grace period is the State's own), and returns the effects in the
// order they are carried out.
func (s *State) Step(f zoneFacts, msg any) []Effect {
	f = graceFacts{f, s}
	var out []Effect
	switch msg := msg.(type) {
	case ringMoved:
		out = s.ringMoved(f, msg)
	case graceOver:
		out = s.graceOver(f, msg)
	case replayAsked:
		if len(s.replay.waiting) == 0 {
			out = s.replayBarrier(f)
		}
	case *ReplayDone:
		if s.replay.sourceDone(msg.ID, msg.Source) {
			out = s.replayBarrier(f)
		}
	case *barrierDone:
		if msg.tag == 0 {
			out = s.syncBarrierDone()
		} else if s.replay.barrierDone(msg.tag, msg.key) {
			out = []Effect{FinishReplay{}}
		}
	case *Synced:
		if s.sync.sourceSynced(msg.Source) {
			out = []Effect{RebuildRestarted{}, SyncBarrier{}}
		}
	case pendingGaveUp:
		out = s.pendingGaveUp(f, msg)
	case syncZones:
		for _, key := range msg.keys {
			out = append(out, TellZone{Key: key, Msg: &barrier{tag: 0}})
		}
		if s.sync.barriersSent(len(msg.keys)) {
			out = append(out, s.markSynced()...)
		}
	case applied:
		out = s.applied(f, msg)
	case *startupTimeout:
		if s.sync.timeout() {
			out = []Effect{ServeUnsynced{Waiting: slices.Sorted(maps.Keys(s.sync.unsynced))}}
		}
	}
	return append(out, s.reportGrace()...)
}

func (s *State) ringMoved(f zoneFacts, msg ringMoved) []Effect {
	var out []Effect
	plan := planRing(f, slices.Values(msg.known))
	for _, key := range plan.gained {
		out = append(out, SpawnZone{Key: key, Hidden: true})
	}
	for _, key := range plan.regained {
		s.endGrace(key)
	}
	for _, key := range plan.lost {
		s.grace[key] = true
		s.graceChanged = true
	}
	if len(plan.lost) > 0 {
		// One timer for every zone this change lost: they are released
		// together, with one placement for all of them.
		out = append(out, Timer{After: s.Grace, Msg: &graceEnds{zones: plan.lost}})
	}
	if len(plan.gained) > 0 || msg.sharded {
		// With sharded watches the zones gained are mostly unknown here
		// until the source's new watch lists them: the replay waits for
		// that list, and the zones it spawns stay hidden until it ends.
		out = append(out, LoadZones{Keys: plan.gained})
	} else {
		out = append(out, CheckLoaded{})
	}
	if len(plan.gained) > 0 || len(plan.lost) > 0 {
		out = append(out, ObserveHandoff{Gained: len(plan.gained), Lost: len(plan.lost)})
	}
	return out
}

// pendingGaveUp loads the deferred zones without an actor, hidden until a
// replay fills them. With sharded watches most deferred zones are unknown
// here: the replay waits for the list of the widened watches.
func (s *State) pendingGaveUp(f zoneFacts, msg pendingGaveUp) []Effect {
	gained := deferredToLoad(f, slices.Values(slices.Sorted(slices.Values(msg.known))))
	var out []Effect
	for _, key := range gained {
		out = append(out, SpawnZone{Key: key, Hidden: true})
	}
	out = append(out, WarnDeferredLoad{Zones: len(gained)})
	if len(gained) > 0 || msg.sharded {
		return append(out, LoadZones{Keys: gained})
	}
	return append(out, CheckLoaded{})
}

// applied sends each zone its part of a batch, spawning its actor first
// where the batch is its first (spawnFor), and stops the zones the batch
// emptied behind it. A replay's batch fills only the zones it loads, and
// with sharded watches the zones owned here it lists for the first time
// (gainedUnknown). The parts go in one effect, so that a batch costs no
// allocation per zone: a list of 20k services is thousands of them.
func (s *State) applied(f zoneFacts, msg applied) []Effect {
	var out []Effect
	var spawned map[string]bool
	send := msg.zones[:0]
	for _, b := range msg.zones {
		if msg.replay != 0 && !s.replay.keys[b.key] && !s.gainedUnknown(f, b.key, msg.replay, msg.sharded) {
			continue
		}
		if !f.running(b.key) {
			mode := spawnFor(f, b.key, msg.sharded, s.replay.keys != nil, b.reverse)
			switch mode {
			case spawnNone:
				continue // a deferred zone loads from the sources' caches when its wait ends
			case spawnHidden:
				s.replay.keys[b.key] = true // shown when the replay that waits for its list ends
			}
			out = append(out, SpawnZone{Key: b.key, Hidden: mode == spawnHidden})
			if spawned == nil {
				spawned = map[string]bool{}
			}
			spawned[b.key] = true
		}
		send = append(send, b)
	}
	if len(send) > 0 {
		out = append(out, SendBatches{Zones: send})
	}
	for _, key := range msg.emptied {
		s.endGrace(key)
		if f.running(key) || spawned[key] {
			out = append(out, StopZone{Key: key})
		}
	}
	return out
}

// gainedUnknown reports whether key, in a batch of replay id, is a zone
// this replica owns but has never seen: with sharded watches the zones a
// ring change gains are not known until the source sends them. The zone
// actor then starts hidden and joins the replay (applied).
func (s *State) gainedUnknown(f zoneFacts, key string, id uint64, sharded bool) bool {
	return sharded && id == s.replay.id && s.replay.keys != nil && !f.running(key) && f.owns(key)
}

// graceOver stops the lost zones at the end of their grace period,
// unless they were gained back meanwhile.
func (s *State) graceOver(f zoneFacts, msg graceOver) []Effect {
	var stop []string
	for _, key := range msg.zones {
		if releasable(f, key, msg.same[key]) {
			s.endGrace(key)
			stop = append(stop, key)
		}
	}
	if len(stop) == 0 {
		return []Effect{Settle{}} // all gained back: the release is over all the same
	}
	return []Effect{ObserveLoading{}, StopZones{Keys: stop}}
}

// syncBarrierDone counts a zone's answer to the sync barrier.
func (s *State) syncBarrierDone() []Effect {
	if s.sync.barrierDone() {
		return s.markSynced()
	}
	return nil
}

// markSynced turns the node synced.
func (s *State) markSynced() []Effect {
	s.sync.synced = true
	return []Effect{MarkSynced{}}
}

// replayBarrier makes every loading zone whose actor runs publish the
// replayed objects; the replay is over at once when none does.
func (s *State) replayBarrier(f zoneFacts) []Effect {
	var out []Effect
	for _, key := range slices.Sorted(maps.Keys(s.replay.keys)) {
		if f.running(key) {
			out = append(out, TellZone{Key: key, Msg: &barrier{tag: s.replay.id}})
		}
	}
	if s.replay.barriersSent(len(out)) {
		out = append(out, FinishReplay{})
	}
	return out
}

// endGrace ends the grace period of key, if it has one: it was gained
// back, released or emptied.
func (s *State) endGrace(key string) {
	if s.grace[key] {
		delete(s.grace, key)
		s.graceChanged = true
	}
}

// inGrace reports whether zone key, lost to a ring change, is still held
// through its grace period.
func (s *State) inGrace(key string) bool { return s.grace[key] }

// reportGrace returns the report of the zones in their grace period, when
// that changed since the last.
func (s *State) reportGrace() []Effect {
	if !s.graceChanged {
		return nil
	}
	s.graceChanged = false
	return []Effect{ObserveGrace{Keys: slices.Sorted(maps.Keys(s.grace))}}
}

// graceFacts answers inGrace from the State, the rest from the Manager.
type graceFacts struct {
	zoneFacts
	s *State
}

func (g graceFacts) inGrace(key string) bool { return g.s.inGrace(key) }
