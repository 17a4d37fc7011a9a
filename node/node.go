// Package node assembles one shardns process from its configuration: the
// actor system, the listeners and HTTP endpoints, and the core behind them
// (zones, sources, resolver plane), which a reload replaces without
// closing a socket. cmd/shardns and the end-to-end tests both start nodes
// here, so the tests exercise exactly what users run.
package node

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"net"
	"net/http"
	"net/netip"
	"os"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/asynkron/protoactor-go/actor"
	cmap "github.com/orcaman/concurrent-map"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/shardns/shardns/actors/zonemanager"
	"github.com/shardns/shardns/cluster"
	"github.com/shardns/shardns/config"
	"github.com/shardns/shardns/httpapi"
	"github.com/shardns/shardns/listeners"
	"github.com/shardns/shardns/metrics"
	"github.com/shardns/shardns/query"
)

// Version is set at build time.
var Version = "dev"

func init() {
	// protoactor's process registry spreads actors over 1024 buckets, each
	// a concurrent map split again into SHARD_COUNT locked maps: 32,768
	// maps, about 3 MB per process, for a few hundred actors that the
	// buckets already keep apart. One map per bucket is enough.
	cmap.SHARD_COUNT = 1
}

// Node is one running shardns process.
type Node struct {
	log    *slog.Logger
	name   string
	files  fs.FS        // where manifests are read; nil is the OS file system
	source configSource // watched for changes when set
	// nodeLocal: this process owns no zone (mode: nodelocal); the mode
	// cannot change on reload.
	nodeLocal bool

	reg     *prometheus.Registry
	metrics *metrics.All
	system  *actor.ActorSystem

	mu          sync.Mutex // serialises Start, Reload and Stop
	cfg         *config.Config
	core        atomic.Pointer[core]
	listeners   map[string]*listenerEntry // by listenerSpec.key
	httpL       net.Listener
	http        *httpapi.Server
	metricsOnly *metricsListeners // http.metricsListen
	started     bool
	stopped     bool
	// widening is set while a leaving replica waits for its watches to
	// take every object (watchEverything).
	widening atomic.Bool

	httpConfigured string      // http.listen the running server was bound for
	pprof          atomic.Bool // http.pprof of the running configuration
	// debugNets is http.debug of the running configuration.
	debugNets    atomic.Pointer[[]netip.Prefix]
	httpCounters *httpapi.Counters // of every HTTP server: made once, as the registry

	memory *memoryReleaser // returns freed memory to the OS after loads

	cluster *clusterState // nil outside a cluster
	// rings are the ring in force, the one zones were placed by and the
	// one before it; none outside a cluster.
	rings cluster.RingState
	// fresh is what owners said changed, for every owners' cache of the
	// process (coherence.go); nil outside a cluster.
	fresh *query.Freshness

	stopWatch chan struct{}
	// takingBack are the node-local listeners waiting for the process
	// they replaced to close (sharedaddr.go).
	takingBack takingBack
	reloadNow  chan struct{}
	wg         sync.WaitGroup // HTTP server and the config watcher
}

// listenerEntry is one listener (servers.go): its sockets, its listener
// actor, and the handler and scope the actor reads on every query.
type listenerEntry struct {
	spec    *listenerSpec
	sockets *listeners.Sockets
	cert    *listeners.Certificate // tls and https
	pid     *actor.PID
	handler atomic.Pointer[query.Handler]
	scope   atomic.Pointer[listeners.Scope]
	limiter *listeners.RateLimiter // dns.rateLimit, reconfigured on reload
	rrl     *listeners.RRL         // dns.rrl, reconfigured on reload
}

// Option adjusts a node before it starts.
type Option func(*Node)

// WithFiles reads manifests from fsys instead of the OS file system, as
// the embedded demo does.
func WithFiles(fsys fs.FS) Option { return func(n *Node) { n.files = fsys } }

// WithConfigFile watches path and reloads the node when it changes.
func WithConfigFile(path string) Option { return func(n *Node) { n.source = &fileSource{path: path} } }

