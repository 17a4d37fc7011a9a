package zonemanager

import (
	"strings"

	"github.com/shardns/shardns/model"
)

// zoneIndex records which zones each object contributes to: its service
// zone and the reverse zones of its addresses, or a ServiceEntry's mesh
// zones. The routing (routes, routing.go) reads it to send a changed or
// deleted object's removal to the zones it leaves, and keeps a count of
// objects per zone beside it (routes.zoneSize).
//
// It holds an entry for every object of the zones a replica serves, tens
// of thousands, so each costs as little as it can: a zone is a number
// (keys names it, byKey numbers it), and an object's numbers lie in one
// array shared by all (ids), where its entry says where. An entry is 48
// bytes of map and 4 a zone, where a list of the zones' key strings was
// 64 and 16: at 20k services on six replicas, the largest held 1.5 MB of
// it (BenchmarkLoadShareSlack's share, with MemProfileRate 1).
type zoneIndex struct {
	of map[model.Key]zoneSpan
	// ids holds the zones of every entry; an entry replaced leaves its
	// old span unused until the array is packed again (pack), which
	// happens once more of it is unused than used.
	ids  []uint32
	used int
	// byKey numbers zone keys, keys names the numbers ("" for a number
	// free for the next new zone, on free).
	byKey map[string]uint32
	keys  []string
	free  []uint32
}

// zoneSpan is where an object's zones lie in zoneIndex.ids.
type zoneSpan struct{ at, n uint32 }

func newZoneIndex() zoneIndex {
	return zoneIndex{of: map[model.Key]zoneSpan{}, byKey: map[string]uint32{}}
}

// zones returns the numbers of the zones obj contributes to; key names
// them. The slice stays valid, and unchanged, across later calls to set.
func (x *zoneIndex) zones(obj model.Key) []uint32 {
	s, ok := x.of[obj]
	if !ok {
		return nil
	}
	return x.ids[s.at : s.at+s.n : s.at+s.n]
}

// key returns the zone key of number id.
func (x *zoneIndex) key(id uint32) string { return x.keys[id] }

// holds reports whether obj contributes to any zone.
func (x *zoneIndex) holds(obj model.Key) bool {
	_, ok := x.of[obj]
	return ok
}

// same reports whether obj contributes to exactly the zones keys, in order.
func (x *zoneIndex) same(obj model.Key, keys []string) bool {
	ids := x.zones(obj)
	if len(ids) != len(keys) {
		return false
	}
	for i, id := range ids {
		if x.keys[id] != keys[i] {
			return false
		}
	}
	return true
}

// set records that obj contributes to the zones keys (none: it is
// forgotten).
func (x *zoneIndex) set(obj model.Key, keys []string) {
	if old, ok := x.of[obj]; ok {
		x.used -= int(old.n)
	}
	if len(keys) == 0 {
		delete(x.of, obj)
		return
	}
	at := len(x.ids)
	for _, k := range keys {
		x.ids = append(x.ids, x.number(k))
	}
	x.of[obj] = zoneSpan{at: uint32(at), n: uint32(len(keys))}
	x.used += len(keys)
	if unused := len(x.ids) - x.used; unused > x.used && unused > 1024 {
		x.packIDs()
	}
}

// number returns the number of zone key, numbering it if it has none. The
// index keeps its own copy of a new key: the caller's was built for one
// change, a reverse zone's as part of a longer name.
func (x *zoneIndex) number(key string) uint32 {
	if id, ok := x.byKey[key]; ok {
		return id
	}
	key = strings.Clone(key)
	var id uint32
	if n := len(x.free); n > 0 {
		id, x.free = x.free[n-1], x.free[:n-1]
		x.keys[id] = key
	} else {
		id = uint32(len(x.keys))
		x.keys = append(x.keys, key)
	}
	x.byKey[key] = id
	return id
}

// forget gives up the number of zone key, which no object contributes to any
// more (its count in routes.zoneSize reached 0).
func (x *zoneIndex) forget(key string) {
	if id, ok := x.byKey[key]; ok {
		delete(x.byKey, key)
		x.keys[id] = ""
		x.free = append(x.free, id)
	}
}

// packIDs copies the spans in use into a new array of their size.
func (x *zoneIndex) packIDs() {
	ids := make([]uint32, 0, x.used)
	for obj, s := range x.of {
		x.of[obj] = zoneSpan{at: uint32(len(ids)), n: s.n}
		ids = append(ids, x.ids[s.at:s.at+s.n]...)
	}
	x.ids = ids
}

// pack makes the index anew at its size (see Manager.compactIndex): a Go
// map keeps the table of its largest size.
func (x *zoneIndex) pack() {
	x.of = resized(x.of)
	x.packIDs()
	x.byKey = resized(x.byKey)
}
