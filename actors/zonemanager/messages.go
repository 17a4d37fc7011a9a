// Package zonemanager holds the zone actors and the manager that routes
// source updates to them.
//
// Sources send Apply batches to the Manager. The Manager keeps the
// replicated directory (namespaces, sync state), computes the zone keys of
// every change and forwards it to the zone actor that owns that key,
// spawning it on first use and stopping it when its zone empties. A zone
// actor is the only writer of its zone: it applies changes to private maps
// and publishes an immutable snapshot into the zone.Table, batching all
// changes already in its mailbox into one publish.
//
// The Manager's decisions are pure: routes.apply decides where a batch's
// changes go and what it does to the directory and the placement
// (routing.go); State.Step decides which zone actors a routed batch
// spawns, reaches and stops, and what a ring change, a grace period's
// end, a replay's answers, the first sync and the end of the wait for
// replicas still syncing do (state.go), returning effects the Manager
// carries out (carry); lifecycle.go, deferred.go, the placement
// (placement.go), what sharded watches take and forget (sharded.go), the
// rebuilds of restarted zones (rebuild.go) and the handoff's bookkeeping
// (handoffplan.go) decide the rest. Each is table-tested without an actor
// system; the Manager only fetches, sends, spawns, stops and sets timers.
package zonemanager

import (
	"github.com/asynkron/protoactor-go/actor"

	"github.com/shardns/shardns/cluster"
	"github.com/shardns/shardns/model"
	"github.com/shardns/shardns/zone"
)

// Apply is a batch of changes from one source.
type Apply struct {
	Source  string
	Changes []model.Change
	// Replay is the Replay.ID this batch answers; 0 for live changes.
	Replay uint64
}

// Synced tells the Manager that Source finished its initial load. From is
// the source actor, which the Manager asks for replays.
type Synced struct {
	Source string
	From   *actor.PID
}

// Replay asks a source to send every object it holds again, as Apply
// batches marked with ID, then ReplayDone: how a replica loads the zones
// it gains when the ring changes.
type Replay struct {
	ID uint64
}

// ReplayDone ends a source's answer to Replay.
type ReplayDone struct {
	Source string
	ID     uint64
}

// IngestSharded tells the Manager that a source receives only the objects
// of the namespaces whose zones this replica owns (sharded watches): every
// replica then builds each reverse zone from its own namespaces, and the
// queries for the others' namespace zones are placed by the namespace list.
// Sent before the source's first batch.
type IngestSharded struct{}

// WatchEverything asks a source that receives only this replica's
// namespaces to receive every object again, and to answer
// WatchingEverything once it holds them all. A replica sends it before it
// leaves the ring: if every replica is stopping at once, the last ones
// answer every zone alone through their lameduck (from what the source
// holds, as a replay), and they cannot wait for a list then.
type WatchEverything struct{}

// WatchingEverything answers WatchEverything.
type WatchingEverything struct{}

// IngestWide tells the Manager that a source with sharded watches widens
// them to every namespace (WatchEverything): what it sends from then on is
// for this replica, whatever it owns. The reverse zones, built from every
// namespace, turn whole, so that a replica left alone answers reverse
// names right. Sent before the source's first batch from the wide watches.
type IngestWide struct{}

// RingChanged tells the Manager who owns what now. A nil Ring means this
// replica owns every zone.
type RingChanged struct {
	Ring *cluster.Ring
}

// releaseZones ends the grace period of the zones a ring change took
// from this replica: zone key → its actor then.
type releaseZones struct {
	zones map[string]*actor.PID
}

// departuresOver makes the Manager publish its placement again once the
// departures it noted are past their grace, without them.
type departuresOver struct{}

// flushPlacement makes the Manager publish the placement it deferred
// (see schedulePlacement).
type flushPlacement struct{}

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

// meshChange replaces the hosts that one ServiceEntry contributes to a
// mesh zone; empty hosts removes them.
type meshChange struct {
	source model.Key
	hosts  []zone.MeshHost
}

// zoneApply is the part of a batch that concerns one zone.
type zoneApply struct {
	services []serviceChange
	// imported are ServiceImport and imported EndpointSlice changes, for
	// the multicluster names of a service zone's namespace.
	imported []model.Change
	ptrs     []ptrChange
	pods     []model.Change
	mesh     []meshChange
	file     *fileChange
}

// barrier asks a zone actor to publish everything it has applied, then
// answer barrierDone: once every zone has, all changes sent before the
// barrier are visible to queries. tag tells the sync barrier (0) from a
// replay's (its ID).
type barrier struct{ tag uint64 }

// repack asks a zone actor to build its published snapshot again, as it
// is, into new memory, and answer repacked: sent to the zones a replica
// keeps when it stops the ones it handed over (see release, placement.go).
type repack struct{}

// repacked is a zone actor's answer to repack.
type repacked struct{}

// compactKept tells the Manager that the zones a release stopped are
// gone and collected: time to build the kept ones a second time.
type compactKept struct{}

// releaseSettled tells the Manager that the rebuilds of a release are
// done, so the memory it freed can be returned.
type releaseSettled struct{}

// barrierDone is a zone actor's answer to barrier.
type barrierDone struct {
	tag uint64
	key string
}

// zoneRestarted tells the Manager that its supervisor restarted the zone
// actor pid, or the host pid of the zones keys: whatever the failed actor
// had applied but not published is lost, so the zones are rebuilt from
// the sources.
type zoneRestarted struct {
	keys []string
	pid  *actor.PID
}

// rebuild makes a restarted zone actor forget what it resumed from and
// refill from the replay id, publishing nothing until that replay's
// barrier: its last snapshot serves meanwhile.
type rebuild struct{ id uint64 }

// startupTimeout tells the Manager that the startup timeout has passed.
type startupTimeout struct{}

// flush makes a zone actor publish what it has applied so far. A zone actor
// sends it to itself once per batch, so every change queued before it is
// in the same snapshot.
type flush struct{}
