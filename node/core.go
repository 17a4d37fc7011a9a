package node

import (
	"io/fs"
	"log/slog"
	"net/netip"
	"sync/atomic"
	"time"

	"github.com/asynkron/protoactor-go/actor"
	"k8s.io/klog/v2"

	"github.com/shardns/shardns/acl"
	"github.com/shardns/shardns/actors/dispatch"
	"github.com/shardns/shardns/actors/zonemanager"
	"github.com/shardns/shardns/cluster"
	"github.com/shardns/shardns/config"
	"github.com/shardns/shardns/forward"
	"github.com/shardns/shardns/hosts"
	"github.com/shardns/shardns/metrics"
	"github.com/shardns/shardns/query"
	"github.com/shardns/shardns/rewrite"
	"github.com/shardns/shardns/sources"
	"github.com/shardns/shardns/sources/kubeclient"
	"github.com/shardns/shardns/sources/registry"
	"github.com/shardns/shardns/template"
	"github.com/shardns/shardns/zone"
)

// core is everything a configuration builds behind the sockets: the zone
// table, the zone manager and the sources feeding it, and the resolver
// plane. A reload builds a new core beside the old one and swaps it in
// once it has synced, so no query sees a half-loaded state.
type core struct {
	cfg    *config.Config
	log    *slog.Logger
	system *actor.ActorSystem
	answer *zone.Config
	table  *zone.Table
	reader zone.Reader    // what queries are answered from: the table, or the ring's owners
	pods   *zone.PodIndex // autopath's client index; nil without autopath
	// clients is a node-local process's directory of its node's pods,
	// kept by clientWatch; nil when neither autopath nor nodeLocal.aaaa
	// needs it.
	clients     *zone.ClientIndex
	clientWatch *kubeclient.NodePodWatch
	synced      atomic.Bool
	loaded      atomic.Bool // no zone gained from another replica is still loading
	manager     *actor.PID
	kube        *actor.PID   // the source watching for others (sources.Spec.Watcher); nil without one
	actors      []*actor.PID // in start order
	cluster     *query.Cluster
	forwarder   *forward.Forwarder // the default upstreams'
	upstream    *query.Upstream

	// grace names the zones this replica lost and still holds through
	// cluster.handoffGrace, for /debug/ring; nil: none.
	grace atomic.Pointer[[]string]

	// The resolver plane in front of the zones, and the forwarders of the
	// stub domains.
	rewrite  *rewrite.Rules
	template *template.Templates
	hosts    *hosts.Hosts
	chaos    *query.Chaos
	stubs    []*forward.Forwarder
	// federation answers federation names; locality keeps its node's
	// zone and region current (nil when they are configured).
	federation *query.Federation
	locality   *localityWatch
	// topology keeps answer's node zone its Node's (kubernetes.topology).
	topology *localityWatch
	acl      *acl.Lists
	// views answer the queries their expressions hold for (views.go).
	views []viewPlane
	// blocks are the planes of the servers[] entries with a chain of
	// their own, by index; nil for the others (blocks.go).
	blocks []*core
	// nodeName answers hostname.bind (chaos).
	nodeName string
}

