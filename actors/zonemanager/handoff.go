package zonemanager

import (
	"cmp"
	"context"
	"errors"
	"slices"
	"strings"
	"time"

	"github.com/asynkron/protoactor-go/actor"
	"golang.org/x/sync/errgroup"

	"github.com/shardns/shardns/cluster"
	"github.com/shardns/shardns/model"
	"github.com/shardns/shardns/zone"
)

// Zone state handed from replica to replica. With sharded watches a
// replica that gains a namespace's zones lists their objects from the API
// server. When it cannot (the API server is down, or its list fails), the
// replicas that held those zones still do, through their grace period or
// their lameduck, or for good with replicationFactor 2: the gaining
// replica asks them for the objects (ExportZone, carried between replicas
// by the dispatch package's handoff actors) and serves the zone from them.
//
//   - It asks once a source says it cannot list (SourceStalled: the
//     Kubernetes source asks the API server's /readyz as its new watches
//     start, and says so when that fails or gets no answer in 5 s). A
//     list that is only slow is waited for: the zone loads from the
//     sources, as always, and questions go to the replicas that held it
//     meanwhile.
//   - What a peer handed over is provisional: each object a source sends
//     later is the source's; those no source sent by the end of the next
//     completed replay (the sources then hold every object of the zones
//     owned here) were deleted meanwhile, and are deleted here.
//   - A namespace without objects has no zone anywhere. A replica that
//     owns it, or owned it until the ring change and is in the grace
//     period since, with every object of its namespaces sent by its
//     sources, hands it over empty: the gaining replica then denies its
//     names (NXDOMAIN), as its owner always did. Were it left to wait for
//     the sources, a pod in a namespace without services, resolving an
//     outside name through its search path, would get SERVFAIL for the
//     first suffix (its own namespace's), which ends the search in musl.
//   - A zone with no replica to ask, or none that holds it, stays hidden:
//     its names are SERVFAIL once the old owners stop answering, never
//     NXDOMAIN, until the sources list it.

// ExportZone asks the Manager for the objects zone Key is built from, one
// page: those after (AfterKind, AfterName) in (kind, name) order, up to
// MaxBytes of their encodings (at least one object). Answered with
// *ZoneExport, by the zone's actor.
type ExportZone struct {
	Key       string
	AfterKind model.Kind
	AfterName string
	MaxBytes  int
}

// ZoneExport answers ExportZone. Held is false when this replica does not
// hold the zone complete: not at all, still loading it, or not synced.
type ZoneExport struct {
	Held    bool
	Objects []ExportedObject
	Done    bool // no object follows this page
}

// ExportedObject is one object of an exported zone.
type ExportedObject struct {
	Kind   model.Kind
	Name   string
	Frozen model.Frozen
}

// SourceStalled tells the Manager that a source cannot list objects it
// needs (its API server does not answer): the zones this replica gained
// and has not loaded are asked of the replicas that held them.
type SourceStalled struct{ Source string }

// ErrNotHeld is what FetchZone returns when the replica asked does not
// hold the zone.
var ErrNotHeld = errors.New("zone not held by that replica")

// FetchZone loads zone key, of namespace, from the replica whose actor
// remote listens on remote: the changes that build it, frozen.
type FetchZone func(ctx context.Context, remote, key, namespace string) ([]model.Change, error)

// peerSource names the changes another replica handed over.
const peerSource = "handoff"

// peerTag marks the barriers that show zones loaded from a peer, apart
// from the first sync's (0) and the replays' (their IDs).
const peerTag = uint64(1) << 63

// fetchTimeout bounds the loading of one zone from one replica.
const fetchTimeout = 10 * time.Second

// FetchParallel is how many zones are asked of other replicas at once.
const FetchParallel = 4

// maxHolders is how many replicas a gained zone is asked of, in turn.
const maxHolders = 3

// peerState is what one replica handed over of one zone, or why none did.
type peerState struct {
	key     string
	from    string
	changes []model.Change
	err     error
}

