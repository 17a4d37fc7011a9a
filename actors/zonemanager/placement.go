package zonemanager

import (
	"maps"
	"runtime"
	"slices"
	"time"

	"github.com/asynkron/protoactor-go/actor"
	"github.com/asynkron/protoactor-go/scheduler"

	"github.com/shardns/shardns/cluster"
)

// A replica owns the zones the ring gives it. When the ring changes:
//
//   - A gained zone gets a zone actor whose slot is hidden from queries
//     (loading). The sources replay what they hold; once every source is
//     done and every loading zone has published it (a barrier), the zones
//     turn visible. Meanwhile queries for them go to the other replicas.
//   - A lost zone keeps its actor and its updates for Config.Grace and
//     answers queries other replicas send it, because rendezvous hashing
//     makes it the next candidate after the new owner: no query meets a
//     replica without the zone while the new owner loads. Then it stops.
//
// Every replica publishes, for each zone it does not serve itself, the
// replicas to ask in order (placement), read by the query path.

// replayState tracks the replay that loads gained zones.
type replayState struct {
	id      uint64
	waiting map[string]bool // sources that have not finished
	keys    map[string]bool // zones being loaded
	pending int             // loading zones yet to pass the barrier
	// since is when the zones loading began: a replay that starts while
	// others load keeps the first one's time. gaining says a ring change
	// gained some of them (not only restarted zones being rebuilt).
	since   time.Time
	gaining bool
}

// sourceDone counts source's ReplayDone for replay id and reports
// whether every source has now answered: the loading zones get the
// barrier then. An older replay's answer, superseded, or a second one,
// changes nothing.
func (r *replayState) sourceDone(id uint64, source string) bool {
	if id != r.id || !r.waiting[source] {
		return false
	}
	delete(r.waiting, source)
	return len(r.waiting) == 0
}

// barriersSent notes that n loading zones were sent the replay's barrier,
// and reports whether the replay is over at once (none to wait for).
func (r *replayState) barriersSent(n int) bool {
	r.pending = n
	return n == 0
}

// barrierDone counts a loading zone's answer to the barrier of replay
// tag and reports whether the replay is over: every source answered and
// every loading zone published.
func (r *replayState) barrierDone(tag uint64, key string) bool {
	if tag != r.id || !r.keys[key] {
		return false
	}
	r.pending--
	return r.pending == 0 && len(r.waiting) == 0
}

// gained reports whether the replay loaded zones a ring change gained,
// whose load time is reported. A replay that gained none (a replica
// losing namespaces to one that joins lists what it keeps) left nothing
// unanswered.
func (r *replayState) gained() bool {
	return r.gaining && len(r.keys) > 0
}

// owns reports whether this replica owns key. Every replica owns the
// file zones that may be transferred.
func (m *Manager) owns(key string) bool {
	// Reverse keys first: with sharded watches they are most of the keys
	// a replica knows, and placement asks about every key each time
	// their number changes, where the ring's answer costs a rendezvous.
	return m.ring == nil || m.sharded && isReverseKey(m.cfg.Answer, key) || m.routes.fileZones[key] ||
		m.ring.Owns(m.cfg.Self, key)
}

func (m *Manager) onRingChanged(ctx actor.Context, msg *RingChanged) {
	old, oldEventual := m.ring, m.deferred.eventual
	// Whether every source has sent what the old ring gave this replica:
	// then a namespace it owned and holds no zone of had no objects.
	settled := m.state.sync.synced && (m.state.replay.keys == nil || len(m.state.replay.waiting) == 0)
	m.ring = msg.Ring
	m.waitForPending(ctx, old)
	m.setInterest(ctx) // before the replay below, which the sources answer after it
	m.carry(ctx, m.state.Step(m, ringMoved{known: slices.Collect(maps.Keys(m.routes.zoneSize)), sharded: m.sharded}))
	if old != nil && m.ring != nil {
		// Owners that left are asked for their zones while these load
		// elsewhere; the placement at the end of their grace leaves them
		// out.
		if m.departed = m.departed.Note(old, m.ring, time.Now(), m.cfg.Grace); len(m.departed) > 0 {
			scheduler.NewTimerScheduler(ctx).SendOnce(m.cfg.Grace, ctx.Self(), &departuresOver{})
		}
	}
	if old != nil {
		m.noteMoved(old, func(key string) bool {
			return old.Owns(m.cfg.Self, key) && !m.deferredIn(old, oldEventual, key)
		}, settled)
	}
	m.publishFanOut()
	m.publishPlacement()
}

