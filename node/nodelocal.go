package node

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/miekg/dns"

	"github.com/shardns/shardns/actors/dispatch"
	"github.com/shardns/shardns/cluster"
	"github.com/shardns/shardns/metrics"
	"github.com/shardns/shardns/query"
	"github.com/shardns/shardns/sources/kubeclient"
	"github.com/shardns/shardns/zone"
)

// ownersReader is what a node-local process answers from: it holds no zone,
// every cluster zone is held by its owners on the ring, and any namespace
// may exist (the owners say NXDOMAIN). Names outside the cluster domains
// are not cluster names here: they go to the forwarder.
type ownersReader struct {
	cfg  *zone.Config
	base *zone.Directory      // without mesh names
	ring func() *cluster.Ring // the live ring
	// grace is how long an owner that left the ring is asked for its
	// zones (cluster.handoffGrace): while their new owners load them it
	// alone answers them, in its lameduck.
	grace time.Duration
	memo  atomic.Pointer[ownerMemo]
	// mesh is the mesh host names the replicas told last (nil: none,
	// or not asked); dir is the directory built from them.
	mesh func() *dispatch.MeshNames
	dir  atomic.Pointer[meshDirectory]
}

// meshDirectory is the directory of one set of mesh names.
type meshDirectory struct {
	from *dispatch.MeshNames
	dir  *zone.Directory
}

// ownerMemo remembers the owners of zone keys for one ring, and the
// owners that left before it, until the first of their graces ends.
type ownerMemo struct {
	ring     *cluster.Ring
	departed cluster.Departed
	ends     time.Time // the first end of departed's graces; zero: none
	orders   sync.Map  // zone key → []string, owners that left included (Remote)
	fans     sync.Map  // zone key → []string, the ring's alone (FanOut)
	size     atomic.Int32
}

// next is the memo that follows m (nil: none yet) for ring r at at.
func (m *ownerMemo) next(r *cluster.Ring, at time.Time, grace time.Duration) *ownerMemo {
	var departed cluster.Departed
	switch {
	case m == nil:
	case m.ring != r:
		departed = m.departed.Note(m.ring, r, at, grace)
	default:
		departed = m.departed.Expire(at)
	}
	return &ownerMemo{ring: r, departed: departed, ends: departed.FirstEnd()}
}

// stale reports whether m no longer holds for ring r; the clock (now)
// is read only while some owner that left is asked.
func (m *ownerMemo) stale(r *cluster.Ring, now func() time.Time) bool {
	return m == nil || m.ring != r || m.size.Load() >= maxMemo || !m.ends.IsZero() && !now().Before(m.ends)
}

// maxMemo bounds the remembered orders; zone keys come from query names,
// which clients choose.
const maxMemo = 4096

func newOwnersReader(cfg *zone.Config, ring func() *cluster.Ring, mesh func() *dispatch.MeshNames, grace time.Duration) *ownersReader {
	return &ownersReader{cfg: cfg, base: ownersDirectory(cfg, nil), ring: ring, mesh: mesh, grace: grace}
}

func ownersDirectory(cfg *zone.Config, meshNames []string) *zone.Directory {
	names := make(map[string]struct{}, len(meshNames))
	for _, n := range meshNames {
		names[n] = struct{}{}
	}
	dir := zone.NewDirectory(cfg, map[string]struct{}{}, true, 1).WithMesh(names)
	dir.AnyNamespace = true
	return dir
}

// Directory is the directory of the mesh names the replicas told last:
// a mesh name is asked of the owners of its zone (with the client's
// namespace, when that namespace has names of its own), as on a replica.
// It is built again by the first question after the names change.
func (v *ownersReader) Directory() *zone.Directory {
	var m *dispatch.MeshNames
	if v.mesh != nil {
		m = v.mesh()
	}
	if m == nil {
		return v.base
	}
	if d := v.dir.Load(); d != nil && d.from == m {
		return d.dir
	}
	d := &meshDirectory{from: m, dir: ownersDirectory(v.cfg, m.Names)}
	v.dir.Store(d)
	return d.dir
}

func (v *ownersReader) Zone(string) *zone.Snapshot { return nil }

// Remote lists the owners of key, best first, with an owner that left
// the ring within its grace right after them (cluster.Departed). The
// order is a pure function of the ring, those owners and the key, so it
// is remembered per ring: the rendezvous sort costs more than the cached
// answer it leads to.
func (v *ownersReader) Remote(key string) []string { return v.order(key, true) }

// order is the order of key's owners on the ring, with the owners that
// left within their grace after them when askLeft, remembered per ring.
func (v *ownersReader) order(key string, askLeft bool) []string {
	r := v.ring()
	if r == nil {
		return []string{}
	}
	m := v.memo.Load()
	if m.stale(r, time.Now) {
		m = m.next(r, time.Now(), v.grace)
		v.memo.Store(m)
	}
	memo := &m.fans
	if askLeft {
		memo = &m.orders
	}
	if order, ok := memo.Load(key); ok {
		return order.([]string)
	}
	key = strings.Clone(key) // remembered: the fast path asks with the request's buffer
	order := r.Order(key)
	if holders := m.departed.Holders(key, time.Now()); askLeft && len(holders) > 0 {
		order = cluster.QuestionOrder(order, r.Replication, "", holders)
	}
	if order == nil {
		order = []string{} // no owner yet: SERVFAIL, never NXDOMAIN
	}
	if _, loaded := memo.LoadOrStore(key, order); !loaded {
		m.size.Add(1)
	}
	return order
}