// noteMoved records what the ring change from old moved of the namespace
// zones this replica holds no zone of, with sharded watches:
//   - each one it gained, with the replicas that held it: if the sources
//     do not list it, it loads from them;
//   - each one it lost, when the sources had sent every object of what
//     old gave it (settled): a namespace without objects, which it hands
//     over empty until its grace ends.
func (m *Manager) noteMoved(old *cluster.Ring, wasServed func(key string) bool, settled bool) {
	if !m.sharded || m.ring == nil || !m.state.sync.synced {
		return
	}
	now := m.cfg.Now()
	m.handoff.expire(now)
	for ns := range m.routes.namespaces {
		for _, key := range m.namespaceKeys(ns) {
			if m.children[key] != nil {
				continue
			}
			switch namespaceZoneMove(wasServed(key), m.owns(key) && !m.isDeferred(key), settled) {
			case zoneGained:
				names, remotes := holders(m.cfg.Self, key, old, m.ring)
				m.handoff.from[key] = gainedZone{namespace: ns, holders: names, remotes: remotes}
			case zoneLostEmpty:
				m.handoff.lostEmpty[key] = now.Add(m.cfg.Grace)
			}
		}
	}
}

// heldEmpty reports whether this replica can hand namespace zone key over
// as empty (the pure heldEmpty decides).
func (m *Manager) heldEmpty(key string) bool {
	route := m.cfg.Answer.Domains.Route(key)
	ns, _, _ := strings.Cut(key, ".")
	_, known := m.routes.namespaces[ns]
	until, lost := m.handoff.lostEmpty[key]
	return heldEmpty(emptyZone{sharded: m.sharded, synced: m.state.sync.synced, clustered: m.ring != nil,
		running:       m.children[key] != nil,
		namespaceZone: route.Kind == zone.RouteZone && !route.Reverse && route.Key == key, known: known,
		lostInGrace:   lost && m.cfg.Now().Before(until),
		ownedNow:      m.ring != nil && m.ring.Owns(m.cfg.Self, key),
		loadingGained: loadingGained(m, key), deferred: m.isDeferred(key)})
}

// loading reports whether a replay loads zone key (loadFacts).
func (m *Manager) loading(key string) bool { return m.state.replay.keys[key] }

// listing reports whether a replay is under way that some source has not
// answered (loadFacts).
func (m *Manager) listing() bool {
	return m.state.replay.keys != nil && len(m.state.replay.waiting) > 0
}

// fetchGained asks the replicas that held them for the gained zones not
// loaded yet (toFetch), off the actor; each answer comes back as a
// peerState.
func (m *Manager) fetchGained(ctx actor.Context) {
	if m.cfg.FetchZone == nil {
		return
	}
	jobs := m.handoff.toFetch(m)
	if len(jobs) == 0 {
		return
	}
	m.cfg.Logger.Warn("gained zones not listed by the sources: loading them from the replicas that held them", "zones", len(jobs))
	fetch, root, self := m.cfg.FetchZone, ctx.ActorSystem().Root, ctx.Self()
	go func() {
		var g errgroup.Group
		g.SetLimit(FetchParallel)
		for _, j := range jobs {
			g.Go(func() error {
				st := &peerState{key: j.key}
				for _, remote := range j.zone.remotes {
					c, cancel := context.WithTimeout(context.Background(), fetchTimeout)
					st.changes, st.err = fetch(c, remote, j.key, j.zone.namespace)
					cancel()
					if st.err == nil {
						st.from = remote
						break
					}
				}
				root.Send(self, st)
				return nil
			})
		}
		_ = g.Wait()
	}()
}

// onPeerState loads a gained zone from what a replica handed over, unless
// the sources loaded it meanwhile, and shows it (with the zone of the same
// namespace and kind in every other cluster domain, built from the same
// objects) once its actor has published it.
func (m *Manager) onPeerState(ctx actor.Context, msg *peerState) {
	a := m.handoff.answered(m, msg.key, msg.changes, msg.err)
	if a.givenUp {
		return
	}
	if a.placementMoved {
		m.schedulePlacement(ctx)
	}
	m.cfg.Observer.HandedOver(a.result)
	switch a.result {
	case "not_held":
		// Those asked do not hold it complete: they were loading it
		// themselves, or do not know the namespace yet.
		m.cfg.Logger.Info("no replica holds a gained zone: it waits for its sources", "zone", msg.key)
		return
	case "failed":
		m.cfg.Logger.Warn("no replica that held a gained zone handed it over: it waits for its sources", "zone", msg.key, "err", msg.err)
		return
	case "empty":
		m.cfg.Logger.Info("a gained zone has no objects on the replica that held it: its names do not exist", "zone", msg.key, "from", msg.from)
		return
	}
	m.onApply(ctx, &Apply{Source: peerSource, Changes: msg.changes})
	pods := m.cfg.Answer.Domains.Route(msg.key).Pods
	var keys []string
	for _, origin := range m.cfg.Answer.Domains.Cluster {
		key := zone.ServiceZoneKey(a.namespace, origin)
		if pods {
			key = zone.PodZoneKey(a.namespace, origin)
		}
		keys = append(keys, key)
	}
	tag, shown := m.handoff.show(m, keys)
	for _, key := range shown {
		m.tell(ctx, key, m.children[key], &barrier{tag: tag})
	}
	if len(shown) > 0 {
		m.cfg.Logger.Info("gained zone loaded from a replica that held it", "zone", msg.key, "from", msg.from, "objects", len(msg.changes))
	}
}

