package zonemanager

import (
	"errors"
	"maps"
	"slices"
	"time"

	"github.com/shardns/shardns/cluster"
	"github.com/shardns/shardns/model"
)

// The bookkeeping of zones handed from replica to replica (handoff.go)
// is decided here without an actor, from what the Manager knows of each
// zone (loadFacts): which gained zones to ask of whom, what an answer
// does, when a zone loaded from a peer is shown or given up, which
// handed-over objects the sources never confirmed, and how an
// ExportZone is answered. The Manager fetches, sends and publishes; the
// decisions are table-tested (handoffplan_test.go).

// loadFacts is what the handoff decisions read of one zone key beside
// zoneFacts: whether a replay loads it, and whether a replay is under way
// that some source has not answered yet.
type loadFacts interface {
	zoneFacts
	loading(key string) bool // among the zones a replay loads, hidden until it ends
	listing() bool           // a replay is under way, some source has not answered it
}

// handoffState is what the Manager knows of the zones it may load from
// other replicas.
type handoffState struct {
	from     map[string]gainedZone // gained zone key → where it may be loaded from
	fetching map[string]bool
	// provisional are the objects peers handed over that no source has
	// sent since.
	provisional map[model.Key]bool
	tags        uint64
	showing     map[uint64][]string // barrier tag → the zones it shows
	// lostEmpty are the namespace zones a ring change took from this
	// replica while it owned them without objects, and when its grace
	// for them ends: until then it hands them over empty. Those past
	// their grace are dropped at the next ring change.
	lostEmpty map[string]time.Time
}

func newHandoffState() handoffState {
	return handoffState{from: map[string]gainedZone{}, fetching: map[string]bool{},
		provisional: map[model.Key]bool{}, showing: map[uint64][]string{}, lostEmpty: map[string]time.Time{}}
}

// gainedZone is a zone a ring change gave this replica.
type gainedZone struct {
	namespace string
	holders   []string // the replicas that held it, best first
	remotes   []string // their actor remotes
}

// zoneMove is what a ring change did to a namespace zone that has no
// actor here.
type zoneMove uint8

const (
	zoneUnmoved   zoneMove = iota
	zoneGained             // served here now: loaded from its holders if the sources do not list it
	zoneLostEmpty          // served here before, with every object sent: handed over empty for the grace
)

// namespaceZoneMove decides what a ring change did to a namespace zone
// with no actor here, from whether it was served here before and is now,
// and whether the sources had sent every object of what the old ring
// gave this replica (settled): only then is a zone without an actor one
// without objects.
func namespaceZoneMove(was, is, settled bool) zoneMove {
	switch {
	case is && !was:
		return zoneGained
	case was && !is && settled:
		return zoneLostEmpty
	}
	return zoneUnmoved
}

// holders lists the replicas that owned key in ring old, then its other
// owners in ring now (with replicationFactor 2 one of them kept it), and
// their actor remotes: those still on the ring first, since a replica no
// longer on it may have been killed (asking it costs a timeout) rather
// than be leaving; self and members found down left out.
func holders(self, key string, old, now *cluster.Ring) (names, remotes []string) {
	var gone, goneRemotes []string
	seen := map[string]bool{self: true}
	for _, r := range []*cluster.Ring{old, now} {
		order := r.Order(key)
		if rf := r.Replication; rf > 0 && rf < len(order) {
			order = order[:rf]
		}
		for _, name := range order {
			m, ok := r.Member(name)
			if seen[name] || !ok || m.Down || m.Remote == "" {
				continue
			}
			seen[name] = true
			switch cur, ok := now.Member(name); {
			case !ok:
				gone, goneRemotes = append(gone, name), append(goneRemotes, m.Remote)
			case !cur.Down: // down: its port refuses connections
				names, remotes = append(names, name), append(remotes, m.Remote)
			}
		}
	}
	names, remotes = append(names, gone...), append(remotes, goneRemotes...)
	n := min(len(remotes), maxHolders)
	return names[:n], remotes[:n]
}

// loadingGained reports whether key is a zone owned here that has not
// loaded yet: unknown here, or hidden while a replay fills it, and some
// source has not answered that replay. Once every source has, the zones
// loading wait for the replay's barrier, which shows them.
func loadingGained(f loadFacts, key string) bool {
	return f.listing() && f.owns(key) && !f.isDeferred(key) && (!f.running(key) || f.loading(key))
}

