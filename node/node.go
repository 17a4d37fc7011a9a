// Package node assembles one shardns process from its configuration: the
// actor system, the zone manager, the sources, the listeners and the HTTP
// endpoints. cmd/shardns and the end-to-end tests both start nodes here, so
// the tests exercise exactly what users run.
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
	"sync"
	"sync/atomic"
	"time"

	"github.com/asynkron/protoactor-go/actor"
	"github.com/miekg/dns"
	"k8s.io/klog/v2"

	"github.com/shardns/shardns/actors/zones"
	"github.com/shardns/shardns/cache"
	"github.com/shardns/shardns/cluster"
	"github.com/shardns/shardns/config"
	"github.com/shardns/shardns/forward"
	"github.com/shardns/shardns/httpapi"
	"github.com/shardns/shardns/listeners"
	"github.com/shardns/shardns/metrics"
	"github.com/shardns/shardns/query"
	kubesource "github.com/shardns/shardns/sources/kubernetes"
	"github.com/shardns/shardns/sources/manifest"
	"github.com/shardns/shardns/zone"
)

// Version is set at build time.
var Version = "dev"

// Node is one running shardns process.
type Node struct {
	cfg       *config.Config
	log       *slog.Logger
	name      string
	answer    *zone.Config
	table     *zone.Table
	system    *actor.ActorSystem
	sockets   []*listeners.Sockets
	httpL     net.Listener
	http      *httpapi.Server
	actors    []*actor.PID // top-level actors, in start order
	wg        sync.WaitGroup
	stopped   bool
	files     fs.FS // where manifests are read; nil is the OS file system
	synced    atomic.Bool
	forwarder *forward.Forwarder
}

// Option adjusts a node before it starts.
type Option func(*Node)

// WithFiles reads manifests from fsys instead of the OS file system, as
// the embedded demo does.
func WithFiles(fsys fs.FS) Option { return func(n *Node) { n.files = fsys } }

