package zonemanager

import (
	"github.com/shardns/shardns/zone"
)

// File zones hold the records of a zone file under its origin as zone key.
// Their origins also go into the directory, so that every replica can
// tell a file zone name from one to forward. A file zone that may be
// transferred (transferTo set) is held by every replica, so a secondary
// can ask any of them for an AXFR; the others shard like every zone
// (routes.fileZones, routing.go).

// fileChange replaces the content of a file zone; a nil zone removes it.
type fileChange struct {
	zone *zone.FileZone
}
