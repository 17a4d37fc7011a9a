package zones

import (
	"github.com/shardns/shardns/model"
	"github.com/shardns/shardns/zone"
)

// Mesh zones hold Istio ServiceEntry hosts, under the host's parent
// domain as zone key. Their host names also go into the directory, so
// that every replica can tell a mesh name from one to forward (see
// zone.MeshHosts).

// routeMeshChange sends a ServiceEntry change to the mesh zones of its
// hosts, including zones it no longer contributes to, and keeps the mesh
// host names of the directory. It reports whether those names changed.
// Hosts left out on purpose are logged and counted when report is set
// (live changes, not replays, which send what was reported already).
func (m *Manager) routeMeshChange(c model.Change, batch func(string) *zoneApply, report bool) bool {
	var byZone map[string][]zone.MeshHost
	if e, ok := c.Object.(*model.ServiceEntry); ok {
		var skipped []zone.SkippedHost
		byZone, skipped = zone.MeshHosts(m.cfg.Answer, e)
		if report {
			m.reportSkipped(c.Key, skipped)
		}
	}
	var keys, names []string
	for key, hosts := range byZone {
		keys = append(keys, key)
		batch(key).mesh = append(batch(key).mesh, meshChange{source: c.Key, hosts: hosts})
		for _, h := range hosts {
			if h.Namespaces == nil {
				names = append(names, h.Name)
			}
			for _, ns := range h.Namespaces {
				names = append(names, zone.PrivateMeshName(ns, h.Name))
			}
		}
	}
	for _, id := range m.zonesOf.zones(c.Key) {
		key := m.zonesOf.key(id)
		if _, still := byZone[key]; !still {
			batch(key).mesh = append(batch(key).mesh, meshChange{source: c.Key})
		}
	}
	m.setZonesOf(c.Key, keys)
	return m.setMeshNames(c.Key, names)
}

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
