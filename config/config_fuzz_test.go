package config

import (
	"net"
	"reflect"
	"strconv"
	"strings"
	"testing"

	"github.com/miekg/dns"
	"sigs.k8s.io/yaml"

	"github.com/shardns/shardns/zone"
)

// Validation gaps that FuzzParse reports once they are closed. Each is
// tolerated until then, so that the fuzz target keeps looking for new
// failures; set it to true when the fix lands. The seeds of FuzzParse hold
// a reproducer of each.
const (
	// A listen port that is not a number in 0–65535 ("127.0.0.1:http",
	// "127.0.0.1:99999", ":A") is accepted, and fails only at listen time.
	checkListenPorts = true
	// A zone that is not a domain name in presentation format (x\) is
	// accepted; its SOA does not pack, so every answer is SERVFAIL.
	checkZoneNames = true
	// The root zone "." is accepted as a cluster domain, but the zone core
	// names records by concatenation ("ns.dns." + ".", "ns.svc." + "."),
	// so its SOA, NS and every record in it fail to pack: SERVFAIL.
	checkRootZone = true
	// A reverse zone that merely ends in the letters "in-addr.arpa" or
	// "ip6.arpa" ("xin-addr.arpa") is accepted: the suffix is not checked
	// on a label boundary.
	checkReverseZones = true
)

// seedLocal is deploy/local/shardns.yaml.
const seedLocal = `# shardns serving the demo cluster in demo-cluster.yaml: one replica, no
# Kubernetes needed. ` + "`make run`" + ` serves this file; relative paths are read
# from this file's folder, and edits to the manifests are picked up live.
mode: replica
dns:
  listen: ["127.0.0.1:5353"]
http:
  listen: "127.0.0.1:8080"
kubernetes:
  enabled: false          # records come from the manifests below
  zones: [cluster.local]
  reverseZones: [in-addr.arpa, ip6.arpa]
  ttl: 5
  pods: insecure
manifests:
  files: [demo-cluster.yaml]
cluster:
  replicationFactor: 0    # a single replica owns every zone
`

// seedDocs is the full example of docs/configuration.md.
const seedDocs = `mode: replica                      # replica | nodelocal (nodelocal: not available yet)
dns:
  listen: ["127.0.0.1:5353"]       # UDP and TCP on each address
  tcpIdleTimeout: 10s              # close a TCP connection idle this long
  tcpMaxConnections: 1024          # per listener; further connections are closed at once
http:
  listen: "127.0.0.1:8080"         # /health /ready /metrics /debug/ring; "" disables
  lameduck: 0s                     # on SIGTERM, fail /ready this long before stopping
kubernetes:
  enabled: true                    # watch the Kubernetes API
  kubeconfig: ""
  zones: [cluster.local]           # cluster domains
  reverseZones: [in-addr.arpa, ip6.arpa]
  ttl: 5                           # 0–3600, TTL of every cluster record (CoreDNS's default)
  pods: insecure                   # disabled | insecure | verified (verified needs enabled: true)
  endpointPodNames: false          # name endpoints without a hostname after their pod
  namespaces: []
  namespaceSelector: ""
  labelSelector: ""
  ignoreEmptyService: false
  noEndpoints: false
  fallthrough: [in-addr.arpa, ip6.arpa]
  startupTimeout: 5s
istio:
  enabled: false                   # answer Istio ServiceEntry hosts
  ttl: 30
manifests:
  files: []                        # Kubernetes YAML served as a cluster
  interval: 2s                     # how often the files are checked for changes
forward:
  upstreams: [/etc/resolv.conf]    # not available yet: other names get REFUSED
cache:
  enabled: true
  maxTTL: 30
autopath:
  enabled: false                   # not available yet
cluster:
  nodeName: ""                     # default: hostname
  bind: "0.0.0.0:7946"
  advertise: ""
  remote: "0.0.0.0:8090"
  join: []
  joinService: ""
  replicationFactor: 2             # 0: every node owns every zone
log:
  level: info                      # debug | info | warn | error
  format: text                     # text | json
`

