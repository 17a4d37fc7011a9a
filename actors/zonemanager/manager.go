package zonemanager

import (
	"log/slog"
	"maps"
	"slices"
	"sync/atomic"
	"time"

	"github.com/asynkron/protoactor-go/actor"
	"github.com/asynkron/protoactor-go/scheduler"

	"github.com/shardns/shardns/cluster"
	"github.com/shardns/shardns/zone"
)

// Config is what the Manager needs. Every field is required.
type Config struct {
	Answer  *zone.Config     // record options shared with the listeners
	Table   *zone.Table      // where zone actors publish
	Sources []string         // sources that must sync before the node is ready
	Now     func() time.Time // clock for SOA serials
	Logger  *slog.Logger
	// StartupTimeout bounds how long missing names get SERVFAIL while
	// sources sync; after it, what is known is served. 0 waits for ever.
	StartupTimeout time.Duration
	// Synced is set once every source has synced: the node is ready.
	Synced *atomic.Bool
	// PodIndex, when set, is kept up to date with pod addresses (autopath).
	PodIndex *zone.PodIndex
	// Self is this replica's name in the ring.
	Self string
	// Grace is how long a zone this replica lost keeps serving queries
	// sent to it, while its new owners load it.
	Grace time.Duration
	// PendingWait is how long a replica that announced itself waits for
	// the replicas still syncing before it loads the zones they will own
	// (deferred.go); 0: half of Grace, or DefaultPendingWait without one.
	PendingWait time.Duration
	// Loaded is set while no gained zone is still loading, and none waits
	// for the replicas still syncing.
	Loaded *atomic.Bool
	// Ring is the ring at start; nil owns every zone. Later rings come as
	// RingChanged.
	Ring *cluster.Ring
	// Interest, when set, is kept telling the sources which namespaces
	// this replica's zones are built from.
	Interest *Interest
	// FetchZone loads a zone from another replica that holds it: with
	// sharded watches, a gained zone the sources do not list loads from
	// the replicas that held it (handoff.go). Nil: only from the sources.
	FetchZone FetchZone
	// Observer is told what the Manager and its zones did; nil: nobody.
	Observer Observer
}

// Manager routes source changes to zone actors and owns the directory:
// routes decides where each change goes (routing.go), State which zone
// actors that spawns, reaches and stops (state.go), and the Manager
// carries it out.
type Manager struct {
	cfg      Config
	hooks    testHooks
	routes   routes                // where each object's changes went (routing.go)
	children map[string]*actor.PID // a zone's actor, or the pool of a reverse zone (reversepool.go)
	pools    [reversePools]*actor.PID
	// newSlots are the table slots of zones spawned (a slot) or stopped
	// (nil) since the table was last told: it is told once a message is
	// handled, or before anything reads it, with one copy of its slot map
	// for all (installSlots).
	newSlots map[string]*zone.Slot
	serial   uint32

	// Sharding (see placement.go).
	ring     *cluster.Ring         // nil: this replica owns every zone
	sources  map[string]*actor.PID // source actors, for replays
	state    State                 // the decisions Step makes (state.go)
	deferred deferredState         // zones left to replicas still syncing (deferred.go)
	handoff  handoffState
	departed cluster.Departed // owners that left the ring, asked while their zones load elsewhere
	// placementStale says that since placement was last published a zone
	// it places came or went, or (with sharded watches) a namespace.
	placementStale bool
	placementDue   bool // a publishPlacement message is in the mailbox
	// sharded is set once a source says it receives only this replica's
	// namespaces (see sharded.go).
	sharded bool
	// wide is set once that source watches every namespace again, before
	// this replica leaves the ring (see sharded.go).
	wide bool

	// Restarted zone actors (see rebuild.go).
	rebuildAfterSync map[string]bool      // restarted before every source synced
	rebuiltAt        map[string]time.Time // when each zone was last rebuilt
}

// NewManagerProps returns the props of a Manager. Zone actors are its
// children and are restarted on every failure, however many: a stopped
// zone actor would take its zone's names with it (NXDOMAIN), while a
// restarted one keeps serving its last snapshot (see rebuild.go).
func NewManagerProps(cfg Config) *actor.Props {
	return newManagerProps(cfg, testHooks{})
}

// testHooks let this package's tests reach into zone actors (export_test.go
// sets them); a running node has none.
type testHooks struct {
	// fault runs before a zone actor applies a batch, so a test can make
	// it fail.
	fault func(key string, batch *zoneApply)
	// repacked runs after a zone actor built its snapshot again for a
	// repack.
	repacked func(key string)
	// reversePools is how many pools the reverse zones share, at most
	// the default (reversepool.go); 0: the default.
	reversePools int
}