// FanOut lists every owner on the ring: a node-local cache holds no
// reverse zone, and when replicas hold partial ones (each built from its
// own namespaces) no single owner can say a reverse name does not exist.
// Asking all of them also works when reverse zones are whole: the zone's
// owners answer and the others say they do not serve it, which the merge
// of the answers ignores. The ring orders a reverse key over all its
// owners (only namespace zones are placed otherwise), so that order is
// the list, remembered like any other. No owner gives an empty list:
// SERVFAIL, never NXDOMAIN. An owner that left is not asked: every share
// is needed to deny a name, and one that has exited would make the
// answer SERVFAIL until its grace ends.
func (v *ownersReader) FanOut(key string) []string { return v.order(key, false) }

// Loading implements zone.Reader: a node-local cache loads no zone.
func (v *ownersReader) Loading(string) bool { return false }

// startNodeLocal finishes a node-local core: no sources and no zone
// actors, only the owners view, the owners' answer cache (in the cluster
// handler) and the forwarder for other names.
func (c *core) startNodeLocal(listen []string, m *metrics.All, sharding coreSharding) (*core, error) {
	if sharding.cluster == nil || sharding.live == nil {
		return nil, fmt.Errorf("mode: nodelocal needs cluster.join or cluster.joinService")
	}
	c.reader = newOwnersReader(c.answer, sharding.live, sharding.mesh, c.cfg.Cluster.HandoffGrace.D())
	c.synced.Store(true)
	c.loaded.Store(true)
	var err error
	if c.upstream, err = c.newUpstream(listen, m.Forward); err != nil {
		return nil, err
	}
	if err = c.buildViews(listen, m.Forward); err != nil {
		return nil, err
	}
	if err = c.buildBlocks(listen, m.Forward); err != nil {
		return nil, err
	}
	c.blockOwnersCaches()
	if err = c.watchClients(); err != nil { // last: nothing fails after the watch starts
		return nil, err
	}
	c.log.Info("node-local mode: cluster names are asked of their owners", "zones", c.cfg.Kubernetes.Zones)
	return c, nil
}

// blockOwnersCaches gives each server block that answers cluster names
// a cache of the owners' answers of its own, bounded by its chain's
// cache: here the owners' answers take the place of what the block's
// forward to the cluster DNS brought, which its cache plugin capped
// (NodeLocal DNSCache caches cluster.local denials for 5 s, the rest for
// 30 s), and one block's cached answers must not answer another's.
func (c *core) blockOwnersCaches() {
	for i, b := range c.blocks {
		if b != nil && c.cluster != nil && c.cfg.Servers[i].Chain.AnswersCluster() {
			owners := ownersCache(b.cfg)
			c.cluster.Fresh.Keep(owners.MaxLife())
			b.cluster = c.cluster.WithCache(owners)
		}
	}
}

// watchClients starts the watch of this node's pods when autopath, the
// AAAA policy or namespace mesh names need to know the clients: only this node's, selected by
// the API server (spec.nodeName), so no process of the cluster watches
// every Pod. Until the first list every client is unknown and gets the
// ordinary answers.
func (c *core) watchClients() error {
	if !c.cfg.WatchesClients() {
		return nil
	}
	nodeName, client, err := c.ownNode(c.cfg.NodeLocal.NodeName, "nodeLocal", "nodeLocal.nodeName",
		"; autopath, nodeLocal.aaaa and nodeLocal.meshNamespaces need this node's pods")
	if err != nil {
		return err
	}
	c.clients = &zone.ClientIndex{}
	log := c.log.With("component", "clients")
	first := true
	c.clientWatch = kubeclient.WatchNodePods(client, nodeName, log, func(pods []zone.NodePod) {
		c.clients.Set(zone.NewClients(pods))
		if first {
			first = false
			log.Info("the pods of this node are known: autopath, the AAAA policy and namespace mesh names apply to them",
				"node", nodeName, "pods", len(pods))
		}
	})
	return nil
}

// askFor asks the replica called member, for a client of namespace ns
// ("": none known, or a replica's own question): the query path's access
// to the owners (query.Cluster's Ask and AskFor).
func (n *Node) askFor(ctx context.Context, member, zoneKey, name string, qtype uint16, topo zone.Topology, ns string) (*dns.Msg, int, error) {
	addr, ok := n.remoteOf(member)
	if !ok {
		return nil, 0, fmt.Errorf("%s is not a member", member)
	}
	asked := time.Now()
	m, preferred, err := n.cluster.dispatch.AskFor(ctx, addr, zoneKey, name, qtype, topo, ns)
	if errors.Is(err, context.DeadlineExceeded) {
		// No answer: is it gone, or cut off from this replica?
		n.cluster.liveness.Unanswered(member, addr, asked)
		return nil, 0, err
	}
	n.cluster.liveness.Answered(member, addr) // it spoke, whatever it said
	if errors.Is(err, dispatch.ErrNotServed) {
		return nil, 0, fmt.Errorf("%s: %w", member, query.ErrNotServed)
	}
	return m, preferred, err
}

// meshDirectory is the directory whose mesh host names the ring server
// tells node-local processes: the serving core's; nil before it has one.
func (n *Node) meshDirectory() *zone.Directory {
	if core := n.core.Load(); core != nil && core.table != nil {
		return core.table.Directory()
	}
	return nil
}
