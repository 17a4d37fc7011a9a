package zonemanager

import (
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

// setFileZone records whether the file zone of key exists (obj non-nil)
// and may be transferred, and reports whether the file origins changed.
func (m *Manager) setFileZone(key string, obj any) bool {
	_, had := m.fileZones[key]
	f, _ := obj.(*zone.FileZone)
	if f == nil {
		delete(m.fileZones, key)
		return had
	}
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