func newManagerProps(cfg Config, hooks testHooks) *actor.Props {
	return actor.PropsFromProducer(func() actor.Actor { m := newManager(cfg); m.hooks = hooks; return m },
		actor.WithSupervisor(actor.NewRestartingStrategy()), BurstMailbox())
}

// BurstMailbox is the mailbox of the actors that lists flood: sources,
// the Manager and the zones. protoactor's default mailbox queues in a
// ring that doubles when full and never shrinks, so each such actor kept,
// for as long as it lived, a ring as long as the longest burst it had
// queued (a few hundred kilobytes each after a list of 20k services).
// This one links a node per message, freed as it is read.
func BurstMailbox() actor.PropsOption {
	return actor.WithMailbox(actor.UnboundedLockfree())
}

func newManager(cfg Config) *Manager {
	if cfg.Grace == 0 {
		cfg.Grace = defaultGrace
	}
	if cfg.Observer == nil {
		cfg.Observer = NopObserver{}
	}
	m := &Manager{cfg: cfg, routes: newRoutes(cfg.Answer, cfg.PodIndex != nil), children: map[string]*actor.PID{},
		sources: map[string]*actor.PID{}, state: newState(cfg.Grace, cfg.Sources), ring: cfg.Ring,
		handoff:          newHandoffState(),
		rebuildAfterSync: map[string]bool{}, rebuiltAt: map[string]time.Time{}}
	if cfg.Loaded != nil {
		cfg.Loaded.Store(true)
	}
	m.setInterest(nil)
	return m
}

// Receive handles source batches and sync notices.
func (m *Manager) Receive(ctx actor.Context) {
	switch msg := ctx.Message().(type) {
	case *actor.Started:
		m.onStarted(ctx)
	case *startupTimeout:
		m.carry(ctx, m.state.Step(m, msg))
	case *Apply:
		m.onApply(ctx, msg)
	case *Synced:
		m.onSynced(ctx, msg)
	case *barrierDone:
		m.onBarrierDone(ctx, msg)
	case *IngestSharded:
		m.onIngestSharded()
	case *IngestWide:
		m.wide = true
	case *RingChanged:
		m.onRingChanged(ctx, msg)
	case *ReplayDone:
		m.carry(ctx, m.state.Step(m, msg))
	case *releaseZones:
		m.onReleaseZones(ctx, msg)
	case *loadDeferred:
		m.onLoadDeferred(ctx, msg)
	case *compactKept:
		m.onCompactKept(ctx)
	case *releaseSettled:
		m.settled()
	case *flushPlacement:
		m.onPublishPlacement()
	case *departuresOver:
		m.departed = m.departed.Expire(time.Now())
		m.publishPlacement()
	case *zoneRestarted:
		m.onZoneRestarted(ctx, msg)
	case *SourceStalled:
		m.fetchGained(ctx)
	case *peerState:
		m.onPeerState(ctx, msg)
	case *ExportZone:
		m.onExportZone(ctx, msg)
	}
	m.installSlots()
	m.carry(ctx, m.state.reportGrace()) // what a message outside Step changed
}

// carry carries out, in order, the effects Step decided.
func (m *Manager) carry(ctx actor.Context, effects []Effect) {
	for _, e := range effects {
		switch e := e.(type) {
		case SpawnZone:
			m.spawnZone(ctx, e.Key, e.Hidden)
		case StopZones:
			m.release(ctx, e.Keys)
		case SendBatches:
			for _, z := range e.Zones {
				m.tell(ctx, z.key, m.children[z.key], z.apply)
			}
		case StopZone:
			if pid := m.children[e.Key]; pid != nil {
				m.stopZone(ctx, e.Key, pid)
				delete(m.children, e.Key)
				m.setSlot(e.Key, nil)
			}
		case Timer:
			msg := e.Msg
			if g, ok := msg.(*graceEnds); ok {
				msg = m.pinned(g)
			}
			scheduler.NewTimerScheduler(ctx).SendOnce(e.After, ctx.Self(), msg)
		case LoadZones:
			m.startReplay(ctx, e.Keys, true)
		case CheckLoaded:
			if m.state.replay.keys == nil {
				m.setLoaded(!m.waitingForPending()) // nothing is loading, whatever the node assumed
			}
		case Settle:
			m.settled()
		case TellZone:
			m.tell(ctx, e.Key, m.children[e.Key], e.Msg)
		case FinishReplay:
			m.finishReplay(ctx)
		case RebuildRestarted:
			m.rebuildRestarted(ctx)
		case SyncBarrier:
			// The zones running now, the restarted ones rebuilt among them.
			m.carry(ctx, m.state.Step(m, syncZones{keys: slices.Sorted(maps.Keys(m.children))}))
		case MarkSynced:
			m.markSynced()
		case WarnDeferredLoad:
			m.cfg.Logger.Warn("replicas still syncing did not announce in time: loading the zones they would own",
				"zones", e.Zones)
		case ServeUnsynced:
			m.cfg.Logger.Warn("sources not synced within the startup timeout; serving what is known",
				"timeout", m.cfg.StartupTimeout, "waiting", e.Waiting)
			m.publishDirectory()
		case ObserveHandoff:
			m.cfg.Observer.Handoff(e.Gained, e.Lost)
		case ObserveGrace:
			m.cfg.Observer.Grace(e.Keys)
		case ObserveLoading:
			m.cfg.Observer.Loading()
		}
	}
}

