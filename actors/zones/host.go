package zones

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
// of its live heap. So reverse zones live in a few host actors instead,
// each zone still a zoneActor of its own state, addressed by its key: the
// Manager wraps what it sends them in hosted. A host that fails is
// restarted with all its zones, each resuming from its last snapshot, and
// the Manager rebuilds them in one replay.

// reverseHosts is how many host actors the reverse zones are spread over
// (by a hash of their key): enough for the builds of a churn to run on
// every core, few enough to cost nothing.
const reverseHosts = 32

// hostSeed hashes reverse keys to their host; any seed serves, since hosts
// are local to a process.
var hostSeed = maphash.MakeSeed()

// hosted is a message for the zone key of a host.
type hosted struct {
	key string
	msg any
}

// startHosted makes a host run zone, made by the Manager's spawnZone.
type startHosted struct{ zone *zoneActor }

// stopHosted makes a host stop the zone, as a poison pill stops a zone
// actor: queued behind what was sent before it.
type stopHosted struct{}

// drainHost asks a host to answer hostDrained, which it does once it has
// handled everything sent to it before.
type drainHost struct{}

// hostDrained answers drainHost.
type hostDrained struct{}

// zoneHost runs the zones the Manager gives it. The same value serves
// every incarnation (its props' producer returns it), so that a restart
// keeps the zones, which resume from their snapshots.
type zoneHost struct {
	zones   map[string]*zoneActor
	started bool // a Started was seen: the next one is a restart
}

func newZoneHostProps() *actor.Props {
	h := &zoneHost{zones: map[string]*zoneActor{}}
	return actor.PropsFromProducer(func() actor.Actor { return h }, BurstMailbox())
}

func (h *zoneHost) Receive(ctx actor.Context) {
	switch msg := ctx.Message().(type) {
	case *hosted:
		h.receive(ctx, msg)
	case *drainHost:
		ctx.Respond(&hostDrained{})
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

func (h *zoneHost) receive(ctx actor.Context, m *hosted) {
	switch msg := m.msg.(type) {
	case *startHosted:
		h.zones[m.key] = msg.zone
		msg.zone.onStarted()
	case *stopHosted:
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
func (h *zoneHost) restart(ctx actor.Context) {
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
	log.Warn("reverse zone host restarted; its zones' last snapshots serve while they rebuild from the sources", "zones", len(keys))
	ctx.Send(ctx.Parent(), &zoneRestarted{keys: keys, pid: ctx.Self()})
}

// identity returns a zone actor for the same zone with none of its state,
// as the producer of a zone actor makes it again on a restart.
func (z *zoneActor) identity() *zoneActor {
	return &zoneActor{key: z.key, origin: z.origin, reverse: z.reverse, pods: z.pods, mesh: z.mesh, hosted: z.hosted,
		cfg: z.cfg, slot: z.slot, table: z.table, now: z.now, log: z.log, fault: z.fault, repacked: z.repacked,
		observer: z.observer}
}

// hostedKey reports whether the zone of key runs in a host: reverse zones.
func (m *Manager) hostedKey(key string) bool {
	return isReverseKey(m.cfg.Answer, key)
}

// host returns the host actor of reverse zone key, spawning it first.
func (m *Manager) host(ctx actor.Context, key string) *actor.PID {
	n := uint64(reverseHosts)
	if m.cfg.reverseHosts > 0 && m.cfg.reverseHosts < reverseHosts {
		n = uint64(m.cfg.reverseHosts)
	}
	i := maphash.String(hostSeed, key) % n
	if m.hosts[i] == nil {
		m.hosts[i] = ctx.Spawn(newZoneHostProps())
	}
	return m.hosts[i]
}

// spawnHosted starts zone z, of key, in its host and returns the host.
func (m *Manager) spawnHosted(ctx actor.Context, key string, z *zoneActor) *actor.PID {
	z.hosted = true
	pid := m.host(ctx, key)
	ctx.Send(pid, &hosted{key: key, msg: &startHosted{zone: z}})
	return pid
}

// addressed returns msg as the zone of key receives it: wrapped for its
// host when it is hosted.
func (m *Manager) addressed(key string, msg any) any {
	if m.hostedKey(key) {
		return &hosted{key: key, msg: msg}
	}
	return msg
}

// tell sends msg to the zone of key, whose actor (or host) is pid.
func (m *Manager) tell(ctx actor.Context, key string, pid *actor.PID, msg any) {
	ctx.Send(pid, m.addressed(key, msg))
}

// reachAll sends hosted to each hosted zone of zones (key → its actor or
// host) and calls direct for each zone actor, and returns futures that
// complete once every zone has handled what it was sent: direct's, and to
// each host one drainHost behind the messages of all its zones. Why not a
// request to each hosted zone: a release asks thousands of reverse zones
// at once, and protoactor's process registry, where each future is
// registered, keeps the tables its maps grew to for them, 0.4 MB a
// replica (TestShardedIngest's heap profiles).
func (m *Manager) reachAll(ctx actor.Context, zones map[string]*actor.PID, hosted func() any,
	direct func(*actor.PID) *actor.Future) []*actor.Future {
	var done []*actor.Future
	hosts := map[*actor.PID]bool{}
	for key, pid := range zones {
		if m.hostedKey(key) {
			m.tell(ctx, key, pid, hosted())
			hosts[pid] = true
		} else {
			done = append(done, direct(pid))
		}
	}
	for pid := range hosts {
		done = append(done, ctx.RequestFuture(pid, &drainHost{}, repackTimeout))
	}
	return done
}

// stopZone stops the zone of key after what was sent to it before.
func (m *Manager) stopZone(ctx actor.Context, key string, pid *actor.PID) {
	if m.hostedKey(key) {
		m.tell(ctx, key, pid, &stopHosted{})
		return
	}
	ctx.Poison(pid)
}

// stopZones stops the zones of zones (key → its actor or host), and
// returns futures that complete once all have stopped.
func (m *Manager) stopZones(ctx actor.Context, zones map[string]*actor.PID) []*actor.Future {
	return m.reachAll(ctx, zones, func() any { return &stopHosted{} }, ctx.PoisonFuture)
}