// startReplay asks every source to send its objects again, to fill the
// zones of keys (and any still loading from an earlier replay), and
// returns the replay's ID. Gained zones are hidden until they have
// loaded; a restarted zone keeps serving its last snapshot.
func (m *Manager) startReplay(ctx actor.Context, keys []string, hidden bool) uint64 {
	m.cfg.Observer.Loading()
	loading, since, gaining := m.state.replay.keys, m.state.replay.since, m.state.replay.gaining
	if loading == nil {
		loading, since, gaining = map[string]bool{}, time.Now(), false
	}
	for _, k := range keys {
		loading[k] = true
	}
	m.state.replay = replayState{id: m.state.replay.id + 1, keys: loading, waiting: map[string]bool{},
		since: since, gaining: gaining || hidden}
	// A replay does not make the replica unready: the node does that as
	// it announces itself, until the zones its announcement gains have
	// loaded (finishReplay). A later ring change's replay, with sharded
	// watches, waits for a list that takes seconds in a large cluster, on
	// every replica at once when one joins; were they all to fail their
	// readiness probes together, the Service would have no endpoint left.
	// The zones a replay loads stay hidden meanwhile, and their questions
	// go to the replicas that still hold them.
	for name, pid := range m.sources {
		m.state.replay.waiting[name] = true
		ctx.Send(pid, &Replay{ID: m.state.replay.id})
	}
	m.carry(ctx, m.state.Step(m, replayAsked{}))
	return m.state.replay.id
}

// finishReplay shows the loaded zones to queries, and deletes what other
// replicas handed over that the sources no longer hold.
func (m *Manager) finishReplay(ctx actor.Context) {
	m.settled() // first, so whoever sees the zones loaded sees the release asked for
	m.addSlots()
	for key := range m.state.replay.keys {
		if m.children[key] != nil {
			if slot := m.cfg.Table.SlotOf(key); slot != nil {
				slot.SetLoading(false)
			}
		}
	}
	took := time.Since(m.state.replay.since)
	m.cfg.Logger.Info("zones loaded from the sources", "zones", len(m.state.replay.keys), "took", took.Round(time.Millisecond))
	if m.state.replay.gained() {
		m.reportGainLoaded(took)
	}
	m.state.replay.keys = nil
	m.setLoaded(!m.waitingForPending())
	m.handoff.prune(m)
	m.publishPlacement()
	m.dropUnconfirmed(ctx)
}

// reportGainLoaded reports how long the zones a ring change gained took
// to load. The replicas that lost them stop answering them
// cluster.handoffGrace after the change, whether they have loaded here or
// not, and questions then wait for the load or fail (with
// replicationFactor 1, no other replica holds them): a load that takes
// more than half the grace is logged as a warning, so that the grace is
// raised before a larger cluster outgrows it.
func (m *Manager) reportGainLoaded(took time.Duration) {
	if outlastsHalfGrace(took, m.cfg.Grace) {
		m.cfg.Logger.Warn("gained zones took more than half of cluster.handoffGrace to load: the replicas that lost them may stop answering them first; raise cluster.handoffGrace",
			"took", took.Round(time.Millisecond), "handoffGrace", m.cfg.Grace)
	}
	m.cfg.Observer.GainLoaded(took) // after the warning: whoever is told finds it logged
}

// outlastsHalfGrace reports whether a gain's load took long enough to
// warn that the grace should be raised.
func outlastsHalfGrace(took, grace time.Duration) bool {
	return grace > 0 && took > grace/2
}

func (m *Manager) setLoaded(b bool) {
	if m.cfg.Loaded != nil {
		m.cfg.Loaded.Store(b)
	}
}

// onReleaseZones ends the grace period of the zones a ring change lost
// (Step decides which stop: graceOver).
func (m *Manager) onReleaseZones(ctx actor.Context, msg *releaseZones) {
	keys := make([]string, 0, len(msg.zones))
	same := make(map[string]bool, len(msg.zones))
	for key, pid := range msg.zones {
		keys = append(keys, key)
		same[key] = m.children[key] == pid
	}
	m.carry(ctx, m.state.Step(m, graceOver{zones: keys, same: same}))
}

// pinned is the timer message of a grace period: each lost zone with its
// actor then, so that its release stops that one and not another spawned
// since the zone emptied (graceOver).
func (m *Manager) pinned(g *graceEnds) *releaseZones {
	zones := make(map[string]*actor.PID, len(g.zones))
	for _, key := range g.zones {
		zones[key] = m.children[key]
	}
	return &releaseZones{zones: zones}
}

// release stops the lost zones of keys, whose grace period is over. The
// placement that sends their queries elsewhere is published before they
// stop.
func (m *Manager) release(ctx actor.Context, keys []string) {
	stop := make(map[string]*actor.PID, len(keys))
	for _, key := range keys {
		stop[key] = m.children[key]
		delete(m.children, key)
		m.setSlot(key, nil)
	}
	m.forgetReleased(ctx)
	m.publishPlacement()
	// The zones kept were built among those stopped now. Built again
	// while those are still alive, they move to memory of their own, and
	// what they shared with the stopped ones is freed whole.
	done := append(m.repackKept(ctx), m.stopZones(ctx, stop)...)
	// Once the stopped zones are collected, their spans are left with
	// holes wherever something else lived among them; built a second
	// time, the kept zones fill those holes, and the memory of the first
	// rebuild, packed together, is freed whole in its turn. At N = 2 that
	// took the first replica's holes from 32 to 15-18 MB, and its RSS
	// from 132 to 117-119 MB (TestShardedMemory).
	after(ctx, done, runtime.GC, &compactKept{})
}

