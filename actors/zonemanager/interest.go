package zonemanager

import (
	"slices"
	"sync/atomic"
	"time"

	"github.com/asynkron/protoactor-go/actor"

	"github.com/shardns/shardns/cluster"
	"github.com/shardns/shardns/model"
	"github.com/shardns/shardns/zone"
)

// Interest tells sources which namespaces' objects this replica's own zones
// are built from. A source keeps every object it watches, so that a zone
// gained later loads without asking the API; it may keep those of other
// namespaces in a compact form. The Manager sets it whenever the ring
// changes and then sends InterestChanged to the sources. Its methods are
// safe for concurrent use; the zero value and nil serve everything.
type Interest struct {
	view atomic.Pointer[interestView]
}

// interestView is one ring's answer.
type interestView struct {
	ring *cluster.Ring
	self string
	cfg  *zone.Config
	// since is when a ring of other members or owners than the one
	// before was set.
	since time.Time
}

// InterestChanged tells a source that Interest changed, so it can re-sort
// the objects it keeps.
type InterestChanged struct{}

// Serves reports whether objects of kind in namespace feed a zone this
// replica owns: a service zone for Services and EndpointSlices, and for
// ServiceImports and imported slices (multicluster names take their
// namespace's service zone key), a pod zone for Pods. Their reverse records do not count: reverse zones are keyed by
// address and mix every namespace.
func (i *Interest) Serves(kind model.Kind, namespace string) bool {
	if i == nil {
		return true
	}
	v := i.view.Load()
	if v == nil || v.ring == nil {
		return true
	}
	for _, origin := range v.cfg.Domains.Cluster {
		var key string
		switch kind {
		case model.KindService, model.KindEndpointSlice, model.KindServiceImport, model.KindMultiClusterSlice:
			key = zone.ServiceZoneKey(namespace, origin)
		case model.KindPod:
			if !v.cfg.Domains.PodZones {
				return false
			}
			key = zone.PodZoneKey(namespace, origin)
		default:
			return true
		}
		if v.ring.Owns(v.self, key) {
			return true
		}
	}
	return false
}

// Clustered reports whether zones are shared out among replicas, so a
// replica's sources may watch only what its own zones are built from.
func (i *Interest) Clustered() bool {
	if i == nil {
		return false
	}
	v := i.view.Load()
	return v != nil && v.ring != nil && v.ring.Replication > 0
}

// Set makes i answer for ring, as seen by the member self, with the zones
// of cfg. A nil ring serves everything.
//
// A replica that has not announced itself an owner yet is counted as one,
// and so are the other replicas starting with it (cluster.Ring.
// Prospective): its sources list the namespaces it will own before it
// announces, while it is not ready and their owners still answer them,
// and the zones it gains once it has announced load from what it holds,
// not from a list that the old owners' grace period would have to wait
// for. Replicas that start together do not each list everything first.
func (i *Interest) Set(ring *cluster.Ring, self string, cfg *zone.Config) {
	if ring != nil {
		ring = ring.Prospective(self)
	}
	since := time.Now()
	if old := i.view.Load(); old != nil && sameOwners(old.ring, ring) {
		since = old.since
	}
	i.view.Store(&interestView{ring: ring, self: self, cfg: cfg, since: since})
}

// Unchanged is how long the members and owners the interest follows have
// been what they are: a replica that starts with others (a first rollout)
// sees them join one after another during its first second or so.
func (i *Interest) Unchanged() time.Duration {
	if i == nil {
		return time.Duration(1<<63 - 1)
	}
	v := i.view.Load()
	if v == nil {
		return time.Duration(1<<63 - 1)
	}
	return time.Since(v.since)
}

// sameOwners reports whether a and b have the same members owning zones.
func sameOwners(a, b *cluster.Ring) bool {
	if a == nil || b == nil {
		return a == b
	}
	return slices.Equal(a.Owners(), b.Owners()) && a.Replication == b.Replication
}

// setInterest publishes what the current ring gives this replica and tells
// the sources that have synced. While it waits for the replicas still
// syncing, that is what it will keep once they have announced
// (deferred.go).
func (m *Manager) setInterest(ctx actor.Context) {
	if m.cfg.Interest == nil {
		return
	}
	ring := m.ring
	if m.deferred.eventual != nil {
		ring = m.deferred.eventual
	}
	m.cfg.Interest.Set(ring, m.cfg.Self, m.cfg.Answer)
	if ctx == nil {
		return
	}
	for _, pid := range m.sources {
		ctx.Send(pid, &InterestChanged{})
	}
}
