package zones

import (
	"github.com/shardns/shardns/model"
	"github.com/shardns/shardns/zone"
)

// File zones hold the records of a zone file under its origin as zone key.
// Their origins also go into the directory, so that every replica can
// tell a file zone name from one to forward. A file zone that may be
// transferred (transferTo set) is held by every replica, so a secondary
// can ask any of them for an AXFR; the others shard like every zone.

// fileChange replaces the content of a file zone; a nil zone removes it.
type fileChange struct {
	zone *zone.FileZone
}

// routeFileChange sends a zone file's content to its zone and keeps the
// file origins of the directory. It reports whether those changed.
func (m *Manager) routeFileChange(c model.Change, batch func(string) *zoneApply) bool {
	key := zone.Fqdn(c.Key.Name)
	f, _ := c.Object.(*zone.FileZone)
	batch(key).file = &fileChange{zone: f}
	_, had := m.fileZones[key]
	if f == nil {
		m.setZonesOf(c.Key, nil)
		delete(m.fileZones, key)
		return had
	}
	m.setZonesOf(c.Key, []string{key})
	m.fileZones[key] = len(f.TransferTo) > 0
	return !had
}

// fileOrigins returns the origins of the file zones, for the directory.
func (m *Manager) fileOrigins() map[string]struct{} {
	out := make(map[string]struct{}, len(m.fileZones))
	for o := range m.fileZones {
		out[o] = struct{}{}
	}
	return out
}