// onCompactKept builds the kept zones a second time, after the zones a
// release stopped were collected; the release is over when they are.
func (m *Manager) onCompactKept(ctx actor.Context) {
	after(ctx, m.repackKept(ctx), nil, &releaseSettled{})
}

// repackKept asks every zone not in its grace period to build its
// snapshot again, and returns the futures of their answers.
func (m *Manager) repackKept(ctx actor.Context) []*actor.Future {
	kept := make(map[string]*actor.PID, len(m.children))
	for key, pid := range m.children {
		if !m.state.inGrace(key) {
			kept[key] = pid
		}
	}
	return m.reachAll(ctx, kept, func() any { return &repack{} }, func(pid *actor.PID) *actor.Future {
		return ctx.RequestFuture(pid, &repack{}, repackTimeout)
	})
}

// repackTimeout bounds the wait for one zone's rebuild; a zone that takes
// longer only makes its release end early.
const repackTimeout = 30 * time.Second

// after waits, off the actor, for futures, runs then (if any), and sends
// msg to the actor.
func after(ctx actor.Context, futures []*actor.Future, then func(), msg any) {
	root, self := ctx.ActorSystem().Root, ctx.Self()
	go func() {
		for _, f := range futures {
			f.Wait()
		}
		if then != nil {
			then()
		}
		root.Send(self, msg)
	}()
}

// schedulePlacement publishes the placement once the messages already in
// the mailbox are handled: during an initial list, thousands of batches
// each discover zones, and one placement for all of them costs what one
// per batch would cost thousands of times over.
func (m *Manager) schedulePlacement(ctx actor.Context) {
	if !m.placementDue {
		m.placementDue = true
		ctx.Send(ctx.Self(), &flushPlacement{})
	}
}

func (m *Manager) onPublishPlacement() {
	if m.placementDue {
		m.publishPlacement()
	}
}

// publishPlacement tells the query path, for every known zone this
// replica does not serve complete, which replicas to ask (placement
// decides). An empty list (no owner reachable yet) makes such names
// SERVFAIL, never NXDOMAIN.
func (m *Manager) publishPlacement() {
	m.addSlots() // the zones it no longer places must be found here
	m.placementDue = false
	m.placementStale = false
	if m.ring == nil {
		m.cfg.Table.SetPlacement(nil)
		return
	}
	var namespaceZones func(yield func(string) bool)
	if m.sharded {
		namespaceZones = func(yield func(string) bool) {
			for ns := range m.routes.namespaces {
				for _, key := range m.namespaceKeys(ns) {
					if !yield(key) {
						return
					}
				}
			}
		}
	}
	m.cfg.Table.SetPlacement(placement(m, maps.Keys(m.routes.zoneSize), namespaceZones))
}

// placeFacts is what the placement reads of one zone key beside
// loadFacts.
type placeFacts interface {
	loadFacts
	gaining(key string) bool    // gained, its objects still to come (handoffState.gaining)
	askFor(key string) []string // the replicas its questions go to when not served here (cluster.QuestionOrder)
}

// placement decides, of the zones known here (known) and, with sharded
// watches, of those every namespace may have (namespaceZones; nil
// without), which this replica does not serve complete, and for each the
// replicas to ask. The zones of namespaces other replicas own are not
// known here with sharded watches: every namespace's may exist. One this
// replica owns and holds no zone of has no object: its names are
// NXDOMAIN here, as without sharding, unless it was just gained and its
// objects are still to come, or waits for a replica still syncing.
func placement(f placeFacts, known, namespaceZones func(yield func(string) bool)) map[string][]string {
	p := make(map[string][]string)
	place := func(key string) {
		if f.running(key) && !f.loading(key) && f.owns(key) {
			return // served here
		}
		p[key] = f.askFor(key)
	}
	for key := range known {
		place(key)
	}
	if namespaceZones == nil {
		return p
	}
	for key := range namespaceZones {
		if _, placed := p[key]; placed || !f.running(key) && f.owns(key) && !f.gaining(key) && !f.isDeferred(key) {
			continue
		}
		place(key)
	}
	return p
}

// gaining reports whether key was gained and its objects are still to
// come (placeFacts).
func (m *Manager) gaining(key string) bool { return m.handoff.gaining(m, key) }

// askFor returns the replicas to ask for zone key (placeFacts).
func (m *Manager) askFor(key string) []string {
	holders := m.handoff.from[key].holders
	if left := m.departed.Holders(key, time.Now()); len(left) > 0 {
		holders = append(slices.Clip(holders), left...)
	}
	return cluster.QuestionOrder(m.ring.Order(key), m.ring.Replication, m.cfg.Self, holders)
}

// defaultGrace is used when Config.Grace is zero.
const defaultGrace = 15 * time.Second
