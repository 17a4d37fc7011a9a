// Package config loads and validates the shardns YAML configuration.
//
// The keys are a contract with users (docs/configuration.md): unknown keys
// and invalid values are rejected with an error that names the key.
package config

import (
	"errors"
	"fmt"
	"net"
	"net/netip"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"time"

	"sigs.k8s.io/yaml"
)

// The modes a process runs in.
const (
	// ModeReplica owns zones and feeds them from the sources.
	ModeReplica = "replica"
	// ModeNodeLocal owns nothing: it caches, asks zone owners directly and
	// forwards other names (a DaemonSet on every node).
	ModeNodeLocal = "nodelocal"
)

// Config is the whole configuration file.
type Config struct {
	Mode       string           `json:"mode"` // replica | nodelocal
	DNS        DNSConfig        `json:"dns"`
	HTTP       HTTPConfig       `json:"http"`
	Kubernetes KubernetesConfig `json:"kubernetes"`
	Istio      IstioConfig      `json:"istio"`
	Gateway    GatewayConfig    `json:"gateway"` // Gateway API names, as k8s_gateway
	Manifests  ManifestsConfig  `json:"manifests"`
	Forward    ForwardConfig    `json:"forward"`
	Cache      CacheConfig      `json:"cache"`
	Autopath   AutopathConfig   `json:"autopath"`
	// NodeLocal is what a node-local process knows of its node's pods.
	NodeLocal   NodeLocalConfig   `json:"nodeLocal"`
	Cluster     ClusterConfig     `json:"cluster"`
	LoadBalance LoadBalanceConfig `json:"loadbalance"`
	Log         LogConfig         `json:"log"`
	Memory      MemoryConfig      `json:"memory"`
	// Servers are extra listeners (plain, TLS, HTTPS), each optionally
	// limited to some zones.
	Servers []ServerConfig `json:"servers"`
	// Files are authoritative zone files, sharded like cluster zones.
	Files FilesConfig `json:"files"`
	// Hosts answers names from /etc/hosts-format entries.
	Hosts HostsConfig `json:"hosts"`
	// Rewrite changes queries before they are answered.
	Rewrite []RewriteRule `json:"rewrite"`
	// Template answers names from record templates, after the rewrite
	// rules and before hosts and the cluster zones (CoreDNS's template
	// plugin).
	Template []Template `json:"template"`
	// Chaos answers version.bind and friends.
	Chaos ChaosConfig `json:"chaos"`
	// Federation answers names of Kubernetes cluster federations (kube-dns
	// federations, CoreDNS's federation plugin).
	Federation FederationConfig `json:"federation"`
	// ACL answers, refuses or drops questions by their source address
	// and type, before anything else answers them.
	ACL []ACLConfig `json:"acl"`
	// BufSize, NSID, Header and DNS64 change requests and responses
	// (modifiers.go).
	BufSize BufSizeConfig `json:"bufsize"`
	NSID    NSIDConfig    `json:"nsid"`
	Header  HeaderConfig  `json:"header"`
	DNS64   DNS64Config   `json:"dns64"`
	// Views answer the queries their expressions hold for from planes of
	// their own (views.go).
	Views []ViewConfig `json:"views"`
}

// LoadBalanceConfig is the order of addresses in answers.
type LoadBalanceConfig struct {
	// Enabled shuffles A and AAAA records in every answer, as CoreDNS's
	// loadbalance plugin (on in the default Corefile).
	Enabled bool `json:"enabled"`
}

// DNSConfig is the DNS listeners.
type DNSConfig struct {
	// Listen addresses, host:port; UDP and TCP are served on each.
	Listen []string `json:"listen"`
	// TCPIdleTimeout closes a TCP connection after this long without a query.
	TCPIdleTimeout Duration `json:"tcpIdleTimeout"`
	// TCPReadTimeout closes a new TCP (TLS, HTTPS) connection whose first
	// query has not arrived this long after it opened; 0: TCPIdleTimeout.
	TCPReadTimeout Duration `json:"tcpReadTimeout"`
	// TCPWriteTimeout bounds writing one response; 0: TCPIdleTimeout.
	TCPWriteTimeout Duration `json:"tcpWriteTimeout"`
	// TCPMaxConnections bounds concurrent TCP connections per listener.
	TCPMaxConnections int `json:"tcpMaxConnections"`
	// TCPMaxConnectionsPerSource bounds the TCP (TLS, HTTPS) connections
	// of one client address per listener; a further one from it closes
	// its idlest. 0: no bound but TCPMaxConnections.
	TCPMaxConnectionsPerSource int `json:"tcpMaxConnectionsPerSource"`
	// TCPMaxQueries closes a TCP connection after this many queries, so
	// one client cannot hold a connection for ever; 0: no bound.
	TCPMaxQueries int `json:"tcpMaxQueries"`
	// MaxLargeMessages bounds the TCP, TLS and HTTPS messages over 512
	// bytes being read or answered at once per listener; one more cuts
	// the one that has been arriving the longest (its connection closed,
	// its stream answered 503). 0: 64.
	MaxLargeMessages int `json:"maxLargeMessages"`
	// HTTPSMaxStreams bounds the HTTP/2 streams one DNS over HTTPS
	// connection may have open; a further one is refused. 0: 32.
	HTTPSMaxStreams int `json:"httpsMaxStreams"`
	// HTTPSMaxInFlight bounds the DNS over HTTPS requests being read or
	// answered per listener; one more takes the place of the body that
	// has been arriving the longest, or is answered 503. 0: 256.
	HTTPSMaxInFlight int `json:"httpsMaxInFlight"`
	// HTTPSBodyTimeout bounds reading the body of a DNS over HTTPS POST;
	// a body not in by then is answered 408. 0: 2s.
	HTTPSBodyTimeout Duration `json:"httpsBodyTimeout"`
	// RateLimit bounds the UDP queries of each client; off by default.
	RateLimit RateLimitConfig `json:"rateLimit"`
	// RRL is response rate limiting on UDP answers; off by default.
	RRL RRLConfig `json:"rrl"`
}