// New prepares a node: it validates what can only be checked by doing
// (files parse, ports bind) and returns an error that names the cause.
// Nothing serves until Start.
func New(cfg *config.Config, log *slog.Logger, opts ...Option) (*Node, error) {
	n := &Node{cfg: cfg, log: log, name: nodeName(cfg)}
	for _, o := range opts {
		o(n)
	}
	n.answer = answerConfig(cfg)
	n.table = zone.NewTable(zone.NewDirectory(n.answer, map[string]struct{}{}, false, 0))
	for _, addr := range cfg.DNS.Listen {
		s, err := listeners.Bind(addr)
		if err != nil {
			n.closeSockets()
			return nil, fmt.Errorf("dns.listen: %w", err)
		}
		n.sockets = append(n.sockets, s)
	}
	if cfg.HTTP.Listen != "" {
		l, err := net.Listen("tcp", cfg.HTTP.Listen)
		if err != nil {
			n.closeSockets()
			return nil, fmt.Errorf("http.listen: %w", err)
		}
		n.httpL = l
	}
	return n, nil
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

// answerConfig derives the answer options from the configuration.
func answerConfig(cfg *config.Config) *zone.Config {
	k := cfg.Kubernetes
	a := &zone.Config{TTL: uint32(*k.TTL), EndpointPodNames: k.EndpointPodNames, IgnoreEmptyService: k.IgnoreEmptyService}
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
	a.Prepare()
	return a
}

// Start loads the sources and starts serving. A manifest that does not
// parse is an error here; later it only keeps the last good state.
func (n *Node) Start() error {
	var initial *manifest.Snapshot
	var sources []string
	if len(n.cfg.Manifests.Files) > 0 {
		var err error
		if initial, err = manifest.Load(n.files, n.cfg.Manifests.Files); err != nil {
			return fmt.Errorf("manifests.files: %w", err)
		}
		sources = append(sources, manifest.SourceName)
	}
	var kube *kubesource.Config
	if n.cfg.Kubernetes.Enabled {
		k := n.cfg.Kubernetes
		client, err := kubesource.NewClient(k.Kubeconfig, "shardns/"+Version)
		if err != nil {
			return err
		}
		kube = &kubesource.Config{Client: client, Namespaces: k.Namespaces, NamespaceSelector: k.NamespaceSelector,
			LabelSelector: k.LabelSelector, Pods: k.Pods == "verified", NoEndpoints: k.NoEndpoints,
			Logger: n.log.With("source", kubesource.SourceName)}
		if err := kube.Validate(); err != nil {
			return err
		}
		klog.SetSlogLogger(n.log.With("component", "client-go"))
		sources = append(sources, kubesource.SourceName)
	}
	if len(sources) == 0 {
		n.log.Warn("no source configured: only the zone apexes are served")
	}
	n.system = actor.NewActorSystem(actor.WithLoggerFactory(func(*actor.ActorSystem) *slog.Logger {
		return n.log.With("component", "actor")
	}))
	root := n.system.Root
	spawn := func(p *actor.Props) *actor.PID {
		pid := root.Spawn(p)
		n.actors = append(n.actors, pid)
		return pid
	}
	manager := spawn(zones.NewManagerProps(zones.Config{
		Answer: n.answer, Table: n.table, Sources: sources, Now: time.Now, Logger: n.log,
		StartupTimeout: n.cfg.Kubernetes.StartupTimeout.D(), Synced: &n.synced,
	}))
	if kube != nil {
		kube.Manager = manager
		spawn(kubesource.NewProps(*kube))
	}
	if initial != nil {
		spawn(manifest.NewProps(manifest.Config{Files: n.cfg.Manifests.Files, FS: n.files,
			Interval: n.cfg.Manifests.Interval.D(), Manager: manager, Logger: n.log}, initial))
	}
	reg, allMetrics := metrics.New(Version)
	upstream, err := n.upstream(allMetrics.Forward)
	if err != nil {
		return err
	}
	for _, s := range n.sockets {
		h := &query.Handler{Config: n.answer, View: n.table, Metrics: allMetrics, Server: "dns://" + s.Addr(),
			Upstream: upstream}
		spawn(listeners.NewProps(listeners.Config{Handler: h, IdleTimeout: n.cfg.DNS.TCPIdleTimeout.D(),
			MaxConnections: n.cfg.DNS.TCPMaxConnections, Logger: n.log}, s))
	}
	if n.httpL != nil {
		n.http = httpapi.New(httpapi.Config{Registry: reg, Ready: n.Ready, Ring: n.ring})
		n.wg.Go(func() {
			if err := n.http.Serve(n.httpL); err != nil && !errors.Is(err, http.ErrServerClosed) {
				n.log.Error("http server", "err", err)
			}
		})
	}
	n.log.Info("shardns started", "node", n.name, "version", Version, "dns", n.DNSAddrs(), "http", n.cfg.HTTP.Listen)
	return nil
}

// upstream builds the forwarder and its cache, or nil when no upstream is
// configured. An upstream that is this server itself is an error.
func (n *Node) upstream(m *metrics.Forward) (*query.Upstream, error) {
	f := n.cfg.Forward
	addrs, err := forward.ParseUpstreams(f.Upstreams, nil)
	if err != nil {
		return nil, err
	}
	if len(addrs) == 0 {
		n.log.Info("no forward.upstreams: names outside the cluster zones get REFUSED")
		return nil, nil
	}
	if err := forward.CheckLoop(addrs, n.DNSAddrs(), forward.LocalAddrs()); err != nil {
		return nil, err
	}
	n.forwarder = forward.New(forward.Config{Upstreams: addrs, Policy: f.Policy, Timeout: f.Timeout.D(),
		MaxConcurrent: f.MaxConcurrent, HealthCheck: f.HealthCheck.D(), MaxFails: f.MaxFails,
		Logger: n.log.With("component", "forward"),
		OnResult: func(to string, rcode int, err error, took time.Duration) {
			m.Requests.WithLabelValues(to).Inc()
			if err != nil {
				m.HealthcheckFails.WithLabelValues(to).Inc()
				return
			}
			rc := dns.RcodeToString[rcode]
			m.Responses.WithLabelValues(to, rc).Inc()
			m.Duration.WithLabelValues(to, rc).Observe(took.Seconds())
		}})
	u := &query.Upstream{Forwarder: n.forwarder, Deadline: f.Deadline.D(), Now: time.Now}
	for _, z := range n.cfg.Kubernetes.Fallthrough {
		u.Fallthrough = append(u.Fallthrough, zone.Fqdn(z))
	}
	if c := n.cfg.Cache; c.Enabled {
		sec := func(s int) time.Duration { return time.Duration(s) * time.Second }
		u.Cache = cache.New(cache.Config{Size: c.Size, SuccessMaxTTL: sec(c.MaxTTL), DenialMaxTTL: sec(c.DenialMaxTTL),
			MinTTL: sec(c.MinTTL), PrefetchHits: c.PrefetchHits, PrefetchPercent: c.PrefetchPercent,
			ServeStale: c.ServeStale.D()})
	}
	n.log.Info("forwarding names outside the cluster", "upstreams", addrs, "policy", f.Policy, "cache", n.cfg.Cache.Enabled)
	return u, nil
}

// Ready reports whether every source has synced.
func (n *Node) Ready() bool { return n.synced.Load() }

// ring reports this node's zones; a single node owns them all.
func (n *Node) ring() httpapi.Ring {
	members := []string{n.name}
	r := httpapi.Ring{Members: members, Zones: map[string][]string{}}
	rf := *n.cfg.Cluster.ReplicationFactor
	for _, key := range n.table.Keys() {
		r.Zones[key] = cluster.Owners(members, key, rf)
	}
	return r
}

// DNSAddrs lists the addresses DNS is served on (useful with port 0).
func (n *Node) DNSAddrs() []string {
	out := make([]string, len(n.sockets))
	for i, s := range n.sockets {
		out[i] = s.Addr()
	}
	return out
}

// HTTPAddr is the address of the HTTP endpoints, or "".
func (n *Node) HTTPAddr() string {
	if n.httpL == nil {
		return ""
	}
	return n.httpL.Addr().String()
}

// WaitReady blocks until the node is ready or ctx ends.
func (n *Node) WaitReady(ctx context.Context) error {
	t := time.NewTicker(10 * time.Millisecond)
	defer t.Stop()
	for !n.Ready() {
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-t.C:
		}
	}
	return nil
}

// Stop fails readiness, waits lameduck so clients move away, then stops
// every actor and waits for the goroutines they own.
func (n *Node) Stop(lameduck time.Duration) {
	if n.stopped {
		return
	}
	n.stopped = true
	if n.http != nil {
		n.http.EnterLameduck()
	}
	if lameduck > 0 {
		n.log.Info("lameduck", "duration", lameduck)
		time.Sleep(lameduck)
	}
	// Listeners first, so no query reads a zone being torn down.
	for i := len(n.actors) - 1; i >= 0; i-- {
		if err := n.system.Root.StopFuture(n.actors[i]).Wait(); err != nil {
			n.log.Warn("actor did not stop in time", "actor", n.actors[i].Id, "err", err)
		}
	}
	if n.system != nil {
		n.system.Shutdown()
	}
	n.closeSockets()
	if n.forwarder != nil {
		n.forwarder.Close()
	}
	if n.http != nil {
		n.http.Close()
	}
	n.wg.Wait()
	n.log.Info("shardns stopped", "node", n.name)
}

func (n *Node) closeSockets() {
	for _, s := range n.sockets {
		s.Close()
	}
	if n.httpL != nil {
		n.httpL.Close()
	}
}