func FuzzParse(f *testing.F) {
	for _, s := range []string{
		seedLocal,
		seedDocs,
		"",
		"kubernetes: {enabled: false}\n",
		"kubernetes: {enabled: false, ttl: 0, zones: [\".\"], reverseZones: [\"10.in-addr.arpa.\"]}\n",
		"kubernetes: {enabled: false, ttl: 3600, pods: disabled}\ndns: {listen: [\"[::1]:53\", \":5353\"]}\nhttp: {listen: \"\"}\n",
		"kubernetes: {enabled: false}\nlog: {level: debug, format: json}\nmanifests: {files: [a.yaml, /b.yaml], interval: 250ms}\n",
		// Broken ones.
		"kubernetes: {enabled: false, ttl: 3601}\n",
		"kubernetes: {enabled: false, ttl: null}\n",
		"kubernetes: {enabled: false}\ndns: {listen: []}\n",
		"kubernetes: {enabled: false}\ndns: {listen: [\"localhost\"]}\n",
		"kubernetes: {enabled: false}\ndns: {tcpIdleTimeout: -1s}\n",
		"kubernetes: {enabled: false}\nmanifests: {interval: soon}\n",
		"kubernetes: {enabled: false}\ncluster: {replicationFactor: null}\n",
		"kubernetes: {enabled: false}\nkubernetes: {enabled: true}\n",
		"kubernetes: {enabled: false, zones: [\"a..b\"]}\n",
		"kubernetes: [\n",
		"- 1\n- 2\n",
		"a: &a [*a, *a]\n",
		"kubernetes: {enabled: true, pods: verified, kubeconfig: /k}\n",
		"kubernetes: {enabled: true, kubeconfig: /k, context: staging}\n",
		"kubernetes: {enabled: true, context: staging}\n",
		"kubernetes: {enabled: false, pods: verified}\n",
		"mode: nodelocal\n",
		"forward: {upstreams: [\"10.0.0.53\", \"[fd00::53]:5353\", /etc/resolv.conf], policy: sequential, timeout: 1s}\n" +
			"cache: {enabled: false, maxTTL: 0, serveStale: 1h}\nloadbalance: {enabled: false}\nlog: {queries: true}\n",
		"kubernetes: {enabled: true, pods: verified}\nautopath: {enabled: true}\n",
		"autopath: {enabled: true}\n",
		"forward: {upstreams: [\"not an address\"], policy: fastest}\n",
		"\t\x00\xff",
		// Reproducers of the validation gaps above.
		"dns: {listen: [\"127.0.0.1:http\"]}\nhttp: {listen: \"127.0.0.1:99999\"}\n",
		"kubernetes: {zones: ['x\\']}\n",
		"kubernetes: {zones: [\".\"]}\n",
		"kubernetes: {reverseZones: [xin-addr.arpa]}\n",
		// Keys match case-insensitively, and the last spelling wins.
		"Kubernetes: {ttl: 5, TTL: 7}\n",
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		cfg, err := Parse(data)
		if err != nil {
			if cfg != nil {
				t.Fatalf("error %v with a config", err)
			}
			return
		}
		checkConfig(t, cfg)

		// What Parse accepts, written back, parses to the same config.
		out, err := yaml.Marshal(cfg)
		if err != nil {
			t.Fatalf("accepted config does not marshal: %v", err)
		}
		again, err := Parse(out)
		if err != nil {
			t.Fatalf("accepted config, written back, is rejected: %v\n%s", err, out)
		}
		if !reflect.DeepEqual(cfg, again) {
			t.Fatalf("config changes through a round trip:\n%+v\n%+v", cfg, again)
		}
	})
}