// HTTPConfig is the health, readiness and metrics endpoint.
type HTTPConfig struct {
	// Listen is the host:port of /health, /ready, /metrics and /debug/ring
	// (see Debug).
	Listen string `json:"listen"`
	// Lameduck is how long /ready fails before shutdown stops serving, so
	// clients move to other replicas first.
	Lameduck Duration `json:"lameduck"`
	// Pprof serves Go's runtime profiles under /debug/pprof/ on Listen
	// (heap, CPU, goroutines). Off by default: profiles reveal internals
	// and a CPU profile costs CPU while it runs.
	Pprof bool `json:"pprof"`
	// Debug are the networks (CIDRs or addresses) whose clients may read
	// /debug/ring and /debug/pprof/ on Listen. Clients on this host
	// (loopback, or an address of its own) always may; empty: nobody
	// else. ["0.0.0.0/0", "::/0"] is everybody.
	Debug []string `json:"debug"`
	// MetricsListen are more host:port addresses serving /metrics alone,
	// where a Corefile's `prometheus ADDR` put CoreDNS's metrics (9153),
	// so existing scrape configurations and Services keep working.
	MetricsListen []string `json:"metricsListen"`
}

// IstioConfig is the Istio ServiceEntry source. It connects with
// kubernetes.kubeconfig and kubernetes.context, like the Kubernetes
// source.
type IstioConfig struct {
	// Enabled watches networking.istio.io ServiceEntries and answers their
	// hosts.
	Enabled bool `json:"enabled"`
	// TTL of every ServiceEntry record, 0–3600 seconds.
	TTL int `json:"ttl"`
	// Zones are the zones the cluster admin delegates to the mesh (as
	// istio-coredns's `global:53` block): ServiceEntry hosts outside them
	// are not answered. Default [global]; ["."] reaches as far as Istio's
	// own proxy (see istio.go).
	Zones []string `json:"zones"`
	// DefaultExportTo is the exportTo of entries that declare none, as
	// Istio's meshConfig.defaultServiceExportTo. Default ["*"], Istio's.
	DefaultExportTo []string `json:"defaultExportTo"`
}

// ManifestsConfig is the YAML file source.
type ManifestsConfig struct {
	// Files of Kubernetes YAML served as a cluster.
	Files []string `json:"files"`
	// Interval between checks of the files for changes.
	Interval Duration `json:"interval"`
}

// ForwardConfig is the upstream forwarder.
type ForwardConfig struct {
	// Upstreams: IP, IP:port, tls://IP[:port] (DNS over TLS, port 853),
	// https://IP[:port][/path] (DNS over HTTPS, port 443, path
	// /dns-query), or the path of a resolv.conf whose nameservers are
	// used. Empty refuses names outside the cluster.
	Upstreams []string `json:"upstreams"`
	// Policy picks the upstream to try first: random, round_robin or
	// sequential.
	Policy string `json:"policy"`
	// Timeout is the read timeout of one attempt at one upstream.
	Timeout Duration `json:"timeout"`
	// Deadline bounds all attempts for one question; then SERVFAIL.
	Deadline Duration `json:"deadline"`
	// MaxConcurrent bounds forwarded queries in flight; more get REFUSED.
	MaxConcurrent int `json:"maxConcurrent"`
	// HealthCheck is how often an upstream marked down is probed.
	HealthCheck Duration `json:"healthCheck"`
	// MaxFails consecutive failures mark an upstream down.
	MaxFails int `json:"maxFails"`
	// TLS is how the tls:// and https:// upstreams are trusted
	// (CoreDNS's tls and tls_servername); plain upstreams ignore it.
	TLS UpstreamTLSConfig `json:"tls"`
	// MaxIdleConns bounds the connections kept open per upstream
	// between queries (tls://, TCP to plain ones, HTTP/1.1 to https://
	// ones: one HTTP/2 connection carries many queries); 0: no bound.
	MaxIdleConns int `json:"maxIdleConns"`
	// Expire closes a connection kept open to an upstream (TLS, HTTPS,
	// or TCP to a plain one) once idle this long; 0 keeps none open.
	Expire Duration `json:"expire"`
	// MaxAge replaces a connection kept open once it has been open this
	// long, however busy (max_age); 0: no bound, else at least Expire.
	// HTTPS connections have none, as in CoreDNS.
	MaxAge Duration `json:"maxAge"`
	// ForwardOptions: forceTCP, preferUDP, failover and except.
	ForwardOptions
	// Stubs forward some zones to other upstreams (stub domains), each
	// with its own health checks and cache.
	Stubs []StubConfig `json:"stubs"`
}

