package zonemanager

import "time"

// Observer is told what the Manager and its zone actors did, for metrics,
// /debug/ring and the node's memory management. As memberlist's
// delegates, its methods are called from inside the actors: they must
// not block, and must not call back into the Manager. Embed NopObserver
// to implement only what is needed.
type Observer interface {
	// Handoff is told how many zones a ring change gained and lost.
	Handoff(gained, lost int)
	// GainLoaded is told how long the zones ring changes gained took to
	// load, from the first change to the zones serving.
	GainLoaded(took time.Duration)
	// Grace is told which lost zones are in their grace period, sorted,
	// whenever that set changes: /debug/ring lists them, so an operator
	// sees the handoffs a ring change began.
	Grace(keys []string)
	// Loading is told when work that leaves much garbage behind begins:
	// a replay that loads zones (those a ring change gained, those left
	// to replicas still syncing that did not announce in time, a
	// restarted zone's), or the release of lost zones. It ends with
	// Settled.
	Loading()
	// Settled is told when such work has ended: the first sync, the
	// loading of gained zones, the release of lost ones. The node
	// returns freed memory to the OS then.
	Settled()
	// Changes is told how many live changes (not replays) each batch
	// brought, once every source has synced.
	Changes(n int)
	// HandedOver is told the result of each gained zone asked of the
	// replicas that held it: "loaded", "empty", "not_held" or "failed".
	HandedOver(result string)
	// MeshSkipped is told why each ServiceEntry host left unanswered on
	// purpose (zone.Skip*) was, once per change of its entry.
	MeshSkipped(why string)
	// Published is told, by each zone actor, what changed in each
	// snapshot it published. It runs in the zone actor.
	Published(Published)
}

// NopObserver ignores everything; embed it to observe only some events.
type NopObserver struct{}

// Handoff implements Observer.
func (NopObserver) Handoff(int, int) {}

// GainLoaded implements Observer.
func (NopObserver) GainLoaded(time.Duration) {}

// Grace implements Observer.
func (NopObserver) Grace([]string) {}

// Loading implements Observer.
func (NopObserver) Loading() {}

// Settled implements Observer.
func (NopObserver) Settled() {}

// Changes implements Observer.
func (NopObserver) Changes(int) {}

// HandedOver implements Observer.
func (NopObserver) HandedOver(string) {}

// MeshSkipped implements Observer.
func (NopObserver) MeshSkipped(string) {}

// Published implements Observer.
func (NopObserver) Published(Published) {}