// gaining reports whether key is a namespace zone a ring change gave this
// replica that has not loaded yet: its names are not this replica's to
// deny until it has.
func (h *handoffState) gaining(f loadFacts, key string) bool {
	_, gained := h.from[key]
	return gained && loadingGained(f, key)
}

// prune forgets the gained zones that have loaded, or moved on, unless
// their holders are being asked.
func (h *handoffState) prune(f loadFacts) {
	for key := range h.from {
		if !h.fetching[key] && !loadingGained(f, key) {
			delete(h.from, key)
		}
	}
}

// expire drops the zones handed over empty whose grace ended by now.
func (h *handoffState) expire(now time.Time) {
	for key, until := range h.lostEmpty {
		if !now.Before(until) {
			delete(h.lostEmpty, key)
		}
	}
}

// fetchJob is one gained zone to ask of the replicas that held it.
type fetchJob struct {
	key  string
	zone gainedZone
}

// toFetch lists, by key, the gained zones still loading to ask of the
// replicas that held them, marking them asked; it forgets those that
// loaded or moved on. A zone with no holder left, or asked already, is
// not asked again.
func (h *handoffState) toFetch(f loadFacts) []fetchJob {
	var jobs []fetchJob
	for _, key := range slices.Sorted(maps.Keys(h.from)) {
		g := h.from[key]
		switch {
		case !loadingGained(f, key):
			delete(h.from, key)
		case len(g.remotes) > 0 && !h.fetching[key]:
			h.fetching[key] = true
			jobs = append(jobs, fetchJob{key, g})
		}
	}
	return jobs
}

// peerAnswer is what the answer of the replicas asked for a gained zone
// does (answered).
type peerAnswer struct {
	// given up says the zone loaded from the sources meanwhile, or moved
	// on: the answer is dropped.
	givenUp bool
	// result is what Observer.HandedOver counts (peerResult).
	result string
	// namespace is the zone's; its changes load when result is "loaded".
	namespace string
	// placementMoved says the placement is published again: the zone's
	// questions no longer go to its holders ("failed", "not_held"), or
	// its names are denied here ("empty").
	placementMoved bool
}

// answered decides what the answer to the fetch of gained zone key does
// (err, or changes handed over). Asked once: the zone either loads from
// what it got, or waits for the sources, its questions no longer sent to
// the replicas asked. Handed-over objects are provisional until a source
// sends them.
func (h *handoffState) answered(f loadFacts, key string, changes []model.Change, err error) peerAnswer {
	delete(h.fetching, key)
	g, ok := h.from[key]
	if !ok || !loadingGained(f, key) {
		delete(h.from, key)
		return peerAnswer{givenUp: true}
	}
	a := peerAnswer{result: peerResult(err, len(changes)), namespace: g.namespace}
	if err != nil {
		// Still loading, from the sources alone: its questions no
		// longer go to those replicas.
		h.from[key] = gainedZone{namespace: g.namespace}
		a.placementMoved = true
		return a
	}
	delete(h.from, key)
	if a.result == "empty" {
		// A namespace without objects: denied here as by the replica
		// that held it, not sent there any more.
		a.placementMoved = true
		return a
	}
	for _, c := range changes {
		h.provisional[c.Key] = true
	}
	return a
}

// peerResult is the result of asking the replicas that held a gained
// zone, as Observer.HandedOver counts it: "not_held" (none holds it
// complete), "failed" (none answered), "empty" (a namespace without
// objects) or "loaded".
func peerResult(err error, changes int) string {
	switch {
	case errors.Is(err, ErrNotHeld):
		return "not_held"
	case err != nil:
		return "failed"
	case changes == 0:
		return "empty"
	}
	return "loaded"
}