// CacheConfig is the response cache in front of the forwarder.
type CacheConfig struct {
	Enabled bool `json:"enabled"`
	// MaxTTL caps the TTL of cached answers with records, in seconds.
	MaxTTL int `json:"maxTTL"`
	// DenialMaxTTL caps the TTL of cached NXDOMAIN and NODATA, in seconds.
	DenialMaxTTL int `json:"denialMaxTTL"`
	// MinTTL is the least time an answer is kept, in seconds.
	MinTTL int `json:"minTTL"`
	// Size bounds the number of cached answers.
	Size int `json:"size"`
	// MaxBytes bounds the memory cached answers hold (their wire length
	// and about 128 bytes a record), a size such as "16Mi": answers from
	// a domain a client controls can be 64 KiB each, so a bound on
	// entries alone is not one on memory. It applies to each cache: the
	// forwarder's, each stub domain's and that of owners' answers.
	MaxBytes string `json:"maxBytes"`
	// PrefetchHits makes an answer popular; popular answers are refreshed
	// before they expire. 0 disables prefetching.
	PrefetchHits int `json:"prefetchHits"`
	// PrefetchPercent: popular answers are refreshed below this share of
	// their TTL.
	PrefetchPercent int `json:"prefetchPercent"`
	// ServeStale serves expired answers for this long when no upstream
	// answers (RFC 8767). 0 disables it.
	ServeStale Duration `json:"serveStale"`
	// ServfailTTL keeps an upstream's SERVFAIL answer this long, at most
	// 5m (CoreDNS's servfail and its default, 5s); 0 keeps none.
	ServfailTTL Duration `json:"servfailTTL"`
	// KeepTTL serves cached answers with the TTLs they came with, not
	// counted down (CoreDNS's keepttl); they still expire as usual.
	KeepTTL bool `json:"keepTTL"`
	// Zones limits the cache to names in these zones (CoreDNS's cache
	// ZONES); empty: every name.
	Zones []string `json:"zones"`
}

// AutopathConfig is the search-path shortcut.
type AutopathConfig struct {
	Enabled bool `json:"enabled"`
}