// New prepares a node: it binds every socket, so a port in use is an
// error that names the key, and nothing serves until Start.
func New(cfg *config.Config, log *slog.Logger, opts ...Option) (*Node, error) {
	n := &Node{cfg: cfg, log: log, name: nodeName(cfg), listeners: map[string]*listenerEntry{},
		stopWatch: make(chan struct{}), reloadNow: make(chan struct{}, 1), httpConfigured: cfg.HTTP.Listen,
		nodeLocal: cfg.Mode == config.ModeNodeLocal}
	for _, o := range opts {
		o(n)
	}
	sampleHeap(cfg.HTTP.Pprof) // before anything serves profiles (see sampleHeap)
	n.pprof.Store(cfg.HTTP.Pprof)
	n.setDebugNets(cfg)
	for _, sp := range listenerSpecs(cfg) {
		e, err := bindListener(sp, n.nodeLocal, log)
		if err != nil {
			n.closeSockets()
			return nil, err
		}
		n.listeners[sp.key] = e
	}
	if cfg.HTTP.Listen != "" {
		l, err := n.listenHTTP(cfg.HTTP.Listen)
		if err != nil {
			n.closeSockets()
			return nil, fmt.Errorf("http.listen: %w", err)
		}
		n.httpL = l
	}
	metricsOnly, err := bindMetrics(nil, cfg.HTTP.MetricsListen)
	if err != nil {
		n.closeSockets()
		return nil, err
	}
	n.metricsOnly = metricsOnly
	n.reg, n.metrics = metrics.New(Version)
	n.httpCounters = httpapi.NewCounters(n.reg)
	n.registerStateMetrics()
	n.registerRingMetrics()
	return n, nil
}

// registerStateMetrics exports what this replica holds, read at scrape
// time: ring members, zones served here and the records they hold.
func (n *Node) registerStateMetrics() {
	gauge := func(name, help string, f func() float64) {
		n.reg.MustRegister(prometheus.NewGaugeFunc(prometheus.GaugeOpts{Namespace: "shardns", Name: name, Help: help}, f))
	}
	gauge("cluster_members", "Live replicas in the ring (1 outside a cluster).", func() float64 {
		if r := n.rings.Live(); r != nil {
			return float64(len(r.Members))
		}
		return 1
	})
	gauge("zones_served", "Zones this replica answers from its own state.", func() float64 {
		if c := n.core.Load(); c != nil {
			return float64(len(c.table.Served()))
		}
		return 0
	})
	gauge("memory_return_pending", "1 while zones load or are dropped, and until the memory that freed is returned to the OS.", func() float64 {
		if n.memory != nil && n.memory.pending() {
			return 1
		}
		return 0
	})
	gauge("client_pods_held", "Pods a node-local process holds to know its clients: its own node's only.", func() float64 {
		if c := n.core.Load(); c != nil && c.clients != nil {
			return float64(c.clients.Load().Pods())
		}
		return 0
	})
	gauge("records_held", "Records in the zones this replica serves.", func() float64 {
		total := 0
		if c := n.core.Load(); c != nil {
			for _, s := range c.table.Served() {
				total += s.Records()
			}
		}
		return float64(total)
	})
}

func nodeName(cfg *config.Config) string {
	if cfg.Cluster.NodeName != "" {
		return cfg.Cluster.NodeName
	}
	h, err := os.Hostname()
	if err != nil {
		return "shardns"
	}
	return h
}

// Start loads the sources and starts serving. A manifest that does not
// parse is an error here; on a reload it only keeps the old state.
func (n *Node) Start() error {
	n.mu.Lock()
	defer n.mu.Unlock()
	n.system = actor.NewActorSystem(actor.WithLoggerFactory(func(*actor.ActorSystem) *slog.Logger {
		return n.log.With("component", "actor")
	}))
	if n.cfg.Cluster.Clustered() {
		if err := n.startCluster(); err != nil {
			return err
		}
	}
	applyMemoryLimit(n.cfg.Memory, n.log)
	n.memory = startMemoryReleaser(n.log)
	n.memory.loading() // the first sync; the zone manager releases when it is over
	c, err := newCore(n.system, n.cfg, n.log, n.files, n.dnsAddrs(), n.metrics, n.sharding(n.cfg), n.memory)
	if err != nil {
		n.memory.close()
		n.memory = nil
		return err
	}
	n.core.Store(c)
	if n.cfg.Mode == config.ModeNodeLocal {
		// No zone manager loads zones here to release them: the start
		// was the load, and it is over.
		n.memory.release()
	}
	if n.cluster != nil {
		n.wg.Go(n.watchRing)
	}
	for _, e := range n.listeners {
		n.startListener(e, c)
	}
	if n.httpL != nil {
		n.startHTTP(n.httpL)
	}
	n.metricsOnly.start(n)
	if src := n.source; src != nil {
		// Read now, so an edit made right after Start is seen as a change.
		loaded, _ := src.read()
		n.wg.Go(func() { n.watchConfig(src, loaded) })
	}
	n.started = true
	n.log.Info("shardns started", "node", n.name, "version", Version, "dns", n.dnsAddrs(), "http", n.httpAddr())
	return nil
}