// installSlots publishes the slots of the zones spawned and stopped since
// it last ran.
func (m *Manager) installSlots() {
	if len(m.newSlots) > 0 {
		m.cfg.Table.SetSlots(m.newSlots)
		m.newSlots = nil
	}
}

// addSlots publishes the slots of the zones spawned since installSlots
// last ran, not yet those stopped: it runs before what tells queries
// that a zone is here (placement, the directory, a load's end), which
// must find it, and a stopped zone's slot goes after the placement that
// sends its queries elsewhere.
func (m *Manager) addSlots() {
	if len(m.newSlots) == 0 {
		return
	}
	added := map[string]*zone.Slot{}
	for key, slot := range m.newSlots {
		if slot != nil {
			added[key] = slot
			delete(m.newSlots, key)
		}
	}
	m.cfg.Table.SetSlots(added)
}

// setSlot notes the slot of key for installSlots; nil drops it.
func (m *Manager) setSlot(key string, slot *zone.Slot) {
	if m.newSlots == nil {
		m.newSlots = map[string]*zone.Slot{}
	}
	m.newSlots[key] = slot
}

func (m *Manager) onStarted(ctx actor.Context) {
	if len(m.state.sync.unsynced) == 0 {
		// No source at all (a forwarder, hosts or stub-domain server):
		// nothing to wait for.
		m.markSynced()
		return
	}
	m.publishDirectory()
	if m.cfg.StartupTimeout > 0 {
		scheduler.NewTimerScheduler(ctx).SendOnce(m.cfg.StartupTimeout, ctx.Self(), &startupTimeout{})
	}
}

// onSynced counts a source as synced (Step). With the last one, every
// zone gets a barrier: readiness waits until each has published what the
// sources sent, so a node (or a reloaded configuration) never turns ready
// with zones still empty.
func (m *Manager) onSynced(ctx actor.Context, msg *Synced) {
	if msg.From != nil {
		m.sources[msg.Source] = msg.From
		// It may have sorted some objects by an older ring.
		ctx.Send(msg.From, &InterestChanged{})
	}
	if m.state.sync.unsynced[msg.Source] {
		m.cfg.Logger.Info("source synced", "source", msg.Source)
	}
	m.carry(ctx, m.state.Step(m, msg))
}

func (m *Manager) onBarrierDone(ctx actor.Context, msg *barrierDone) {
	if msg.tag&peerTag != 0 {
		m.onPeerBarrierDone(msg)
		return
	}
	if msg.tag != 0 { // a replay's
		m.carry(ctx, m.state.Step(m, msg))
		return
	}
	m.carry(ctx, m.state.Step(m, msg)) // the sync barrier's
}

func (m *Manager) markSynced() {
	m.settled() // first, so whoever sees the node synced sees the release asked for
	m.state.sync.synced = true
	m.publishDirectory()
}

func (m *Manager) settled() {
	m.compactIndex()
	m.cfg.Observer.Settled()
}

