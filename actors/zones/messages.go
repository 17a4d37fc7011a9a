// Package zones holds the zone actors and the manager that routes source
// updates to them.
//
// Sources send Apply batches to the Manager. The Manager keeps the
// replicated directory (namespaces, sync state), computes the zone keys of
// every change and forwards it to the zone actor that owns that key,
// spawning it on first use and stopping it when its zone empties. A zone
// actor is the only writer of its zone: it applies changes to private maps
// and publishes an immutable snapshot into the zone.Table, batching all
// changes already in its mailbox into one publish.
package zones

import (
	"github.com/shardns/shardns/model"
	"github.com/shardns/shardns/zone"
)

// Apply is a batch of changes from one source.
type Apply struct {
	Source  string
	Changes []model.Change
}

// Synced tells the Manager that Source finished its initial load.
type Synced struct {
	Source string
}

// serviceChange is a Service or EndpointSlice change for a service zone.
type serviceChange struct {
	change model.Change
}

// ptrChange replaces the reverse records that one source object
// contributes to a reverse zone; empty PTRs removes them.
type ptrChange struct {
	source model.Key
	ptrs   []zone.PTR
}

// zoneApply is the part of a batch that concerns one zone.
type zoneApply struct {
	services []serviceChange
	ptrs     []ptrChange
	pods     []model.Change
}

// barrier asks a zone actor to publish everything it has applied, then
// answer barrierDone: once every zone has, all changes sent before the
// barrier are visible to queries.
type barrier struct{}

// barrierDone is a zone actor's answer to barrier.
type barrierDone struct{}

// startupTimeout tells the Manager that the startup timeout has passed.
type startupTimeout struct{}

// flush makes a zone actor publish what it has applied so far. A zone actor
// sends it to itself once per batch, so every change queued before it is
// in the same snapshot.
type flush struct{}
