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

// handoffState is what the Manager knows of the zones it may load from
// other replicas.
type handoffState struct {
	from     map[string]gainedZone // gained zone key → where it may be loaded from
	fetching map[string]bool
	// provisional are the objects peers handed over that no source has
	// sent since.
	provisional map[model.Key]bool
	tags        uint64
	showing     map[uint64][]string // barrier tag → the zones it shows
	// lostEmpty are the namespace zones a ring change took from this
	// replica while it owned them without objects, and when its grace
	// for them ends: until then it hands them over empty. Those past
	// their grace are dropped at the next ring change.
	lostEmpty map[string]time.Time
}

// gainedZone is a zone a ring change gave this replica.
type gainedZone struct {
	namespace string
	holders   []string // the replicas that held it, best first
	remotes   []string // their actor remotes
}

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
	for key, until := range m.handoff.lostEmpty {
		if !now.Before(until) {
			delete(m.handoff.lostEmpty, key)
		}
	}
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

// zoneMove is what a ring change did to a namespace zone that has no
// actor here.
type zoneMove uint8

const (
	zoneUnmoved   zoneMove = iota
	zoneGained             // served here now: loaded from its holders if the sources do not list it
	zoneLostEmpty          // served here before, with every object sent: handed over empty for the grace
)

// namespaceZoneMove decides what a ring change did to a namespace zone
// with no actor here, from whether it was served here before and is now,
// and whether the sources had sent every object of what the old ring
// gave this replica (settled): only then is a zone without an actor one
// without objects.
func namespaceZoneMove(was, is, settled bool) zoneMove {
	switch {
	case is && !was:
		return zoneGained
	case was && !is && settled:
		return zoneLostEmpty
	}
	return zoneUnmoved
}

// heldEmpty reports whether this replica can hand namespace zone key over
// as empty: it knows the namespace, holds no zone of it, and owns it with
// every object of its namespaces sent by the sources, or lost it so in a
// ring change whose grace has not ended.
func (m *Manager) heldEmpty(key string) bool {
	if !m.sharded || !m.state.sync.synced || m.ring == nil || m.children[key] != nil {
		return false
	}
	route := m.cfg.Answer.Domains.Route(key)
	if route.Kind != zone.RouteZone || route.Reverse || route.Key != key {
		return false
	}
	ns, _, _ := strings.Cut(key, ".")
	if _, known := m.routes.namespaces[ns]; !known {
		return false
	}
	if until, ok := m.handoff.lostEmpty[key]; ok && m.cfg.Now().Before(until) {
		return true
	}
	return m.ring.Owns(m.cfg.Self, key) && !m.loadingGained(key) && !m.isDeferred(key)
}

// gaining reports whether key is a namespace zone a ring change gave this
// replica that has not loaded yet: its names are not this replica's to
// deny until it has.
func (m *Manager) gaining(key string) bool {
	_, gained := m.handoff.from[key]
	return gained && m.loadingGained(key)
}

// holders lists the replicas that owned key in ring old, then its other
// owners in ring now (with replicationFactor 2 one of them kept it), and
// their actor remotes: those still on the ring first, since a replica no
// longer on it may have been killed (asking it costs a timeout) rather
// than be leaving; self and members found down left out.
func holders(self, key string, old, now *cluster.Ring) (names, remotes []string) {
	var gone, goneRemotes []string
	seen := map[string]bool{self: true}
	for _, r := range []*cluster.Ring{old, now} {
		order := r.Order(key)
		if rf := r.Replication; rf > 0 && rf < len(order) {
			order = order[:rf]
		}
		for _, name := range order {
			m, ok := r.Member(name)
			if seen[name] || !ok || m.Down || m.Remote == "" {
				continue
			}
			seen[name] = true
			switch cur, ok := now.Member(name); {
			case !ok:
				gone, goneRemotes = append(gone, name), append(goneRemotes, m.Remote)
			case !cur.Down: // down: its port refuses connections
				names, remotes = append(names, name), append(remotes, m.Remote)
			}
		}
	}
	names, remotes = append(names, gone...), append(remotes, goneRemotes...)
	n := min(len(remotes), maxHolders)
	return names[:n], remotes[:n]
}

// pruneGained forgets the gained zones that have loaded, or moved on.
func (m *Manager) pruneGained() {
	for key := range m.handoff.from {
		if !m.handoff.fetching[key] && !m.loadingGained(key) {
			delete(m.handoff.from, key)
		}
	}
}

// loadingGained reports whether key is a zone owned here that has not
// loaded yet: unknown here, or hidden while a replay fills it, and some
// source has not answered that replay. Once every source has, the zones
// loading wait for the replay's barrier, which shows them.
func (m *Manager) loadingGained(key string) bool {
	return m.state.replay.keys != nil && len(m.state.replay.waiting) > 0 && m.owns(key) && !m.isDeferred(key) &&
		(m.children[key] == nil || m.state.replay.keys[key])
}

