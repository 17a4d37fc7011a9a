package zonemanager

import (
	"maps"

	"github.com/asynkron/protoactor-go/actor"

	"github.com/shardns/shardns/model"
	"github.com/shardns/shardns/zone"
)

// With sharded watches (IngestSharded) a replica receives the Services,
// EndpointSlices and Pods of the namespaces whose zones it owns, and only
// those; so:
//
//   - Each replica builds every reverse zone from its own namespaces'
//     objects: the zone is partial, and a name missing from it is asked of
//     every other replica (the table's fan-out list), which answer from
//     theirs.
//   - The zones of other namespaces are unknown here; the placement lists
//     them from the namespace list, which every replica watches whole.
//   - A change for a namespace this replica holds no zone of is dropped (a
//     watch being narrowed may still deliver one); the objects of
//     namespaces whose zones a ring change took away are forgotten when
//     those zones are released.
//   - A leaving replica widens its watches (IngestWide): from then on it
//     keeps every change, so its reverse zones turn whole, and forgets
//     nothing. Should every replica stop at once, the last one answers
//     reverse names alone, with no share missing.

func (m *Manager) onIngestSharded() {
	if m.sharded {
		return
	}
	m.sharded = true
	m.publishFanOut()
}

// publishFanOut tells the query path which replicas hold the rest of the
// partial reverse zones: every other owner.
func (m *Manager) publishFanOut() {
	if !m.sharded || m.ring == nil {
		m.cfg.Table.SetFanOut(nil)
		return
	}
	others := []string{}
	for _, name := range m.ring.Owners() {
		if name != m.cfg.Self {
			others = append(others, name)
		}
	}
	m.cfg.Table.SetFanOut(others)
}

// namespaceKeys lists the zone keys built from namespace ns's objects.
func (m *Manager) namespaceKeys(ns string) []string {
	var keys []string
	for _, origin := range m.cfg.Answer.Domains.Cluster {
		keys = append(keys, zone.ServiceZoneKey(ns, origin))
		if m.cfg.Answer.Domains.PodZones {
			keys = append(keys, zone.PodZoneKey(ns, origin))
		}
	}
	return keys
}

// watched is what this replica's sources send it.
type watched struct {
	sharded bool // only the objects of the namespaces it owns (IngestSharded)
	wide    bool // every object again, before it leaves the ring (IngestWide)
	allPods bool // every pod, for autopath's index (Config.PodIndex)
}

// watched returns what this replica's sources send it now.
func (m *Manager) watched() watched {
	return watched{sharded: m.sharded, wide: m.wide, allPods: m.cfg.PodIndex != nil}
}

// holds reports whether a zone of namespace ns built from kind is owned
// here (and not deferred) or still held through its grace period.
func holds(f zoneFacts, domains *zone.Domains, kind model.Kind, ns string) bool {
	for _, origin := range domains.Cluster {
		key := zone.ServiceZoneKey(ns, origin)
		if kind == model.KindPod {
			key = zone.PodZoneKey(ns, origin)
		}
		if f.owns(key) && !f.isDeferred(key) || f.running(key) {
			return true
		}
	}
	return false
}

// accepts reports whether change c is for this replica. Deletes always
// are; so are pods while autopath indexes every pod (or no pod zone is
// built from them), and everything unless the watches are sharded, or
// once they widened before leaving.
func accepts(f zoneFacts, domains *zone.Domains, w watched, c model.Change) bool {
	if !w.sharded || w.wide || c.Object == nil {
		return true
	}
	if c.Key.Kind == model.KindPod && (w.allPods || !domains.PodZones) {
		return true
	}
	return holds(f, domains, c.Key.Kind, c.Key.Namespace)
}

// accepts reports whether change c is for this replica (the pure
// accepts decides).
func (m *Manager) accepts(c model.Change) bool {
	return accepts(m, &m.cfg.Answer.Domains, m.watched(), c)
}

// released lists the deletes of the objects (of those known) of
// namespaces this replica holds no zone of any more, with sharded,
// narrow watches: the sources no longer watch them, so no delete would
// come. Every pod is watched while autopath indexes them; ServiceEntries
// and zone files are every replica's.
func released(f zoneFacts, domains *zone.Domains, w watched, known func(yield func(model.Key) bool)) []model.Change {
	if !w.sharded || w.wide {
		return nil
	}
	var forget []model.Change
	for key := range known {
		switch key.Kind {
		case model.KindPod:
			if w.allPods {
				continue
			}
		case model.KindService, model.KindEndpointSlice, model.KindServiceImport, model.KindMultiClusterSlice:
		default:
			continue
		}
		if !holds(f, domains, key.Kind, key.Namespace) {
			forget = append(forget, model.Change{Key: key})
		}
	}
	return forget
}

// forgetReleased removes the objects of namespaces this replica holds no
// zone of any more, with the reverse records they gave its partial reverse
// zones: the source no longer watches them, so no delete would come.
func (m *Manager) forgetReleased(ctx actor.Context) {
	forget := released(m, &m.cfg.Answer.Domains, m.watched(), maps.Keys(m.routes.zonesOf.of))
	if len(forget) == 0 {
		return
	}
	m.onApply(ctx, &Apply{Source: "release", Changes: forget})
	// The indexes keep the tables of their largest size until the
	// release settles (compactIndex).
}