// newCore starts the actors of cfg. A manifest that does not parse, or an
// API source that cannot be configured, is an error and nothing is left
// running.
func newCore(system *actor.ActorSystem, cfg *config.Config, log *slog.Logger, files fs.FS,
	listen []string, m *metrics.All, sharding coreSharding, memory *memoryReleaser) (*core, error) {
	c := &core{cfg: cfg, log: log, system: system, answer: answerConfig(cfg), cluster: sharding.cluster}
	c.table = zone.NewTable(zone.NewDirectory(c.answer, map[string]struct{}{}, false, 0))
	c.reader = c.table
	if err := c.buildPlane(sharding.self); err != nil {
		return nil, err
	}
	if cfg.Mode == config.ModeNodeLocal {
		return c.startPlane(c.startNodeLocal(listen, m, sharding))
	}
	if cfg.Autopath.Enabled {
		c.pods = &zone.PodIndex{}
	}
	interest := &zonemanager.Interest{} // the Kubernetes source freezes what other replicas' zones are built from
	enabled := sources.Enabled(registry.Sources, cfg)
	deps := sources.Deps{Config: cfg, Files: files, Logger: log, Metrics: m, Interest: interest,
		Listing: memory.listing, UserAgent: "shardns/" + Version}
	starts := make([]sources.Start, len(enabled))
	names := make([]string, len(enabled))
	readsAPI := false
	for i, s := range enabled {
		var err error
		if starts[i], err = s.Build(deps); err != nil {
			return nil, err
		}
		names[i] = s.Name
		readsAPI = readsAPI || len(s.Resources) > 0
	}
	if readsAPI {
		klog.SetSlogLogger(log.With("component", "client-go"))
	}
	if len(enabled) == 0 {
		log.Warn("no source configured: only the zone apexes are served")
	}
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
	manager := c.spawn(zonemanager.NewManagerProps(zonemanager.Config{
		Answer: c.answer, Table: c.table, Sources: names, Now: time.Now, Logger: log,
		StartupTimeout: cfg.Kubernetes.StartupTimeout.D(), Synced: &c.synced, PodIndex: c.pods,
		Self: sharding.self, Ring: sharding.ring, Grace: cfg.Cluster.HandoffGrace.D(), Loaded: &c.loaded,
		Interest: interest, FetchZone: sharding.fetch,
		Observer: &zoneObserver{metrics: m, memory: memory, grace: &c.grace, published: sharding.published},
	}))
	c.manager = manager
	running := sources.Running{Manager: manager}
	for i, s := range enabled {
		pid := c.spawn(starts[i](running))
		if s.Watcher {
			c.kube, running.Watcher = pid, pid
		}
	}
	return c.startPlane(c, nil)
}

func (c *core) spawn(p *actor.Props) *actor.PID {
	pid := c.system.Root.Spawn(p)
	c.actors = append(c.actors, pid)
	return pid
}

// coreSharding is what a core needs from the cluster: its name, the ring
// at start and the way to ask other replicas (nil outside a cluster).
type coreSharding struct {
	self    string
	ring    *cluster.Ring
	cluster *query.Cluster
	live    func() *cluster.Ring       // the ring as it changes
	fetch   zonemanager.FetchZone      // loads a gained zone from a replica that held it
	mesh    func() *dispatch.MeshNames // the mesh names the replicas told a node-local process
	// published is told what each zone publish changed (zonemanager.Observer.Published).
	published func(zonemanager.Published)
}

// handler is the query handler of this core for one listener; server is
// its metrics label (dns://, tls:// or https:// and the address).
func (c *core) handler(server string, m *metrics.All) *query.Handler {
	h := c.planeHandler(c, server, m)
	for _, v := range c.views {
		vh := c.planeHandler(v.plane, server, m)
		vh.ViewName = v.name // its metrics carry the view label, as CoreDNS's
		h.Views = append(h.Views, query.View{Name: v.name, Conditions: v.conditions, Handler: vh})
	}
	return h
}