func (n *Node) startListener(e *listenerEntry, c *core) {
	e.handler.Store(n.listenerHandler(e, c))
	e.scope.Store(n.listenerScope(e, c))
	e.limiter = listeners.NewRateLimiter(time.Now)
	e.limiter.Configure(n.cfg.DNS.RateLimit.PerSecond, n.cfg.DNS.RateLimit.Burst)
	e.rrl = listeners.NewRRL(time.Now)
	e.rrl.Configure(rrlConfig(n.cfg.DNS.RRL))
	cfg := listeners.Config{Handler: &e.handler, Scope: &e.scope,
		IdleTimeout: n.cfg.DNS.TCPIdleTimeout.D(), MaxConnections: n.cfg.DNS.TCPMaxConnections,
		ReadTimeout: n.cfg.DNS.TCPReadTimeout.D(), WriteTimeout: n.cfg.DNS.TCPWriteTimeout.D(),
		MaxQueries: n.cfg.DNS.TCPMaxQueries, Logger: n.log, Panics: n.metrics.DNS.Panics}
	n.limits(e, &cfg)
	props := listeners.NewProps
	if e.cert != nil {
		cfg.TLS = e.cert.TLSConfig()
	}
	if e.spec.transport == "https" {
		props = listeners.NewHTTPSProps
	}
	e.pid = n.system.Root.Spawn(props(cfg, e.sockets))
	n.takeBack(e)
}

func (n *Node) startHTTP(l net.Listener) {
	srv := httpapi.New(httpapi.Config{Registry: n.reg, Ready: n.Ready, Ring: n.debugRing, Pprof: n.pprof.Load,
		Debug: n.debugNetworks, Counters: n.httpCounters})
	n.http = srv
	n.wg.Go(func() {
		if err := srv.Serve(l); err != nil && !errors.Is(err, http.ErrServerClosed) {
			n.log.Error("http server", "err", err)
		}
	})
}

// setDebugNets takes http.debug from cfg: the networks whose clients,
// beside this host's, may read /debug/.
func (n *Node) setDebugNets(cfg *config.Config) {
	nets := cfg.HTTP.DebugNetworks()
	n.debugNets.Store(&nets)
}

func (n *Node) debugNetworks() []netip.Prefix { return *n.debugNets.Load() }

// Lameduck is the configured lameduck period of the running configuration.
func (n *Node) Lameduck() time.Duration {
	n.mu.Lock()
	defer n.mu.Unlock()
	return n.cfg.HTTP.Lameduck.D()
}

// Ready reports whether the serving core has synced its sources, loaded
// every zone it owns, and (in a cluster) announced itself as an owner.
func (n *Node) Ready() bool {
	c := n.core.Load()
	if n.nodeLocal {
		// Ready once there is a replica to ask and every owner has been
		// asked once, so first queries do not wait for a connection.
		r := n.rings.Live()
		return c != nil && r != nil && r.HasOwners() && n.cluster.reachedOwners()
	}
	return c != nil && c.synced.Load() && c.loaded.Load() && n.announcedOwner()
}

// sharding is what a new core needs from the cluster.
func (n *Node) sharding(cfg *config.Config) coreSharding {
	s := coreSharding{self: n.name, ring: n.rings.Live(), cluster: n.clusterHandler(cfg), live: n.rings.Live,
		published: n.published}
	if n.cluster != nil {
		s.fetch = n.cluster.handoff.Fetch
		s.mesh = n.cluster.ring.Mesh
	}
	return s
}

// debugRing reports the members and, for every zone known here, its owners.
func (n *Node) debugRing() httpapi.Ring {
	c := n.core.Load()
	r := httpapi.Ring{Self: n.name, Zones: map[string][]string{}}
	ring := n.currentRing()
	for _, m := range ring.Members {
		r.Members = append(r.Members, httpapi.Member{Name: m.Name, Remote: m.Remote, Owner: m.Owner, Down: m.Down,
			Pending: m.Pending})
	}
	r.Replication = ring.Replication
	c.addHandoffs(&r)
	keys := map[string]bool{}
	for _, k := range c.table.Keys() {
		keys[k] = true
	}
	for k := range c.table.Placement() {
		keys[k] = true
	}
	for k := range keys {
		order := ring.Order(k)
		if rf := ring.Replication; rf > 0 && rf < len(order) {
			order = order[:rf]
		}
		r.Zones[k] = order
		if c.table.Zone(k) != nil {
			r.Served = append(r.Served, k)
		}
	}
	slices.Sort(r.Served)
	if n.cluster != nil {
		for _, rej := range n.cluster.rejections.List() {
			r.Rejected = append(r.Rejected, httpapi.Rejection(rej))
		}
	}
	return r
}

