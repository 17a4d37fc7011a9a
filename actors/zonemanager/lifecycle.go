package zonemanager

// The decisions of a zone's life on this replica — whether a change
// spawns its actor, what a ring change does to each zone known here, which
// lost zones a grace period's end stops, which zones a batch emptied —
// are pure functions of what the Manager knows of each zone (zoneFacts).
// They are table-tested without an actor system (lifecycle_test.go); the
// Manager carries their outcome out: spawns, timers, stops, placement.

// zoneFacts is what the decisions read of one zone key.
type zoneFacts interface {
	owns(key string) bool       // the ring gives it to this replica
	isDeferred(key string) bool // left to a replica still syncing (deferred.go)
	running(key string) bool    // its actor is running here
	inGrace(key string) bool    // lost, still held through its grace period
}

// spawnMode says whether, and how, a change for a zone without an actor
// here starts one.
type spawnMode uint8

const (
	spawnNone    spawnMode = iota // the zone lives elsewhere, or later
	spawnVisible                  // serves as soon as it publishes
	spawnHidden                   // hidden from queries until a replay fills it
)

// spawnFor decides what a change for key, which has no actor here, does.
// A deferred zone loads from the sources' caches when its wait ends. With
// sharded watches, a namespace zone a re-sharded watch is listing now
// (replaying) is hidden until the replay that waits for that list ends;
// reverse zones are built whole from every replica's share and never hide.
func spawnFor(f zoneFacts, key string, sharded, replaying, reverse bool) spawnMode {
	switch {
	case !f.owns(key) || f.isDeferred(key):
		return spawnNone
	case sharded && replaying && !reverse:
		return spawnHidden
	}
	return spawnVisible
}

// ringPlan is what a ring change does to the zones known here.
type ringPlan struct {
	gained   []string // owned now, no actor yet: spawned hidden, loaded by a replay
	regained []string // owned again before their grace ended: kept, grace over
	lost     []string // not owned any more: held through the grace, then released
}

// planRing decides, for each zone key known here, what the new ring (as f
// now answers owns) does to it. A deferred zone is neither gained nor
// lost: it loads when the wait for the replicas still syncing ends.
func planRing(f zoneFacts, keys func(yield func(string) bool)) ringPlan {
	var p ringPlan
	for key := range keys {
		owned := f.owns(key)
		running := f.running(key)
		switch {
		case owned && !running && f.isDeferred(key):
		case owned && !running:
			p.gained = append(p.gained, key)
		case owned && f.inGrace(key):
			p.regained = append(p.regained, key)
		case !owned && running && !f.inGrace(key):
			p.lost = append(p.lost, key)
		}
	}
	return p
}

// releasable reports whether a zone lost to a ring change stops when its
// grace ends: it is still in its grace period, its actor is the one the
// grace began with (same: not stopped by emptying and spawned again
// since), and no ring change gave it back meanwhile.
func releasable(f zoneFacts, key string, same bool) bool {
	return f.inGrace(key) && same && !f.owns(key)
}

// emptied lists the keys of a batch whose last object it removed: their
// actors stop, their grace (if any) ends, they leave the index.
func emptied(batchKeys func(yield func(string) bool), size func(key string) int) []string {
	var out []string
	for key := range batchKeys {
		if size(key) <= 0 {
			out = append(out, key)
		}
	}
	return out
}
