package zonemanager

import (
	"hash/maphash"
	"log/slog"

	"github.com/asynkron/protoactor-go/actor"

	"github.com/shardns/shardns/zone"
)

// Reverse zones are many and small: a /24 or /64 holds the PTRs of the
// addresses in it, and with sharded watches each replica holds a share of
// nearly every one the cluster has, a handful of PTRs each. An actor of its
// own costs a zone about 1.5 KB in protoactor alone (props, mailbox,
// process registry entry, context, child set), more than its records: at
// 20k services on 6 replicas, some 4,000 reverse zones a replica, a fifth
// of its live heap. So reverse zones live in a few pool actors instead,
// each zone still a zoneActor of its own state, addressed by its key: the
// Manager wraps what it sends them in pooled. A pool that fails is
// restarted with all its zones, each resuming from its last snapshot, and
// the Manager rebuilds them in one replay.

// reversePools is how many pool actors the reverse zones are spread over
// (by a hash of their key): enough for the builds of a churn to run on
// every core, few enough to cost nothing.
const reversePools = 32

// poolSeed hashes reverse keys to their pool; any seed serves, since pools
// are local to a process.
var poolSeed = maphash.MakeSeed()

// pooled is a message for the zone key of a pool.
type pooled struct {
	key string
	msg any
}

// startPooled makes a pool run zone, made by the Manager's spawnZone.
type startPooled struct{ zone *zoneActor }

// stopPooled makes a pool stop the zone, as a poison pill stops a zone
// actor: queued behind what was sent before it.
type stopPooled struct{}

// drainPool asks a pool to answer poolDrained, which it does once it has
// handled everything sent to it before.
type drainPool struct{}

// poolDrained answers drainPool.
type poolDrained struct{}

// reversePool runs the zones the Manager gives it. The same value serves
// every incarnation (its props' producer returns it), so that a restart
// keeps the zones, which resume from their snapshots.
type reversePool struct {
	zones   map[string]*zoneActor
	started bool // a Started was seen: the next one is a restart
}

func newReversePoolProps() *actor.Props {
	h := &reversePool{zones: map[string]*zoneActor{}}
	return actor.PropsFromProducer(func() actor.Actor { return h }, BurstMailbox())
}

func (h *reversePool) Receive(ctx actor.Context) {
	switch msg := ctx.Message().(type) {
	case *pooled:
		h.receive(ctx, msg)
	case *drainPool:
		ctx.Respond(&poolDrained{})
	case *actor.Started:
		if h.started {
			h.restart(ctx)
		}
		h.started = true
	case *actor.Stopping:
		slots := make(map[string]*zone.Slot, len(h.zones))
		var table *zone.Table
		for key, z := range h.zones {
			slots[key], table = z.slot, z.table
		}
		if table != nil {
			table.RemoveSlots(slots)
		}
	case *actor.Stopped:
		for _, z := range h.zones {
			z.drop()
		}
		h.zones = nil
	}
}

func (h *reversePool) receive(ctx actor.Context, m *pooled) {
	switch msg := m.msg.(type) {
	case *startPooled:
		h.zones[m.key] = msg.zone
		msg.zone.onStarted()
	case *stopPooled:
		// The Manager drops the zone's slot from the table with the
		// others it stops; a removal here, one copy of the table's map
		// for each zone, would come first as often as not.
		if z := h.zones[m.key]; z != nil {
			delete(h.zones, m.key)
			z.drop()
		}
	default:
		if z := h.zones[m.key]; z != nil {
			z.handle(ctx, m.msg)
		}
	}
}

// restart starts every zone over from its last snapshot, as a restarted
// zone actor does, and asks the Manager to rebuild them all at once.
func (h *reversePool) restart(ctx actor.Context) {
	keys := make([]string, 0, len(h.zones))
	var log *slog.Logger
	for key, z := range h.zones {
		log = z.log
		fresh := z.identity()
		fresh.restarted = true
		fresh.onStarted()
		h.zones[key] = fresh
		keys = append(keys, key)
	}
	if len(keys) == 0 {
		return
	}
	log.Warn("reverse zone pool restarted; its zones' last snapshots serve while they rebuild from the sources", "zones", len(keys))
	ctx.Send(ctx.Parent(), &zoneRestarted{keys: keys, pid: ctx.Self()})
}