// planeHandler is a handler of this core answering through the resolver
// plane of p: c itself, or a view's.
func (c *core) planeHandler(p *core, server string, m *metrics.All) *query.Handler {
	cl := c.cluster
	if p.cluster != nil { // a block's own cache of the owners' answers (blockOwnersCaches)
		cl = p.cluster
	}
	h := &query.Handler{Config: p.answer, Zones: c.reader, Metrics: m, Server: server,
		Upstream: p.upstream, LoadBalance: p.cfg.LoadBalance.Enabled, Cluster: cl,
		Chaos: p.chaos, Rewrite: p.rewrite, Template: p.template, Hosts: p.hosts, ACL: p.acl,
		Modify: modifiers(p.cfg, server, m)}
	if p.answer.Domains.Cluster != nil || p == c { // a block without the kubernetes plugin has no federations
		h.Federation = c.federation
	}
	if c.pods != nil {
		h.Autopath = c.pods
	}
	if c.clients != nil {
		if c.cfg.Autopath.Enabled {
			h.Autopath = c.clients
		}
		if c.cfg.NodeLocal.AAAA == config.AAAANoData {
			h.IPv4Clients = c.clients
		}
		if c.cfg.NodeLocal.MeshNamespaces {
			h.MeshClients = c.clients
		}
	}
	if l := p.cfg.Log; l.Queries {
		h.QueryLog = c.log.With("component", "query")
		h.QueryLogRule = query.NewQueryLogRule(l.QueryNames, l.QueryClasses, l.QueryFormat)
	}
	if p.cfg.Log.Errors {
		h.ErrorLog = query.ConsolidatedErrorLog(c.log.With("component", "errors"), consolidations(p.cfg.Log.ErrorsConsolidate),
			func(d time.Duration, f func()) { time.AfterFunc(d, f) })
	}
	if len(c.cfg.Files.Zones) > 0 {
		h.TransferLog = c.log.With("component", "transfer")
	}
	return h
}

// stop stops the sources and zones, after letting forwarded queries in
// flight finish (at most the forward deadline).
func (c *core) stop() {
	c.table.Retire() // queries still in flight on this core keep their answers
	forwarders := c.allForwarders()
	for _, f := range forwarders {
		f.Drain(c.cfg.Forward.Deadline.D())
	}
	for i := len(c.actors) - 1; i >= 0; i-- {
		if err := c.system.Root.StopFuture(c.actors[i]).Wait(); err != nil {
			c.log.Warn("actor did not stop in time", "actor", c.actors[i].Id, "err", err)
		}
	}
	for _, f := range forwarders {
		f.Close()
	}
	c.stopPlane()
}

// answerConfig derives the answer options from the configuration.
func answerConfig(cfg *config.Config) *zone.Config {
	k := cfg.Kubernetes
	a := &zone.Config{TTL: uint32(*k.TTL), EndpointPodNames: k.EndpointPodNames, IgnoreEmptyService: k.IgnoreEmptyService,
		MeshTTL: uint32(cfg.Istio.TTL), MeshZones: fqdns(cfg.Istio.Zones), MeshExportTo: cfg.Istio.DefaultExportTo}
	a.Topology, _ = zone.ParseTopologyMode(k.Topology) // validated at load
	for _, z := range k.Zones {
		a.Domains.Cluster = append(a.Domains.Cluster, zone.Fqdn(z))
	}
	for _, z := range k.ReverseZones {
		a.Domains.Reverse = append(a.Domains.Reverse, zone.Fqdn(z))
	}
	switch k.Pods {
	case "insecure":
		a.Pods = zone.PodsInsecure
	case "verified":
		a.Pods = zone.PodsVerified
		a.Domains.PodZones = true
	}
	for _, l := range cfg.DNS.Listen {
		if ap, err := netip.ParseAddrPort(l); err == nil && !ap.Addr().IsUnspecified() {
			a.NSAddrs = append(a.NSAddrs, ap.Addr().Unmap())
		}
	}
	if e := k.External; e != nil {
		a.External = &zone.External{Zones: fqdns(e.Zones), Apex: e.ApexLabel(), TTL: uint32(e.TTLSeconds()), Headless: e.Headless,
			TransferTo: config.TransferPrefixes(e.TransferTo)}
		a.Domains.External, a.Domains.ExternalApex = a.External.Zones, a.External.Apex
	}
	a.Domains.Multicluster = fqdns(k.Multicluster)
	a.Fallthrough = fqdns(k.Fallthrough)
	a.Prepare()
	return a
}