// onApply routes a batch of changes (routes.apply) and carries out what
// Step decides of the zones it reaches.
func (m *Manager) onApply(ctx actor.Context, msg *Apply) {
	if msg.Replay == 0 && m.state.sync.synced && msg.Source != peerSource {
		m.cfg.Observer.Changes(len(msg.Changes))
	}
	m.handoff.confirm(msg)
	plan := m.routes.apply(msg.Changes, m.accepts, m.sharded, msg.Replay == 0)
	for _, u := range plan.unthawed {
		m.cfg.Logger.Error("dropping an object that does not thaw", "object", u.key.String(), "err", u.err)
	}
	for _, s := range plan.skipped {
		m.cfg.Logger.Info("ServiceEntry host not answered", "object", s.entry.String(), "host", s.host.Host, "why", s.host.Why, "reason", s.host.Reason)
		m.cfg.Observer.MeshSkipped(s.host.Why)
	}
	for _, p := range plan.pods {
		if p.namespace == "" {
			m.cfg.PodIndex.Delete(p.ip)
		} else {
			m.cfg.PodIndex.Set(p.ip, p.namespace)
		}
	}
	m.placementStale = m.placementStale || plan.placementStale
	m.carry(ctx, m.state.Step(m, applied{zones: plan.zones, emptied: plan.emptied, replay: msg.Replay, sharded: m.sharded}))
	if plan.dirChanged {
		m.publishDirectory()
	}
	if m.placementStale {
		m.schedulePlacement(ctx)
	}
}

func isReverseKey(cfg *zone.Config, key string) bool {
	return isReverseRoute(cfg.Domains.Route(key))
}

// isReverseRoute reports whether r is the route of a reverse zone's key.
func isReverseRoute(r zone.Route) bool {
	return r.Kind == zone.RouteZone && r.Reverse
}

// compactIndex makes the per-object indexes anew, each map at its size
// and the lists of every object in one array, once a load or a release is
// over (settled). A Go map keeps the table of its largest size, so a
// replica that handed zones over would keep the entries of every object it
// ever held; and each object's list, made while its API object was
// decoded and thawed, lies among that garbage. At 20k services the
// replicas of six held 1-3 MB less live heap for it (TestShardedIngest),
// for a copy of some 10,000 entries per load or release.
func (m *Manager) compactIndex() {
	m.routes.compact()
	m.children = resized(m.children)
	m.state.grace = resized(m.state.grace)
	m.rebuiltAt = resized(m.rebuiltAt)
}

// packed copies index into a map of its size whose lists share one array.
// A list replaced later leaves its part of the array unused until the
// next packing.
func packed[K comparable, V any](index map[K][]V) map[K][]V {
	total := 0
	for _, list := range index {
		total += len(list)
	}
	all := make([]V, 0, total)
	out := make(map[K][]V, len(index))
	for key, list := range index {
		start := len(all)
		all = append(all, list...)
		out[key] = all[start:len(all):len(all)]
	}
	return out
}

// resized copies m into a map of its current size.
func resized[K comparable, V any](m map[K]V) map[K]V {
	out := make(map[K]V, len(m))
	maps.Copy(out, m)
	return out
}

// running reports whether the actor of zone key runs here (zoneFacts).
func (m *Manager) running(key string) bool { return m.children[key] != nil }

// inGrace reports whether zone key, lost to a ring change, is still held
// through its grace period (zoneFacts).
func (m *Manager) inGrace(key string) bool { return m.state.inGrace(key) }

// spawnZone starts the actor of key; a loading zone is hidden from
// queries until its replay completes.
func (m *Manager) spawnZone(ctx actor.Context, key string, loading bool) *actor.PID {
	r := m.cfg.Answer.Domains.Route(key)
	slot := &zone.Slot{}
	slot.SetLoading(loading)
	m.setSlot(key, slot)
	z := &zoneActor{key: key, origin: r.Origin, reverse: r.Reverse, pods: r.Pods,
		mesh: r.Kind == zone.RouteExternal, cfg: m.cfg.Answer,
		slot: slot, table: m.cfg.Table, now: m.cfg.Now, log: m.cfg.Logger,
		fault: m.hooks.fault, repacked: m.hooks.repacked, observer: m.cfg.Observer}
	var pid *actor.PID
	if isReverseRoute(r) { // pooledKey, from the route at hand
		pid = m.spawnPooled(ctx, key, z)
	} else {
		var incarnations atomic.Int32 // the supervisor calls the producer again on each restart
		pid = ctx.Spawn(actor.PropsFromProducer(func() actor.Actor {
			fresh := z.identity()
			fresh.restarted = incarnations.Add(1) > 1
			return fresh
		}, BurstMailbox()))
	}
	m.children[key] = pid
	return pid
}

func (m *Manager) publishDirectory() {
	m.addSlots() // a directory that says synced must find the zones
	m.serial = nextSerial(m.serial, m.cfg.Now())
	ns, mesh, files := m.routes.directory()
	m.cfg.Table.SetDirectory(zone.NewDirectory(m.cfg.Answer, ns, m.state.sync.serving(), m.serial).
		WithMesh(mesh).WithFiles(files))
	if m.cfg.Synced != nil {
		m.cfg.Synced.Store(m.state.sync.synced)
	}
}
