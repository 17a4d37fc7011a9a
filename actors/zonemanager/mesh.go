package zonemanager

import (
	"github.com/shardns/shardns/model"
	"github.com/shardns/shardns/zone"
)

// Mesh zones hold Istio ServiceEntry hosts, under the host's parent
// domain as zone key. Their host names also go into the directory, so
// that every replica can tell a mesh name from one to forward (see
// zone.MeshHosts).

// setMeshNames records the host names an entry contributes, counting
// entries per name, and reports whether the set of names changed.
func (m *Manager) setMeshNames(key model.Key, names []string) bool {
	changed := false
	for _, n := range m.meshOf[key] {
		m.meshNames[n]--
		if m.meshNames[n] == 0 {
			delete(m.meshNames, n)
			changed = true
		}
	}
	for _, n := range names {
		if m.meshNames[n] == 0 {
			changed = true
		}
		m.meshNames[n]++
	}
	if len(names) == 0 {
		delete(m.meshOf, key)
	} else {
		m.meshOf[key] = names
	}
	return changed
}

// reportSkipped logs and counts the hosts of one entry left out on
// purpose.
func (m *Manager) reportSkipped(key model.Key, skipped []zone.SkippedHost) {
	for _, s := range skipped {
		m.cfg.Logger.Info("ServiceEntry host not answered", "object", key.String(), "host", s.Host, "why", s.Why, "reason", s.Reason)
		m.cfg.Observer.MeshSkipped(s.Why)
	}
}