// ClusterConfig is membership and sharding.
// Sharding starts when enabled, join or joinService is set; otherwise the
// process owns every zone alone.
type ClusterConfig struct {
	// Enabled starts gossip and remote even without seeds (the first
	// replica of a cluster the others join).
	Enabled bool `json:"enabled"`
	// NodeName is this replica's stable name; default: the hostname (a
	// StatefulSet pod name). With joinService it must be the name or the
	// hostname of the pod behind its endpoint: another name at a replica's
	// address is refused, as a phantom member would be.
	NodeName string `json:"nodeName"`
	// Bind is the memberlist gossip address (UDP and TCP).
	Bind string `json:"bind"`
	// Advertise is the address others reach this replica at: host or
	// host:port of the gossip, the remote port following cluster.remote.
	Advertise string `json:"advertise"`
	// Remote is the listen address of actor remote (queries between replicas).
	Remote string `json:"remote"`
	// Join lists seed gossip addresses.
	Join []string `json:"join"`
	// JoinService is namespace/name of a headless Service whose
	// EndpointSlices list the peers (found through the API, not DNS).
	JoinService string `json:"joinService"`
	// ReplicationFactor is how many replicas own each zone; 0: all of them.
	ReplicationFactor *int `json:"replicationFactor"`
	// Label keeps clusters apart: replicas with different labels never merge.
	Label string `json:"label"`
	// SecretKeyFile holds the gossip key (16, 24 or 32 bytes, raw or
	// base64), or several base64 keys one per line during a rotation (the
	// first encrypts, all decrypt). The key encrypts and authenticates
	// gossip and, through a certificate derived from it, the remote port.
	SecretKeyFile string `json:"secretKeyFile"`
	// Secret is namespace/name of a Secret whose data "key" holds the
	// gossip keys in the format of secretKeyFile, read through the API at
	// start. A replica that finds the Secret without a key generates one
	// and writes it there, so a deployment needs no manual step.
	Secret string `json:"secret"`
	// Insecure lets gossip and remote listen beyond loopback without a
	// key: any process that reaches those ports can then join the ring
	// and answer for zones. Logged as a warning on every start.
	Insecure bool `json:"insecure"`
	// AdmitServices are more namespace/name Services whose endpoints may
	// connect to the remote port to ask questions (the node-local
	// DaemonSet's), beside joinService's. They never own zones: only
	// joinService's endpoints do.
	AdmitServices []string `json:"admitServices"`
	// NodeLocalSecret is namespace/name of a Secret whose data
	// "credential" holds the node-local credential (docs/hardening.md): a
	// replica writes there the one derived from its keys, a node-local
	// process reads it at start (waiting for a replica to write it).
	NodeLocalSecret string `json:"nodeLocalSecret"`
	// CredentialFile, for a node-local process, holds the node-local
	// credential, as `shardns credential` prints it: outside Kubernetes,
	// in place of nodeLocalSecret.
	CredentialFile string `json:"credentialFile"`
	// Replicas, for a node-local process, lists the replicas' actor
	// remote addresses (host:port, their cluster.remote) to read the ring
	// from; with joinService the peers Service's endpoints are asked
	// instead. A node-local process does not gossip: it holds no replica
	// key.
	Replicas []string `json:"replicas"`
	// HandoffGrace is how long a replica keeps answering for zones it
	// lost, and how long the others ask one that left the ring for the
	// zones it owned, which it answers in its lameduck while their new
	// owners load them.
	HandoffGrace Duration `json:"handoffGrace"`
	// DispatchTimeout bounds one attempt at asking another replica.
	DispatchTimeout Duration `json:"dispatchTimeout"`
	// QuestionTimeout bounds a question asked of other replicas, every
	// attempt and owner together: past it the replica answers with the
	// owners' answer it holds, stale (RFC 8767), or else SERVFAIL. Well
	// under a client's 1 s retry, so that no client waits for nothing.
	QuestionTimeout Duration `json:"questionTimeout"`
	// Gossip is lan (memberlist's LAN timing) or fast (sub-second failure
	// detection, for tests on one host).
	Gossip string `json:"gossip"`
	// FailureDetection tunes how soon gossip declares dead a replica that
	// stopped answering, against how often it suspects one that was only
	// slow; zero fields keep the gossip profile's.
	FailureDetection FailureDetectionConfig `json:"failureDetection"`
}

// FailureDetectionConfig tunes memberlist's failure detector (SWIM with
// Lifeguard). A replica that stops answering is suspected after it misses
// a probe round and declared dead suspicionMult probe intervals later
// unless it refutes: with up to 9 replicas, about 1 to 2 probe intervals
// plus suspicionMult × probeInterval after it stopped. A replica whose
// process exits is found sooner, whatever this says, by the replicas that
// find its remote port closed (docs/hardening.md).
type FailureDetectionConfig struct {
	// ProbeInterval is how often a replica probes one other member.
	// Default: 1s with gossip lan, 200ms with fast. At least 50ms.
	ProbeInterval Duration `json:"probeInterval"`
	// ProbeTimeout is how long a probe waits for its ack before other
	// members are asked to probe too. Default: half the probe interval;
	// at most the probe interval.
	ProbeTimeout Duration `json:"probeTimeout"`
	// SuspicionMult is how many probe intervals a suspected member has to
	// refute before it is declared dead (scaled up by log10 of the member
	// count from 10 members). Default: 4 with gossip lan, 3 with fast.
	SuspicionMult int `json:"suspicionMult"`
}

// gossipProbeInterval is each gossip profile's probe interval, as
// cluster/membership's DefaultTiming and FastTiming set it.
var gossipProbeInterval = map[string]Duration{"lan": Duration(time.Second), "fast": Duration(200 * time.Millisecond)}

// minProbeInterval bounds cluster.failureDetection.probeInterval: below
// it, probes cost more than they tell on any network.
const minProbeInterval = Duration(50 * time.Millisecond)

// Clustered reports whether this replica joins others.
func (c ClusterConfig) Clustered() bool {
	return c.Enabled || len(c.Join) > 0 || c.JoinService != "" || len(c.Replicas) > 0
}

