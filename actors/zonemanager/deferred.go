package zonemanager

import (
	"maps"
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
	if eventual == nil || r == nil || m.routes.fileZones[key] || m.sharded && isReverseKey(m.cfg.Answer, key) {
		return false
	}
	return r.Owns(m.cfg.Self, key) && !eventual.Owns(m.cfg.Self, key)
}

// waitForPending starts, follows or ends the wait for the replicas still
// syncing on a ring change from old to the current ring, before the
// change is applied (pendingWaitStep decides).
func (m *Manager) waitForPending(ctx actor.Context, old *cluster.Ring) {
	eventual, start := pendingWaitStep(old, m.ring, m.cfg.Self, m.deferred.eventual, m.defersAny)
	m.deferred.eventual = eventual
	if !start {
		return
	}
	m.deferred.gen++
	wait := pendingWait(m.cfg.PendingWait, m.cfg.Grace)
	m.cfg.Logger.Info("waiting for the replicas still syncing before loading the zones they will own",
		"pending", len(eventual.Owners())-len(m.ring.Owners()), "wait", wait)
	scheduler.NewTimerScheduler(ctx).SendOnce(wait, ctx.Self(), &loadDeferred{gen: m.deferred.gen})
}

// pendingWaitStep decides the wait for the replicas still syncing on a
// ring change from old to now, waiting being the eventual ring of the
// wait under way (nil: none). It returns the eventual ring to wait for
// (nil: no wait) and whether a new wait starts (its timer). The wait
// starts when self announces itself (becomes an owner) while some
// replicas are still syncing and some zone known here would be deferred
// (defers, asked of the eventual ring); it follows the ring while they
// announce, and ends once none is syncing.
func pendingWaitStep(old, now *cluster.Ring, self string, waiting *cluster.Ring,
	defers func(eventual *cluster.Ring) bool) (*cluster.Ring, bool) {
	announced := !ownerIn(old, self) && ownerIn(now, self)
	if now == nil || !announced && waiting == nil {
		return waiting, false
	}
	eventual := now.Eventual()
	switch {
	case eventual == now:
		return nil, false // no replica is still syncing
	case waiting != nil:
		return eventual, false
	case !defers(eventual):
		return nil, false
	}
	return eventual, true
}

// pendingWait is how long the wait for the replicas still syncing lasts:
// Config.PendingWait, else half the handoff grace, else
// DefaultPendingWait.
func pendingWait(configured, grace time.Duration) time.Duration {
	switch {
	case configured > 0:
		return configured
	case grace > 0:
		return grace / 2
	}
	return DefaultPendingWait
}

// defersAny reports whether some zone known here would be deferred while
// waiting for eventual: the zones of the sources' objects, and with
// sharded watches those of every namespace.
func (m *Manager) defersAny(eventual *cluster.Ring) bool {
	deferred := func(key string) bool { return m.deferredIn(m.ring, eventual, key) }
	for key := range m.routes.zoneSize {
		if deferred(key) {
			return true
		}
	}
	if m.sharded {
		for ns := range m.routes.namespaces {
			for _, key := range m.namespaceKeys(ns) {
				if deferred(key) {
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
	// Decided while the zones are still deferred, carried out once they
	// are not.
	effects := m.state.Step(m, pendingGaveUp{known: slices.Collect(maps.Keys(m.routes.zoneSize)), sharded: m.sharded})
	eventual := m.deferred.eventual
	m.deferred.eventual = nil
	// With sharded watches most deferred zones are unknown here: they
	// are gained now, and not denied until their list has come.
	m.noteMoved(m.ring, func(key string) bool {
		return m.ring.Owns(m.cfg.Self, key) && !m.deferredIn(m.ring, eventual, key)
	}, false)
	m.setInterest(ctx) // before the replay, which the sources answer after it
	m.carry(ctx, effects)
	m.publishPlacement()
}

// deferredToLoad lists the zones of keys a wait for the replicas still
// syncing deferred and that no actor runs yet: they load when the wait
// ends without those replicas.
func deferredToLoad(f zoneFacts, keys func(yield func(string) bool)) []string {
	var out []string
	for key := range keys {
		if f.isDeferred(key) && !f.running(key) {
			out = append(out, key)
		}
	}
	return out
}

// ownerIn reports whether name owns zones in r.
func ownerIn(r *cluster.Ring, name string) bool {
	if r == nil {
		return false
	}
	m, ok := r.Member(name)
	return ok && m.Owner && !m.Down
}
