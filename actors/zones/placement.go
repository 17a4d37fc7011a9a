package zones

import (
	"time"

	"github.com/asynkron/protoactor-go/actor"
	"github.com/asynkron/protoactor-go/scheduler"
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
}

// owns reports whether this replica owns key.
func (m *Manager) owns(key string) bool {
	return m.ring == nil || m.ring.Owns(m.cfg.Self, key)
}

func (m *Manager) onRingChanged(ctx actor.Context, msg *RingChanged) {
	m.ring = msg.Ring
	var gained []string
	lost := 0
	for key := range m.zoneSize {
		owned := m.owns(key)
		pid := m.children[key]
		switch {
		case owned && pid == nil:
			m.spawnZone(ctx, key, true)
			gained = append(gained, key)
		case owned && m.grace[key]:
			delete(m.grace, key) // owned again before its grace ended
		case !owned && pid != nil && !m.grace[key]:
			m.grace[key] = true
			lost++
			scheduler.NewTimerScheduler(ctx).SendOnce(m.cfg.Grace, ctx.Self(), &releaseZone{key: key, pid: pid})
		}
	}
	if len(gained) > 0 {
		m.startReplay(ctx, gained)
	}
	if m.cfg.OnHandoff != nil && (len(gained) > 0 || lost > 0) {
		m.cfg.OnHandoff(len(gained), lost)
	}
	m.publishPlacement()
}

// startReplay asks every source to send its objects again, to fill the
// gained zones (and any still loading from an earlier change).
func (m *Manager) startReplay(ctx actor.Context, gained []string) {
	keys := m.replay.keys
	if keys == nil {
		keys = map[string]bool{}
	}
	for _, k := range gained {
		keys[k] = true
	}
	m.replay = replayState{id: m.replay.id + 1, keys: keys, waiting: map[string]bool{}}
	m.setLoaded(false)
	for name, pid := range m.sources {
		m.replay.waiting[name] = true
		ctx.Send(pid, &Replay{ID: m.replay.id})
	}
	if len(m.replay.waiting) == 0 {
		m.replayBarrier(ctx)
	}
}

func (m *Manager) onReplayDone(ctx actor.Context, msg *ReplayDone) {
	if msg.ID != m.replay.id || !m.replay.waiting[msg.Source] {
		return // an older replay, superseded
	}
	delete(m.replay.waiting, msg.Source)
	if len(m.replay.waiting) == 0 {
		m.replayBarrier(ctx)
	}
}

// replayBarrier makes every loading zone publish the replayed objects.
func (m *Manager) replayBarrier(ctx actor.Context) {
	m.replay.pending = 0
	for key := range m.replay.keys {
		if pid := m.children[key]; pid != nil {
			m.replay.pending++
			ctx.Send(pid, &barrier{tag: m.replay.id})
		}
	}
	if m.replay.pending == 0 {
		m.finishReplay()
	}
}

func (m *Manager) onReplayBarrierDone(_ actor.Context, msg *barrierDone) {
	if msg.tag != m.replay.id || !m.replay.keys[msg.key] {
		return
	}
	m.replay.pending--
	if m.replay.pending == 0 && len(m.replay.waiting) == 0 {
		m.finishReplay()
	}
}

// finishReplay shows the loaded zones to queries.
func (m *Manager) finishReplay() {
	for key := range m.replay.keys {
		if m.children[key] != nil {
			if slot := m.cfg.Table.SlotOf(key); slot != nil {
				slot.SetLoading(false)
			}
		}
	}
	m.cfg.Logger.Info("zones loaded after a ring change", "zones", len(m.replay.keys))
	m.replay.keys = nil
	m.setLoaded(true)
	m.publishPlacement()
}

func (m *Manager) setLoaded(b bool) {
	if m.cfg.Loaded != nil {
		m.cfg.Loaded.Store(b)
	}
}

// onReleaseZone stops a lost zone at the end of its grace period, unless
// it was gained back meanwhile.
func (m *Manager) onReleaseZone(ctx actor.Context, msg *releaseZone) {
	if !m.grace[msg.key] || m.children[msg.key] != msg.pid || m.owns(msg.key) {
		return
	}
	delete(m.grace, msg.key)
	delete(m.children, msg.key)
	ctx.Poison(msg.pid)
	m.publishPlacement()
}

// publishPlacement tells the query path, for every known zone this
// replica does not serve complete, which replicas to ask. An empty list
// (no owner reachable yet) makes such names SERVFAIL, never NXDOMAIN.
func (m *Manager) publishPlacement() {
	m.keysSeen = len(m.zoneSize)
	if m.ring == nil {
		m.cfg.Table.SetPlacement(nil)
		return
	}
	p := make(map[string][]string)
	for key := range m.zoneSize {
		if m.children[key] != nil && !m.replay.keys[key] && m.owns(key) {
			continue // served here
		}
		order := []string{}
		for _, name := range m.ring.Order(key) {
			if name != m.cfg.Self {
				order = append(order, name)
			}
		}
		p[key] = order
	}
	m.cfg.Table.SetPlacement(p)
}

// defaultGrace is used when Config.Grace is zero.
const defaultGrace = 15 * time.Second