// checkConfig holds the invariants of every accepted config.
func checkConfig(t *testing.T, cfg *Config) {
	t.Helper()
	if err := cfg.validate(); err != nil {
		t.Fatalf("accepted config does not re-validate: %v", err)
	}
	k := cfg.Kubernetes
	if k.TTL == nil || *k.TTL < 0 || *k.TTL > 3600 {
		t.Fatalf("ttl %v accepted", k.TTL)
	}
	if len(cfg.DNS.Listen) == 0 {
		t.Fatal("no dns.listen accepted")
	}
	if len(k.Zones) == 0 {
		t.Fatal("no kubernetes.zones accepted")
	}
	if k.Pods == "verified" && !k.Enabled {
		t.Fatal("pods: verified accepted without the Kubernetes API source")
	}
	if k.Context != "" && k.Kubeconfig == "" {
		t.Fatal("kubernetes.context accepted without kubernetes.kubeconfig")
	}
	if cfg.DNS.TCPIdleTimeout <= 0 || cfg.DNS.TCPMaxConnections <= 0 || cfg.Manifests.Interval <= 0 {
		t.Fatalf("non-positive dns or manifests setting accepted: %+v %+v", cfg.DNS, cfg.Manifests)
	}
	if cfg.Cluster.ReplicationFactor == nil || *cfg.Cluster.ReplicationFactor < 0 {
		t.Fatalf("replicationFactor %v accepted", cfg.Cluster.ReplicationFactor)
	}
	listens := append([]string(nil), cfg.DNS.Listen...)
	if cfg.HTTP.Listen != "" {
		listens = append(listens, cfg.HTTP.Listen)
	}
	for _, a := range listens {
		host, port, err := net.SplitHostPort(a)
		if err != nil || (host != "" && net.ParseIP(host) == nil) {
			t.Fatalf("listen address %q accepted", a)
		}
		if n, err := strconv.ParseUint(port, 10, 16); checkListenPorts && (err != nil || n > 65535) {
			t.Fatalf("listen port %q accepted", port)
		}
	}
	for _, z := range append(append([]string(nil), k.Zones...), k.ReverseZones...) {
		// The root alone is a cluster domain: a Corefile's kubernetes
		// plugin in a "." block serves names under it.
		if !ValidDomain(z) && !(z == "." && len(k.Zones) == 1 && k.Zones[0] == ".") {
			t.Fatalf("zone %q accepted", z)
		}
	}

	for _, z := range k.ReverseZones {
		n := zone.Fqdn(z)
		under := n == "in-addr.arpa." || n == "ip6.arpa." ||
			strings.HasSuffix(n, ".in-addr.arpa.") || strings.HasSuffix(n, ".ip6.arpa.")
		if checkReverseZones && !under {
			t.Fatalf("reverse zone %q accepted, but it is not under in-addr.arpa or ip6.arpa", z)
		}
	}

	// The answer configuration that a node derives (as node.answerConfig
	// does) builds, and the zones' records pack.
	zc := &zone.Config{TTL: uint32(*k.TTL)}
	for _, z := range k.Zones {
		zc.Domains.Cluster = append(zc.Domains.Cluster, zone.Fqdn(z))
	}
	for _, z := range k.ReverseZones {
		zc.Domains.Reverse = append(zc.Domains.Reverse, zone.Fqdn(z))
	}
	zc.Prepare()
	for _, z := range append(append([]string(nil), zc.Domains.Cluster...), zc.Domains.Reverse...) {
		if r := zc.Domains.Route(z); r.Kind == zone.RouteExternal {
			t.Fatalf("zone %q routes outside itself", z)
		}
		m := new(dns.Msg)
		m.SetQuestion(z, dns.TypeSOA)
		m.Answer = zc.SOA(z, 1)
		check := checkZoneNames
		if z == "." {
			check = checkRootZone
		}
		if _, err := m.Pack(); err != nil && check {
			t.Fatalf("zone %q accepted, but its SOA does not pack: %v", z, err)
		}
	}
}