// fetchGained asks the replicas that held them for the gained zones not
// loaded yet, off the actor; each answer comes back as a peerState.
func (m *Manager) fetchGained(ctx actor.Context) {
	type job struct {
		key  string
		zone gainedZone
	}
	var jobs []job
	if m.cfg.FetchZone == nil {
		return
	}
	for key, g := range m.handoff.from {
		switch {
		case !m.loadingGained(key):
			delete(m.handoff.from, key)
		case len(g.remotes) > 0 && !m.handoff.fetching[key]:
			m.handoff.fetching[key] = true
			jobs = append(jobs, job{key, g})
		}
	}
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
	delete(m.handoff.fetching, msg.key)
	g, ok := m.handoff.from[msg.key]
	if !ok || !m.loadingGained(msg.key) {
		delete(m.handoff.from, msg.key)
		return
	}
	if msg.err != nil {
		// Still loading, from the sources alone: its questions no
		// longer go to those replicas.
		m.handoff.from[msg.key] = gainedZone{namespace: g.namespace}
		m.schedulePlacement(ctx)
	} else {
		delete(m.handoff.from, msg.key)
	}
	result := peerResult(msg.err, len(msg.changes))
	m.handedOver(result)
	switch result {
	case "not_held":
		// Those asked do not hold it complete: they were loading it
		// themselves, or do not know the namespace yet.
		m.cfg.Logger.Info("no replica holds a gained zone: it waits for its sources", "zone", msg.key)
		return
	case "failed":
		m.cfg.Logger.Warn("no replica that held a gained zone handed it over: it waits for its sources", "zone", msg.key, "err", msg.err)
		return
	case "empty":
		// A namespace without objects: denied here as by the replica
		// that held it, not sent there any more.
		m.cfg.Logger.Info("a gained zone has no objects on the replica that held it: its names do not exist", "zone", msg.key, "from", msg.from)
		m.schedulePlacement(ctx)
		return
	}
	for _, c := range msg.changes {
		m.handoff.provisional[c.Key] = true
	}
	m.onApply(ctx, &Apply{Source: peerSource, Changes: msg.changes})
	pods := m.cfg.Answer.Domains.Route(msg.key).Pods
	var shown []string
	for _, origin := range m.cfg.Answer.Domains.Cluster {
		key := zone.ServiceZoneKey(g.namespace, origin)
		if pods {
			key = zone.PodZoneKey(g.namespace, origin)
		}
		// The zone stays among the replay's until its actor has
		// published: until then the placement keeps sending its
		// questions to the replicas that held it (a zone hidden here and
		// placed nowhere would be NXDOMAIN).
		if pid := m.children[key]; pid != nil && m.state.replay.keys[key] {
			delete(m.handoff.from, key)
			shown = append(shown, key)
		}
	}
	if len(shown) == 0 {
		return
	}
	m.handoff.tags++
	tag := peerTag | m.handoff.tags
	m.handoff.showing[tag] = shown
	for _, key := range shown {
		m.tell(ctx, key, m.children[key], &barrier{tag: tag})
	}
	m.cfg.Logger.Info("gained zone loaded from a replica that held it", "zone", msg.key, "from", msg.from, "objects", len(msg.changes))
}

// peerResult is the result of asking the replicas that held a gained
// zone, as Observer.HandedOver counts it: "not_held" (none holds it
// complete), "failed" (none answered), "empty" (a namespace without
// objects) or "loaded".
func peerResult(err error, changes int) string {
	switch {
	case errors.Is(err, ErrNotHeld):
		return "not_held"
	case err != nil:
		return "failed"
	case changes == 0:
		return "empty"
	}
	return "loaded"
}

// handedOver reports the result of asking the holders of a gained zone.
func (m *Manager) handedOver(result string) {
	m.cfg.Observer.HandedOver(result)
}

// onPeerBarrierDone shows a zone loaded from a peer once its actor has
// published what the peer handed over.
func (m *Manager) onPeerBarrierDone(msg *barrierDone) {
	keys := m.handoff.showing[msg.tag]
	if !slices.Contains(keys, msg.key) {
		return
	}
	m.handoff.showing[msg.tag] = slices.DeleteFunc(keys, func(k string) bool { return k == msg.key })
	if len(m.handoff.showing[msg.tag]) == 0 {
		delete(m.handoff.showing, msg.tag)
	}
	// Once every source has answered the replay, its own barrier counts
	// this zone and shows it: taking it out of the replay now would leave
	// that barrier waiting for ever.
	if m.children[msg.key] == nil || !m.state.replay.keys[msg.key] || len(m.state.replay.waiting) == 0 || !m.owns(msg.key) {
		return
	}
	delete(m.state.replay.keys, msg.key)
	m.addSlots()
	if slot := m.cfg.Table.SlotOf(msg.key); slot != nil {
		slot.SetLoading(false) // visible before the placement stops sending it elsewhere
	}
	m.publishPlacement()
}

// confirm drops from the provisional objects those a source sent.
func (m *Manager) confirm(msg *Apply) {
	if len(m.handoff.provisional) == 0 || msg.Source == peerSource {
		return
	}
	for _, c := range msg.Changes {
		delete(m.handoff.provisional, c.Key)
	}
}

// dropUnconfirmed deletes the objects peers handed over that no source
// has sent since, once a replay completed: the sources hold every object
// of the zones owned here then, so those were deleted meanwhile.
func (m *Manager) dropUnconfirmed(ctx actor.Context) {
	if len(m.handoff.provisional) == 0 {
		return
	}
	var deletes []model.Change
	for key := range m.handoff.provisional {
		if m.routes.zonesOf.holds(key) {
			deletes = append(deletes, model.Change{Key: key})
		}
	}
	clear(m.handoff.provisional)
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
	pid := m.children[msg.Key]
	if m.heldEmpty(msg.Key) {
		ctx.Respond(&ZoneExport{Held: true, Done: true})
		return
	}
	if pid == nil || !m.state.sync.synced || m.state.replay.keys[msg.Key] || m.pooledKey(msg.Key) || m.routes.fileZones[msg.Key] ||
		!m.state.inGrace(msg.Key) && !m.owns(msg.Key) {
		ctx.Respond(&ZoneExport{})
		return
	}
	ctx.Forward(pid)
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
