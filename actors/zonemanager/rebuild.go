package zonemanager

import (
	"slices"
	"time"

	"github.com/asynkron/protoactor-go/actor"
)

// A zone actor that panics is restarted by the Manager, its supervisor.
// The failed actor may have applied changes it had not published yet (and
// the message it failed on is gone), so its last snapshot is not the whole
// truth. The restarted actor:
//
//  1. resumes from its last published snapshot, which keeps serving, and
//     tells the Manager (zoneRestarted);
//  2. gets rebuild: it drops what it resumed from and publishes nothing
//     while the sources replay what they hold (the replay that loads
//     gained zones), applying live changes as they come;
//  3. publishes the rebuilt zone at the replay's barrier, and only then
//     answers the barriers it held back, so readiness never counts a zone
//     that is still rebuilding.
//
// A zone that fails again within rebuildBackoff of its last rebuild only
// resumes from its snapshot: a change that makes it panic would otherwise
// come back in every replay.

// rebuildBackoff is how soon after a rebuild a failing zone is not rebuilt
// again.
const rebuildBackoff = time.Minute

func (m *Manager) onZoneRestarted(ctx actor.Context, msg *zoneRestarted) {
	plan := planRestart(msg.keys, func(key string) bool { return m.children[key] == msg.pid }, m.rebuiltAt,
		m.cfg.Now(), len(m.state.sync.unsynced) == 0)
	for _, key := range plan.backedOff {
		m.cfg.Logger.Error("zone actor failed again soon after a rebuild; it serves its last snapshot and later changes",
			"zone", key, "rebuilt", m.rebuiltAt[key])
	}
	for _, key := range plan.afterSync {
		m.rebuildAfterSync[key] = true // the sources cannot replay yet
	}
	if len(plan.now) > 0 {
		m.rebuildZones(ctx, plan.now)
	}
}

// restartPlan is what the restart of a zone actor (or of a reverse pool)
// does to the zones it ran.
type restartPlan struct {
	now       []string // rebuilt from the sources at once
	afterSync []string // rebuilt once every source has synced: none can replay yet
	backedOff []string // failed again within rebuildBackoff of a rebuild: they keep their snapshot
}

// planRestart sorts the zones keys of a restarted actor: those whose
// actor it still is (current) are rebuilt now, once the sources have
// synced, or not at all when they were rebuilt less than rebuildBackoff
// before now (a change that makes them panic would come back in every
// replay). Each list is sorted.
func planRestart(keys []string, current func(key string) bool, rebuiltAt map[string]time.Time, now time.Time, synced bool) restartPlan {
	var p restartPlan
	for _, key := range keys {
		switch at, ok := rebuiltAt[key]; {
		case !current(key):
			// stopped or replaced since
		case ok && now.Sub(at) < rebuildBackoff:
			p.backedOff = append(p.backedOff, key)
		case !synced:
			p.afterSync = append(p.afterSync, key)
		default:
			p.now = append(p.now, key)
		}
	}
	slices.Sort(p.now)
	slices.Sort(p.afterSync)
	slices.Sort(p.backedOff)
	return p
}

// rebuildRestarted rebuilds the zones restarted before every source had
// synced.
func (m *Manager) rebuildRestarted(ctx actor.Context) {
	var keys []string
	for key := range m.rebuildAfterSync {
		if m.children[key] != nil {
			keys = append(keys, key)
		}
	}
	clear(m.rebuildAfterSync)
	if len(keys) > 0 {
		slices.Sort(keys)
		m.rebuildZones(ctx, keys)
	}
}

func (m *Manager) rebuildZones(ctx actor.Context, keys []string) {
	if len(m.sources) == 0 {
		m.cfg.Logger.Warn("no source to rebuild a restarted zone from; it serves its last snapshot", "zones", keys)
		return
	}
	// With sources to wait for, the replay's barrier comes after this
	// rebuild reaches the zones.
	id := m.startReplay(ctx, keys, false)
	for _, key := range keys {
		m.rebuiltAt[key] = m.cfg.Now()
		m.tell(ctx, key, m.children[key], &rebuild{id: id})
	}
}

// onRebuild starts refilling the zone from the replay msg.id.
func (z *zoneActor) onRebuild(msg *rebuild) {
	z.forget()
	z.fileZone = nil
	z.rebuilding = msg.id
}

// onBarrier publishes what the zone applied and answers the barrier. While
// rebuilding, only the barrier of the rebuild's replay (or a later one)
// publishes; earlier barriers wait for it.
func (z *zoneActor) onBarrier(ctx actor.Context, msg *barrier) {
	if z.rebuilding != 0 {
		// A peer's barrier (handoff.go) shows the zone, so it waits for
		// the rebuild like an older replay's.
		if msg.tag < z.rebuilding || msg.tag&peerTag != 0 {
			z.owed = append(z.owed, msg.tag)
			return
		}
		z.rebuilding = 0
		z.pending = true
		z.log.Info("zone rebuilt from the sources", "zone", z.key)
	}
	if z.pending {
		z.onFlush()
	}
	for _, tag := range append(z.owed, msg.tag) {
		ctx.Send(ctx.Parent(), &barrierDone{tag: tag, key: z.key})
	}
	z.owed = nil
}
