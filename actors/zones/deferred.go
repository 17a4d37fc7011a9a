package zones

import (
	"slices"
	"time"

	"github.com/asynkron/protoactor-go/actor"
	"github.com/asynkron/protoactor-go/scheduler"

	"github.com/shardns/shardns/cluster"
)

// Replicas started together (a first rollout, a StatefulSet scaled from
// zero or scaled out by several at once) join the ring within a second of
// each other and announce themselves as their sources sync, one after
// another. The first to announce owns every zone the joining replicas
// will take until they announce too, a second or so later. It used to
// build all of those zones and then hand them away: that build was its
// memory's peak, twice what it settles at. With sharded watches it was
// worse: its sources widened their watches to every namespace it owned
// for that second, listing the whole cluster, and narrowed them again.
//
// So a replica that has just announced itself serves the zones it will
// keep once the replicas still syncing (pending members of the ring) have
// announced too, and defers the others: it neither builds them nor, with
// sharded watches, lists their objects (Interest follows the same
// eventual ring). It is not ready meanwhile, and their questions go to
// the replicas that held them (placement), or SERVFAIL at a first start,
// never NXDOMAIN: a deferred namespace is not one this replica may deny.
// The wait ends when every pending replica has announced or been found
// down, or after half the handoff grace at most (a pending replica
// crashed while listing, say): the replica then loads what it still owns,
// before the replicas that held those zones stop answering them.

// DefaultPendingWait is how long a replica that announced itself waits for
// the replicas still syncing before it loads the zones they would own,
// without a handoff grace to take half of.
const DefaultPendingWait = 15 * time.Second

// loadDeferred ends the wait for the pending replicas; gen tells it from
// the timers of earlier waits.
type loadDeferred struct{ gen uint64 }

// deferredState is the wait of a replica that announced itself for the
// replicas still syncing.
type deferredState struct {
	// eventual is the ring once they have announced: the zones this
	// replica owns now and not in it are deferred. nil: no wait.
	eventual *cluster.Ring
	gen      uint64 // the current wait's timer
}

// isDeferred reports whether key is a zone this replica owns and leaves,
// for now, to a replica still syncing.
func (m *Manager) isDeferred(key string) bool {
	return m.deferredIn(m.ring, m.deferred.eventual, key)
}

// deferredIn reports whether key was deferred in ring r while waiting for
// eventual.
func (m *Manager) deferredIn(r, eventual *cluster.Ring, key string) bool {
	if eventual == nil || r == nil || m.fileZones[key] || m.sharded && isReverseKey(m.cfg.Answer, key) {
		return false
	}
	return r.Owns(m.cfg.Self, key) && !eventual.Owns(m.cfg.Self, key)
}

// waitForPending starts, follows or ends the wait for the replicas still
// syncing on a ring change from old to the current ring, before the
// change is applied: the wait starts when this replica announces itself
// while some are, and ends once none is.
func (m *Manager) waitForPending(ctx actor.Context, old *cluster.Ring) {
	self := m.cfg.Self
	announced := !ownerIn(old, self) && ownerIn(m.ring, self)
	if m.ring == nil || !announced && m.deferred.eventual == nil {
		return
	}
	eventual := m.ring.Eventual()
	if eventual == m.ring {
		m.deferred.eventual = nil // no replica is still syncing
		return
	}
	waiting := m.deferred.eventual != nil
	m.deferred.eventual = eventual
	if waiting || !m.defersAny() {
		if !waiting {
			m.deferred.eventual = nil
		}
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
		"pending", len(eventual.Owners())-len(m.ring.Owners()), "wait", wait)
	scheduler.NewTimerScheduler(ctx).SendOnce(wait, ctx.Self(), &loadDeferred{gen: m.deferred.gen})
}

// defersAny reports whether some zone known here is deferred: the zones
// of the sources' objects, and with sharded watches those of every
// namespace.
func (m *Manager) defersAny() bool {
	for key := range m.zoneSize {
		if m.isDeferred(key) {
			return true
		}
	}
	if m.sharded {
		for ns := range m.namespaces {
			for _, key := range m.namespaceKeys(ns) {
				if m.isDeferred(key) {
					return true
				}
			}
		}
	}
	return false
}

// waitingForPending reports whether some zone waits for the replicas still
// syncing: the replica is not loaded (ready) meanwhile.
func (m *Manager) waitingForPending() bool {
	return m.deferred.eventual != nil
}

// onLoadDeferred loads the deferred zones still owned: the replicas that
// would own them did not announce in time. With sharded watches the
// sources widen theirs to those zones' namespaces first.
func (m *Manager) onLoadDeferred(ctx actor.Context, msg *loadDeferred) {
	if msg.gen != m.deferred.gen || m.deferred.eventual == nil {
		return
	}
	var gained []string
	for key := range m.zoneSize {
		if m.isDeferred(key) && m.children[key] == nil {
			gained = append(gained, key)
		}
	}
	eventual := m.deferred.eventual
	m.deferred.eventual = nil
	// With sharded watches most deferred zones are unknown here: they
	// are gained now, and not denied until their list has come.
	m.noteMoved(m.ring, func(key string) bool {
		return m.ring.Owns(m.cfg.Self, key) && !m.deferredIn(m.ring, eventual, key)
	}, false)
	m.setInterest(ctx) // before the replay, which the sources answer after it
	for _, key := range gained {
		m.spawnZone(ctx, key, true)
	}
	slices.Sort(gained)
	m.cfg.Logger.Warn("replicas still syncing did not announce in time: loading the zones they would own",
		"zones", len(gained))
	if len(gained) > 0 || m.sharded {
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