// LogConfig is the process log.
type LogConfig struct {
	// Level is debug, info, warn or error.
	Level string `json:"level"`
	// Format is text or json.
	Format string `json:"format"`
	// Queries logs every query (CoreDNS's log plugin); off by default.
	Queries bool `json:"queries"`
	// QueryNames limits the query log to names in these zones (the log
	// plugin's NAMES); empty: every name.
	QueryNames []string `json:"queryNames"`
	// QueryClasses limits the query log to these classes of response
	// (the log plugin's class): success, denial (NXDOMAIN and NODATA),
	// error (any other failure) or all; empty: all.
	QueryClasses []string `json:"queryClasses"`
	// QueryFormat is each query's log message, with the log plugin's
	// placeholders ({remote}, {name}, {rcode}, {common}, ...); empty:
	// shardns's own fields.
	QueryFormat string `json:"queryFormat"`
	// Errors logs why queries failed (CoreDNS's errors plugin).
	Errors bool `json:"errors"`
	// ErrorsConsolidate gathers the errors whose text matches a pattern
	// into one line per window (the errors plugin's consolidate).
	ErrorsConsolidate []ConsolidateConfig `json:"errorsConsolidate"`
}

// Default returns the configuration used for every key the file omits.
func Default() *Config {
	ttl, rf := 5, 2
	return &Config{
		Mode: "replica",
		DNS: DNSConfig{Listen: []string{"127.0.0.1:5353"}, TCPIdleTimeout: Duration(10e9),
			TCPMaxConnections: 1024, TCPMaxConnectionsPerSource: 256, TCPMaxQueries: 10000,
			MaxLargeMessages: 64, HTTPSMaxStreams: 32, HTTPSMaxInFlight: 256, HTTPSBodyTimeout: Duration(2e9)},
		HTTP: HTTPConfig{Listen: "127.0.0.1:8080", Lameduck: Duration(5e9)},
		Kubernetes: KubernetesConfig{
			Enabled:        true,
			Zones:          []string{"cluster.local"},
			ReverseZones:   []string{"in-addr.arpa", "ip6.arpa"},
			TTL:            &ttl,
			Pods:           "insecure",
			Fallthrough:    []string{"in-addr.arpa", "ip6.arpa"},
			StartupTimeout: Duration(5e9),
		},
		Istio:     IstioConfig{TTL: 30, Zones: []string{"global"}, DefaultExportTo: []string{"*"}},
		Gateway:   DefaultGateway(),
		Manifests: ManifestsConfig{Interval: Duration(2e9)},
		Forward: ForwardConfig{Upstreams: []string{"/etc/resolv.conf"}, Policy: "random",
			Timeout: Duration(2e9), Deadline: Duration(5e9), MaxConcurrent: 1000,
			HealthCheck: Duration(5e8), MaxFails: 2, Expire: Duration(10e9)},
		Cache: CacheConfig{Enabled: true, MaxTTL: 30, DenialMaxTTL: 30, MinTTL: 5, Size: 10000,
			MaxBytes: DefaultCacheMaxBytes, PrefetchPercent: 10, ServfailTTL: Duration(5e9)},
		Cluster: ClusterConfig{Bind: "0.0.0.0:7946", Remote: "0.0.0.0:8090",
			ReplicationFactor: &rf, Label: "shardns", HandoffGrace: Duration(15e9),
			DispatchTimeout: Duration(5e8), QuestionTimeout: Duration(6e8), Gossip: "lan"},
		LoadBalance: LoadBalanceConfig{Enabled: true},
		NodeLocal:   NodeLocalConfig{AAAA: AAAAAnswer},
		Log:         LogConfig{Level: "info", Format: "text", Errors: true},
		Memory:      MemoryConfig{Limit: MemoryLimitAuto},
		Files:       FilesConfig{Interval: Duration(2e9)},
		Hosts:       HostsConfig{TTL: 3600, Interval: Duration(5e9)},
		BufSize:     BufSizeConfig{Size: 1232},
		DNS64:       DNS64Config{Prefix: DefaultDNS64Prefix},
	}
}

// Load reads and validates the file at path.
func Load(path string) (*Config, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	cfg, err := Parse(data)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	// Relative paths are read from the configuration file's folder, so a
	// config and its manifests can move together.
	rel := func(f *string) {
		if *f != "" && !filepath.IsAbs(*f) {
			*f = filepath.Join(filepath.Dir(path), *f)
		}
	}
	for i := range cfg.Manifests.Files {
		rel(&cfg.Manifests.Files[i])
	}
	for i := range cfg.Files.Zones {
		rel(&cfg.Files.Zones[i].File)
	}
	for i := range cfg.Hosts.Files {
		rel(&cfg.Hosts.Files[i])
	}
	for i := range cfg.Servers {
		rel(&cfg.Servers[i].TLS.CertFile)
		rel(&cfg.Servers[i].TLS.KeyFile)
	}
	tls := cfg.Forward.upstreamTLS()
	for i := range cfg.Views {
		v := &cfg.Views[i]
		for j := range v.Hosts.Files {
			rel(&v.Hosts.Files[j])
		}
		tls = append(tls, &v.Forward.TLS)
		for j := range v.Forward.Stubs {
			tls = append(tls, &v.Forward.Stubs[j].TLS)
		}
	}
	for _, t := range tls {
		rel(&t.CAFile)
		rel(&t.CertFile)
		rel(&t.KeyFile)
	}
	return cfg, nil
}