// show picks, of the zones built from a handed-over namespace's objects
// (keys: its zone of the same kind in every cluster domain), those that
// now run and load, and returns the tag of the barrier that shows them
// once their actors have published (0: none to show). They stay among the
// replay's zones until then: the placement keeps sending their questions
// to the replicas that held them (a zone hidden here and placed nowhere
// would be NXDOMAIN).
func (h *handoffState) show(f loadFacts, keys []string) (tag uint64, shown []string) {
	for _, key := range keys {
		if f.running(key) && f.loading(key) {
			delete(h.from, key)
			shown = append(shown, key)
		}
	}
	if len(shown) == 0 {
		return 0, nil
	}
	h.tags++
	tag = peerTag | h.tags
	h.showing[tag] = shown
	return tag, shown
}

// shown counts zone key's answer to the barrier of tag, and reports
// whether the zone is to be shown now: it runs, loads, is owned, and some
// source has yet to answer the replay. Once every source has, the
// replay's own barrier counts this zone and shows it: taking it out of
// the replay now would leave that barrier waiting for ever.
func (h *handoffState) shown(f loadFacts, tag uint64, key string) bool {
	keys := h.showing[tag]
	if !slices.Contains(keys, key) {
		return false
	}
	h.showing[tag] = slices.DeleteFunc(keys, func(k string) bool { return k == key })
	if len(h.showing[tag]) == 0 {
		delete(h.showing, tag)
	}
	return f.running(key) && f.loading(key) && f.listing() && f.owns(key)
}

// confirm drops from the provisional objects those a source sent.
func (h *handoffState) confirm(msg *Apply) {
	if len(h.provisional) == 0 || msg.Source == peerSource {
		return
	}
	for _, c := range msg.Changes {
		delete(h.provisional, c.Key)
	}
}

// unconfirmed returns the deletes of the objects peers handed over that
// no source has sent since and that still build a zone (holds), once a
// replay completed: the sources hold every object of the zones owned
// here then, so those were deleted meanwhile. It forgets them all.
func (h *handoffState) unconfirmed(holds func(model.Key) bool) []model.Change {
	var deletes []model.Change
	for key := range h.provisional {
		if holds(key) {
			deletes = append(deletes, model.Change{Key: key})
		}
	}
	clear(h.provisional)
	return deletes
}

// exportAnswer is how this replica answers another's ExportZone.
type exportAnswer uint8

const (
	exportNotHeld exportAnswer = iota // not held complete here
	exportEmpty                       // a namespace known to have no object
	exportZone                        // the zone's actor answers with its objects
)

// exportedZone is what decides the answer to ExportZone for one zone.
type exportedZone struct {
	heldEmpty bool // a namespace zone this replica vouches has no object (heldEmpty)
	running   bool // its actor runs here
	synced    bool // every source synced
	loading   bool // a replay still loads it
	// shared says every replica builds it: a reverse zone, from its own
	// namespaces, or a file zone; none is handed over.
	shared bool
	held   bool // owned here, or lost and in its grace
}

// exportOf decides the answer to ExportZone: through the zone's actor
// when this replica holds the zone complete (owned, or lost and in its
// grace), with no object for a namespace it knows to have none, else not
// held.
func exportOf(z exportedZone) exportAnswer {
	switch {
	case z.heldEmpty:
		return exportEmpty
	case !z.running || !z.synced || z.loading || z.shared || !z.held:
		return exportNotHeld
	}
	return exportZone
}

// emptyZone is what decides whether a namespace zone without an actor
// here is handed over as empty.
type emptyZone struct {
	sharded   bool // the sources watch only this replica's namespaces
	synced    bool
	clustered bool // a ring shares the zones out
	running   bool // its actor runs here: not empty
	// namespaceZone says the key is a namespace's service or pod zone;
	// known that its namespace exists.
	namespaceZone, known bool
	lostInGrace          bool // lost so in a ring change whose grace has not ended
	ownedNow             bool // the ring gives it to this replica
	loadingGained        bool // gained, its objects still to come (loadingGained)
	deferred             bool // left to a replica still syncing
}

// heldEmpty reports whether this replica can hand a namespace zone over
// as empty: it knows the namespace, holds no zone of it, and owns it with
// every object of its namespaces sent by the sources, or lost it so in a
// ring change whose grace has not ended.
func heldEmpty(z emptyZone) bool {
	switch {
	case !z.sharded || !z.synced || !z.clustered || z.running || !z.namespaceZone || !z.known:
		return false
	case z.lostInGrace:
		return true
	}
	return z.ownedNow && !z.loadingGained && !z.deferred
}