// identity returns a zone actor for the same zone with none of its state,
// as the producer of a zone actor makes it again on a restart.
func (z *zoneActor) identity() *zoneActor {
	return &zoneActor{key: z.key, origin: z.origin, reverse: z.reverse, pods: z.pods, mesh: z.mesh, pooled: z.pooled,
		cfg: z.cfg, slot: z.slot, table: z.table, now: z.now, log: z.log, fault: z.fault, repacked: z.repacked,
		observer: z.observer}
}

// pooledKey reports whether the zone of key runs in a pool: reverse zones.
func (m *Manager) pooledKey(key string) bool {
	return isReverseKey(m.cfg.Answer, key)
}

// pool returns the pool actor of reverse zone key, spawning it first.
func (m *Manager) pool(ctx actor.Context, key string) *actor.PID {
	n := uint64(reversePools)
	if m.hooks.reversePools > 0 && m.hooks.reversePools < reversePools {
		n = uint64(m.hooks.reversePools)
	}
	i := maphash.String(poolSeed, key) % n
	if m.pools[i] == nil {
		m.pools[i] = ctx.Spawn(newReversePoolProps())
	}
	return m.pools[i]
}

// spawnPooled starts zone z, of key, in its pool and returns the pool.
func (m *Manager) spawnPooled(ctx actor.Context, key string, z *zoneActor) *actor.PID {
	z.pooled = true
	pid := m.pool(ctx, key)
	ctx.Send(pid, &pooled{key: key, msg: &startPooled{zone: z}})
	return pid
}

// addressed returns msg as the zone of key receives it: wrapped for its
// pool when it is pooled.
func (m *Manager) addressed(key string, msg any) any {
	if m.pooledKey(key) {
		return &pooled{key: key, msg: msg}
	}
	return msg
}

// tell sends msg to the zone of key, whose actor (or pool) is pid.
func (m *Manager) tell(ctx actor.Context, key string, pid *actor.PID, msg any) {
	ctx.Send(pid, m.addressed(key, msg))
}

// reachAll sends pooled to each pooled zone of zones (key → its actor or
// pool) and calls direct for each zone actor, and returns futures that
// complete once every zone has handled what it was sent: direct's, and to
// each pool one drainPool behind the messages of all its zones. Why not a
// request to each pooled zone: a release asks thousands of reverse zones
// at once, and protoactor's process registry, where each future is
// registered, keeps the tables its maps grew to for them, 0.4 MB a
// replica (TestShardedIngest's heap profiles).
func (m *Manager) reachAll(ctx actor.Context, zones map[string]*actor.PID, pooled func() any,
	direct func(*actor.PID) *actor.Future) []*actor.Future {
	var done []*actor.Future
	pools := map[*actor.PID]bool{}
	for key, pid := range zones {
		if m.pooledKey(key) {
			m.tell(ctx, key, pid, pooled())
			pools[pid] = true
		} else {
			done = append(done, direct(pid))
		}
	}
	for pid := range pools {
		done = append(done, ctx.RequestFuture(pid, &drainPool{}, repackTimeout))
	}
	return done
}

// stopZone stops the zone of key after what was sent to it before.
func (m *Manager) stopZone(ctx actor.Context, key string, pid *actor.PID) {
	if m.pooledKey(key) {
		m.tell(ctx, key, pid, &stopPooled{})
		return
	}
	ctx.Poison(pid)
}

// stopZones stops the zones of zones (key → its actor or pool), and
// returns futures that complete once all have stopped.
func (m *Manager) stopZones(ctx actor.Context, zones map[string]*actor.PID) []*actor.Future {
	return m.reachAll(ctx, zones, func() any { return &stopPooled{} }, ctx.PoisonFuture)
}