// Parse decodes YAML on top of Default and validates the result.
func Parse(data []byte) (*Config, error) {
	cfg := Default()
	if err := yaml.UnmarshalStrict(data, cfg); err != nil {
		return nil, fmt.Errorf("invalid configuration: %w", err)
	}
	if err := cfg.validate(); err != nil {
		return nil, err
	}
	return cfg, nil
}

// Validate checks a configuration built other than by Parse (from a
// Corefile and a base file, say) as Parse checks one it read.
func (c *Config) Validate() error { return c.validate() }

// validate checks every value and names the offending key.
func (c *Config) validate() error {
	var errs []error
	bad := func(key, format string, args ...any) {
		errs = append(errs, fmt.Errorf("%s: "+format, append([]any{key}, args...)...))
	}
	switch c.Mode {
	case ModeReplica:
	case ModeNodeLocal:
		c.validateNodeLocal(bad)
	default:
		bad("mode", "must be replica or nodelocal, got %q", c.Mode)
	}
	if len(c.DNS.Listen) == 0 {
		bad("dns.listen", "needs at least one address")
	}
	for i, a := range c.DNS.Listen {
		if err := checkHostPort(a); err != nil {
			bad(fmt.Sprintf("dns.listen[%d]", i), "%v", err)
		}
	}
	if c.DNS.TCPIdleTimeout <= 0 {
		bad("dns.tcpIdleTimeout", "must be positive")
	}
	if c.DNS.TCPMaxQueries < 0 {
		bad("dns.tcpMaxQueries", "must not be negative")
	}
	if c.DNS.TCPMaxConnections <= 0 {
		bad("dns.tcpMaxConnections", "must be positive")
	}
	if c.DNS.TCPMaxConnectionsPerSource < 0 {
		bad("dns.tcpMaxConnectionsPerSource", "must not be negative")
	}
	c.validateStreamLimits(bad)
	validateRRL(bad, &c.DNS.RRL)
	if c.HTTP.Listen != "" {
		if err := checkHostPort(c.HTTP.Listen); err != nil {
			bad("http.listen", "%v", err)
		}
	}
	if c.HTTP.Lameduck < 0 {
		bad("http.lameduck", "must not be negative")
	}
	validateDebug(bad, &c.HTTP)
	for i, a := range c.HTTP.MetricsListen {
		key := fmt.Sprintf("http.metricsListen[%d]", i)
		if err := checkHostPort(a); err != nil {
			bad(key, "%v", err)
		}
		// Port 0 (any free port, in tests) binds anew each time.
		if !strings.HasSuffix(a, ":0") && (a == c.HTTP.Listen || slices.Contains(c.HTTP.MetricsListen[:i], a)) {
			bad(key, "%s is listed twice (http.listen serves /metrics already)", a)
		}
	}
	c.validateKubernetes(bad)
	c.validateIstio(bad)
	c.validateGateway(bad)
	if c.Manifests.Interval <= 0 {
		bad("manifests.interval", "must be positive")
	}
	for i, f := range c.Manifests.Files {
		if f == "" {
			bad(fmt.Sprintf("manifests.files[%d]", i), "is empty")
		}
	}
	if c.Autopath.Enabled && c.Mode != ModeNodeLocal && (c.Kubernetes.Pods != "verified" || !c.Kubernetes.Enabled) {
		bad("autopath.enabled", "needs kubernetes.pods: verified, to know the namespace of each client pod "+
			"(or a node-local process in front, mode: nodelocal, which knows its node's pods)")
	}
	c.validateNodeLocalClients(bad)
	c.validateResolver(bad)
	c.validateCluster(bad)
	c.validateBeyond(bad)
	c.validateFederation(bad)
	c.validateACL(bad)
	c.validateViews(bad)
	c.validateChains(bad)
	c.validateMemory(bad)
	c.validateModifiers(bad)
	switch c.Log.Level {
	case "debug", "info", "warn", "error":
	default:
		bad("log.level", "must be debug, info, warn or error, got %q", c.Log.Level)
	}
	switch c.Log.Format {
	case "text", "json":
	default:
		bad("log.format", "must be text or json, got %q", c.Log.Format)
	}
	validateQueryLog(bad, "log", &c.Log)
	return errors.Join(errs...)
}

