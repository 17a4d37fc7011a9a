package zones

import (
	"slices"
	"time"

	"github.com/asynkron/protoactor-go/actor"
	"github.com/asynkron/protoactor-go/scheduler"

	"github.com/shardns/shardns/cluster"
)

// Replicas started together (a first rollout, a StatefulSet scaled from
// zero) join the ring within a second of each other and announce
// themselves as their sources sync, one after another. The first to
// announce owns every zone until the others do, a second or so later:
// it used to build every zone of the cluster, then hand two thirds away,
// and that build was its memory's peak, twice what it settles at. So a
// replica that has just announced itself loads the zones it will keep
// once the replicas still syncing (pending members of the ring) have
// announced too, and defers the others: those go to the pending replicas
// when they announce. It is not ready meanwhile. If a pending replica
// has not announced within half the handoff grace (it crashed while
// listing, say), the replica loads what it still owns: the replicas that
// held those zones before its announcement answer them for the whole
// grace, so the load ends before they stop.
//
// Only a replica whose sources hold every object defers: with sharded
// watches the sources list only what the ring will give (Interest), which
// bounds the peak already.

// DefaultPendingWait is how long a replica that announced itself waits for
// the replicas still syncing before it loads the zones they would own,
// without a handoff grace to take half of.
const DefaultPendingWait = 15 * time.Second

// loadDeferred ends the wait for the pending replicas; gen tells it from
// the timers of earlier waits.
type loadDeferred struct{ gen uint64 }

// deferredState is what a replica that announced itself waits to load.
type deferredState struct {
	keys map[string]bool // owned zones left to the replicas still syncing
	gen  uint64          // the current wait's timer
}

// deferring returns, for a ring change from old to the current ring, the
// test of whether an owned zone that is not loaded waits for the pending
// replicas; nil when none does.
func (m *Manager) deferring(old *cluster.Ring) func(key string) bool {
	if m.sharded || m.ring == nil {
		return nil
	}
	self := m.cfg.Self
	announced := !ownerIn(old, self) && ownerIn(m.ring, self)
	if !announced && len(m.deferred.keys) == 0 {
		return nil
	}
	eventual := m.ring.Eventual()
	if eventual == m.ring {
		return nil // no replica is still syncing
	}
	return func(key string) bool {
		return (announced || m.deferred.keys[key]) && !m.fileZones[key] && !eventual.Owns(self, key)
	}
}

// setDeferred makes keys the zones deferred, and starts the wait if none
// is running.
func (m *Manager) setDeferred(ctx actor.Context, keys map[string]bool) {
	waiting := len(m.deferred.keys) > 0
	m.deferred.keys = keys
	if len(keys) == 0 || waiting {
		return
	}
	m.deferred.gen++
	wait := m.cfg.PendingWait
	switch {
	case wait > 0:
	case m.cfg.Grace > 0:
		wait = m.cfg.Grace / 2
	default:
		wait = DefaultPendingWait
	}
	m.cfg.Logger.Info("waiting for the replicas still syncing before loading the zones they will own",
		"zones", len(keys), "wait", wait)
	scheduler.NewTimerScheduler(ctx).SendOnce(wait, ctx.Self(), &loadDeferred{gen: m.deferred.gen})
}

// onLoadDeferred loads the deferred zones still owned: the replicas that
// would own them did not announce in time.
func (m *Manager) onLoadDeferred(ctx actor.Context, msg *loadDeferred) {
	if msg.gen != m.deferred.gen || len(m.deferred.keys) == 0 {
		return
	}
	var gained []string
	for key := range m.deferred.keys {
		if m.owns(key) && m.children[key] == nil {
			m.spawnZone(ctx, key, true)
			gained = append(gained, key)
		}
	}
	m.deferred.keys = nil
	slices.Sort(gained)
	m.cfg.Logger.Warn("replicas still syncing did not announce in time: loading the zones they would own",
		"zones", len(gained))
	if len(gained) > 0 {
		m.startReplay(ctx, gained, true)
	} else if m.replay.keys == nil {
		m.setLoaded(true)
	}
	m.publishPlacement()
}

// ownerIn reports whether name owns zones in r.
func ownerIn(r *cluster.Ring, name string) bool {
	if r == nil {
		return false
	}
	m, ok := r.Member(name)
	return ok && m.Owner && !m.Down
}