// DNSAddrs lists the addresses DNS is served on (useful with port 0).
func (n *Node) DNSAddrs() []string {
	n.mu.Lock()
	defer n.mu.Unlock()
	return n.dnsAddrs()
}

func (n *Node) dnsAddrs() []string {
	var out []string
	for _, addr := range n.cfg.DNS.Listen {
		if e := n.listeners[dnsListenKey(addr)]; e != nil && !slices.Contains(out, e.sockets.Addr()) {
			out = append(out, e.sockets.Addr())
		}
	}
	return out
}

// HTTPAddr is the address of the HTTP endpoints, or "".
func (n *Node) HTTPAddr() string {
	n.mu.Lock()
	defer n.mu.Unlock()
	return n.httpAddr()
}

func (n *Node) httpAddr() string {
	if n.httpL == nil {
		return ""
	}
	return n.httpL.Addr().String()
}

// WaitReady blocks until the node is ready or ctx ends.
func (n *Node) WaitReady(ctx context.Context) error {
	return waitFor(ctx, n.Ready)
}

func waitFor(ctx context.Context, cond func() bool) error {
	t := time.NewTicker(10 * time.Millisecond)
	defer t.Stop()
	for !cond() {
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-t.C:
		}
	}
	return nil
}

// Stop fails readiness and keeps answering for lameduck, so clients and
// load balancers move away first; then it closes the listeners, lets
// forwarded queries in flight finish, and stops every actor and goroutine.
func (n *Node) Stop(lameduck time.Duration) {
	n.mu.Lock()
	defer n.mu.Unlock()
	if n.stopped {
		return
	}
	n.stopped = true
	if n.http != nil {
		n.http.EnterLameduck()
	}
	if n.cluster != nil {
		n.cluster.life.Stop() // the last ones standing keep owning (cluster.BuildRing)
	}
	n.yieldAddresses()
	n.watchEverything(lameduck)
	n.leaveCluster() // the others take over this replica's zones now
	if lameduck > 0 && n.started {
		n.log.Info("lameduck: /ready fails, queries are still answered", "duration", lameduck)
		time.Sleep(lameduck)
	}
	n.drain()
	close(n.stopWatch)
	for _, e := range n.listeners {
		if e.pid != nil {
			n.system.Root.StopFuture(e.pid).Wait()
		}
	}
	if n.http != nil {
		n.http.Close() // closes its listener too
		n.httpL = nil
	}
	n.metricsOnly.close()
	n.closeSockets()
	if c := n.core.Load(); c != nil {
		c.stop()
	}
	n.wg.Wait()
	if n.memory != nil {
		n.memory.close()
	}
	n.stopCluster()
	if n.system != nil {
		n.system.Shutdown()
	}
	n.log.Info("shardns stopped", "node", n.name)
}

// watchEverything makes a replica whose Kubernetes watches take only its
// own namespaces hold every object before it leaves the ring when every
// replica is stopping at once: the last ones answer every zone alone (see
// buildRing), from what they hold. It waits for the lists for at most half
// the lameduck; the replica answers as an owner meanwhile. When other
// replicas stay (a scale-in, a rolling restart), they take its zones over
// and it lists nothing: holding the whole cluster took a replica of seven
// at 20k services from 42 to 232 MB of RSS, more than CoreDNS holds.
func (n *Node) watchEverything(lameduck time.Duration) {
	c := n.core.Load()
	if n.cluster == nil || c == nil || c.kube == nil || lameduck <= 0 || !n.started || !n.announcedOwner() {
		return
	}
	start := time.Now()
	if !n.lastToLeave(min(lameduck/4, 2*time.Second)) {
		n.log.Info("other replicas stay and take this one's zones over: leaving the ring")
		return
	}
	n.widening.Store(true)
	defer func() {
		n.widening.Store(false)
		select { // watchRing publishes what changed meanwhile
		case n.cluster.liveChanged <- struct{}{}:
		default: // one is on its way already
		}
	}()
	if _, err := n.system.Root.RequestFuture(c.kube, &zonemanager.WatchEverything{}, lameduck/2-time.Since(start)).Result(); err != nil {
		n.log.Warn("leaving before every object was listed; if every replica is stopping, names of zones this one did not own may fail",
			"waited", time.Since(start).Round(time.Millisecond))
		return
	}
	n.log.Info("every object is held: leaving the ring", "listed in", time.Since(start).Round(time.Millisecond))
}

func (n *Node) closeSockets() {
	for _, e := range n.listeners {
		e.sockets.Close()
	}
	if n.httpL != nil {
		n.httpL.Close()
	}
	n.metricsOnly.close()
}