// validateNodeLocal rejects what a node-local process cannot do: it
// watches no source and holds no zone, so it needs replicas to ask.
func (c *Config) validateNodeLocal(bad func(key, format string, args ...any)) {
	cl := &c.Cluster
	switch {
	case len(cl.Join) > 0:
		bad("cluster.join", "a nodelocal process does not gossip (it holds no replica key): list the replicas' "+
			"remote addresses (their cluster.remote) in cluster.replicas, or set cluster.joinService")
	case len(cl.Replicas) == 0 && cl.JoinService == "":
		bad("mode", "nodelocal needs the replicas to ask: set cluster.replicas or cluster.joinService")
	}
	for i, r := range cl.Replicas {
		if err := checkHostPort(r); err != nil {
			bad(fmt.Sprintf("cluster.replicas[%d]", i), "%v", err)
		}
	}
	if cl.SecretKeyFile != "" || cl.Secret != "" {
		bad("cluster", "a nodelocal process must not hold the replicas' key (secretKeyFile, secret): "+
			"give it the node-local credential in cluster.credentialFile or cluster.nodeLocalSecret")
	}
	if cl.CredentialFile != "" && cl.NodeLocalSecret != "" {
		bad("cluster.credentialFile", "set cluster.credentialFile or cluster.nodeLocalSecret, not both")
	}
	if cl.CredentialFile == "" && cl.NodeLocalSecret == "" && !cl.Insecure && !loopbackHostPort(cl.Remote) {
		bad("cluster.remote", "%s is reachable beyond this host and no node-local credential is set: "+
			"set cluster.credentialFile or cluster.nodeLocalSecret (docs/hardening.md), bind it to loopback, "+
			"or set cluster.insecure: true to accept that", cl.Remote)
	}
	if c.Istio.Enabled {
		bad("istio.enabled", "a nodelocal process watches no source; the replicas answer mesh names (reach them through forward.upstreams)")
	}
	if len(c.Manifests.Files) > 0 {
		bad("manifests.files", "a nodelocal process serves no manifests; give them to the replicas")
	}
	if len(c.Files.Zones) > 0 {
		bad("files.zones", "a nodelocal process serves no zone files; give them to the replicas")
	}
}

func (c *Config) validateCluster(bad func(key, format string, args ...any)) {
	cl := &c.Cluster
	if rf := cl.ReplicationFactor; rf == nil || *rf < 0 {
		bad("cluster.replicationFactor", "must be 0 or more")
	}
	for key, v := range map[string]string{"cluster.bind": cl.Bind, "cluster.remote": cl.Remote} {
		if err := checkHostPort(v); err != nil {
			bad(key, "%v", err)
		}
	}
	checkNamespaced := func(key, v string) {
		if ns, name, ok := strings.Cut(v, "/"); !ok || ns == "" || name == "" || strings.Contains(name, "/") {
			bad(key, "must be namespace/name, got %q", v)
		}
	}
	if cl.JoinService != "" {
		checkNamespaced("cluster.joinService", cl.JoinService)
	}
	for _, s := range cl.AdmitServices {
		checkNamespaced("cluster.admitServices", s)
	}
	if cl.Secret != "" {
		checkNamespaced("cluster.secret", cl.Secret)
		if cl.SecretKeyFile != "" {
			bad("cluster.secret", "set cluster.secret or cluster.secretKeyFile, not both")
		}
	}
	if cl.NodeLocalSecret != "" {
		checkNamespaced("cluster.nodeLocalSecret", cl.NodeLocalSecret)
	}
	if c.Mode != ModeNodeLocal && (cl.CredentialFile != "" || len(cl.Replicas) > 0) {
		bad("cluster", "credentialFile and replicas are a nodelocal process's; a replica gossips with its key")
	}
	if c.Mode != ModeNodeLocal && cl.Clustered() && cl.SecretKeyFile == "" && cl.Secret == "" && !cl.Insecure {
		for key, v := range map[string]string{"cluster.bind": cl.Bind, "cluster.remote": cl.Remote} {
			if !loopbackHostPort(v) {
				bad(key, "%s is reachable beyond this host and no gossip key is set: any process that reaches it "+
					"could join the ring and answer for zones. Set cluster.secretKeyFile or cluster.secret "+
					"(docs/hardening.md, \"Trust between replicas\"), bind it to loopback, or set "+
					"cluster.insecure: true to accept that", v)
			}
		}
	}
	if cl.HandoffGrace <= 0 {
		bad("cluster.handoffGrace", "must be positive")
	}
	if cl.DispatchTimeout <= 0 {
		bad("cluster.dispatchTimeout", "must be positive")
	}
	if cl.QuestionTimeout <= 0 {
		bad("cluster.questionTimeout", "must be positive")
	}
	if cl.Gossip != "lan" && cl.Gossip != "fast" {
		bad("cluster.gossip", "must be lan or fast, got %q", cl.Gossip)
	}
	fd := cl.FailureDetection
	if fd.ProbeInterval != 0 && fd.ProbeInterval < minProbeInterval {
		bad("cluster.failureDetection.probeInterval", "must be at least %v, got %v", minProbeInterval.D(), fd.ProbeInterval.D())
	}
	interval := fd.ProbeInterval
	if interval == 0 {
		interval = gossipProbeInterval[cl.Gossip]
	}
	switch {
	case fd.ProbeTimeout < 0:
		bad("cluster.failureDetection.probeTimeout", "must not be negative")
	case fd.ProbeTimeout > interval:
		bad("cluster.failureDetection.probeTimeout", "must not exceed the probe interval (%v), got %v", interval.D(), fd.ProbeTimeout.D())
	}
	if fd.SuspicionMult < 0 {
		bad("cluster.failureDetection.suspicionMult", "must be at least 1, got %d", fd.SuspicionMult)
	}
}