// onPeerBarrierDone shows a zone loaded from a peer once its actor has
// published what the peer handed over (shown decides).
func (m *Manager) onPeerBarrierDone(msg *barrierDone) {
	if !m.handoff.shown(m, msg.tag, msg.key) {
		return
	}
	delete(m.state.replay.keys, msg.key)
	m.addSlots()
	if slot := m.cfg.Table.SlotOf(msg.key); slot != nil {
		slot.SetLoading(false) // visible before the placement stops sending it elsewhere
	}
	m.publishPlacement()
}

// dropUnconfirmed deletes the objects peers handed over that no source
// has sent since, once a replay completed (unconfirmed).
func (m *Manager) dropUnconfirmed(ctx actor.Context) {
	if len(m.handoff.provisional) == 0 {
		return
	}
	deletes := m.handoff.unconfirmed(m.routes.zonesOf.holds)
	if len(deletes) == 0 {
		return
	}
	m.cfg.Logger.Info("objects a replica handed over are gone from the sources: deleted", "objects", len(deletes))
	m.onApply(ctx, &Apply{Source: peerSource, Changes: deletes})
}

// onExportZone answers another replica's ExportZone: through the zone's
// actor when this replica holds the zone complete (owned, or lost and in
// its grace), with no object for a namespace it knows to have none
// (heldEmpty), else not held. Reverse zones are built by every replica
// from its own namespaces, and file and mesh zones by every replica:
// none is handed over.
func (m *Manager) onExportZone(ctx actor.Context, msg *ExportZone) {
	switch exportOf(exportedZone{heldEmpty: m.heldEmpty(msg.Key), running: m.children[msg.Key] != nil,
		synced: m.state.sync.synced, loading: m.state.replay.keys[msg.Key],
		shared: m.pooledKey(msg.Key) || m.routes.fileZones[msg.Key],
		held:   m.state.inGrace(msg.Key) || m.owns(msg.Key)}) {
	case exportEmpty:
		ctx.Respond(&ZoneExport{Held: true, Done: true})
	case exportZone:
		ctx.Forward(m.children[msg.Key])
	default:
		ctx.Respond(&ZoneExport{})
	}
}

// onExport answers ExportZone with a page of the objects the zone is
// built from.
func (z *zoneActor) onExport(ctx actor.Context, msg *ExportZone) {
	if z.reverse || z.mesh || z.fileZone != nil || z.rebuilding != 0 {
		ctx.Respond(&ZoneExport{})
		return
	}
	after := func(kind model.Kind, name string) bool {
		return cmp.Or(cmp.Compare(kind, msg.AfterKind), cmp.Compare(name, msg.AfterName)) > 0
	}
	var objs []ExportedObject
	add := func(kind model.Kind, name string, f model.Frozen) {
		if after(kind, name) {
			objs = append(objs, ExportedObject{Kind: kind, Name: name, Frozen: f})
		}
	}
	for name, f := range z.services {
		add(model.KindService, name, f)
	}
	for name, f := range z.slices {
		add(model.KindEndpointSlice, name, f)
	}
	if z.imported != nil {
		for name, f := range z.imported.Services {
			add(model.KindServiceImport, name, f)
		}
		for name, f := range z.imported.Slices {
			add(model.KindMultiClusterSlice, name, f)
		}
	}
	for name, p := range z.podObjs {
		if after(model.KindPod, name) {
			if f, ok := model.Freeze(p); ok {
				add(model.KindPod, name, f)
			}
		}
	}
	slices.SortFunc(objs, func(a, b ExportedObject) int {
		return cmp.Or(cmp.Compare(a.Kind, b.Kind), cmp.Compare(a.Name, b.Name))
	})
	n, size := 0, 0
	for ; n < len(objs); n++ {
		if n > 0 && size+len(objs[n].Frozen) > msg.MaxBytes {
			break
		}
		size += len(objs[n].Frozen)
	}
	ctx.Respond(&ZoneExport{Held: true, Objects: objs[:n:n], Done: n == len(objs)})
}