// loopbackHostPort reports whether host:port listens on a loopback
// address only.
func loopbackHostPort(hostPort string) bool {
	host, _, err := net.SplitHostPort(hostPort)
	if err != nil {
		return false
	}
	a, err := netip.ParseAddr(host)
	return err == nil && a.IsLoopback()
}

func (c *Config) validateResolver(bad func(key, format string, args ...any)) {
	f := &c.Forward
	switch f.Policy {
	case "random", "round_robin", "sequential":
	default:
		bad("forward.policy", "must be random, round_robin or sequential, got %q", f.Policy)
	}
	if f.Timeout <= 0 {
		bad("forward.timeout", "must be positive")
	}
	if f.Deadline < f.Timeout {
		bad("forward.deadline", "must be at least forward.timeout")
	}
	if f.MaxConcurrent <= 0 {
		bad("forward.maxConcurrent", "must be positive")
	}
	if f.HealthCheck <= 0 {
		bad("forward.healthCheck", "must be positive")
	}
	if f.MaxFails <= 0 {
		bad("forward.maxFails", "must be positive")
	}
	if f.MaxIdleConns < 0 {
		bad("forward.maxIdleConns", "must not be negative")
	}
	if f.Expire < 0 {
		bad("forward.expire", "must not be negative")
	}
	checkUpstreams(bad, "forward.upstreams", f.Upstreams)
	checkMaxAge(bad, f)
	checkForwardOptions(bad, "forward.", f.ForwardOptions)
	checkUpstreamTLS(bad, "forward.tls", f.TLS)
	ca := &c.Cache
	for key, v := range map[string]int{"cache.maxTTL": ca.MaxTTL, "cache.denialMaxTTL": ca.DenialMaxTTL,
		"cache.minTTL": ca.MinTTL, "cache.prefetchHits": ca.PrefetchHits} {
		if v < 0 {
			bad(key, "must not be negative")
		}
	}
	if ca.Enabled && ca.Size <= 0 {
		bad("cache.size", "must be positive")
	}
	if n, err := parseSize(ca.MaxBytes); err != nil || n < minCacheMaxBytes {
		bad("cache.maxBytes", "must be a size of at least 256Ki, such as 16Mi, got %q", ca.MaxBytes)
	}
	if ca.PrefetchPercent < 0 || ca.PrefetchPercent > 100 {
		bad("cache.prefetchPercent", "must be between 0 and 100")
	}
	if ca.ServeStale < 0 {
		bad("cache.serveStale", "must not be negative")
	}
	if ca.ServfailTTL < 0 || ca.ServfailTTL.D() > 5*time.Minute {
		bad("cache.servfailTTL", "must be between 0s and 5m, got %s", ca.ServfailTTL.D())
	}
	checkZones(bad, "cache.zones", ca.Zones, true)
	fqdnAll(ca.Zones)
}

func checkHostPort(a string) error {
	host, port, err := net.SplitHostPort(a)
	if err != nil {
		return err
	}
	if host != "" && net.ParseIP(host) == nil {
		return fmt.Errorf("%q: host must be an IP address", a)
	}
	if _, err := ParsePort(port); err != nil {
		return fmt.Errorf("%q: port must be a number from 0 to 65535", a)
	}
	return nil
}

// ValidTopology reports whether s is a value of kubernetes.topology:
// off (or empty), prefer or only. zone.ParseTopologyMode reads them.
func ValidTopology(s string) bool {
	switch s {
	case "", "off", "prefer", "only":
		return true
	}
	return false
}

// ParsePort reads a port number: decimal digits only, 0 to 65535.
// strconv.Atoi would also take "+53" and "-0", which no resolver or
// socket API writes.
func ParsePort(s string) (uint16, error) {
	n, err := strconv.ParseUint(s, 10, 16)
	if err != nil {
		return 0, fmt.Errorf("port %q is not a number from 0 to 65535", s)
	}
	return uint16(n), nil
}

// ValidDomain accepts host-style domain names (letters, digits, hyphens
// and underscores in labels of 1–63), not the root: records are built by
// joining names under it.
func ValidDomain(z string) bool {
	z = strings.TrimSuffix(z, ".")
	if z == "" || len(z) > 253 {
		return false
	}
	for _, l := range strings.Split(z, ".") {
		if l == "" || len(l) > 63 {
			return false
		}
		for _, c := range l {
			if !(c == '-' || c == '_' || ('a' <= c && c <= 'z') || ('A' <= c && c <= 'Z') || ('0' <= c && c <= '9')) {
				return false
			}
		}
	}
	return true
}
