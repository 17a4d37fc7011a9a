package corefile

import (
	"os"
	"reflect"
	"slices"
	"strings"
	"testing"

	"github.com/shardns/shardns/config"
)

// Each case is a small Corefile, what its configuration must hold, and
// the findings it must produce (FILE:LINE: text, as the command prints).
func TestConvertPlugins(t *testing.T) {
	cases := []convertCase[*config.Config]{
		{
			name: "unknown plugin reported with its line",
			src:  ".:53 {\n  errors\n  dnssec\n}\n",
			want: []string{`Corefile:3: plugin "dnssec" has no shardns equivalent`},
		},
		{
			name: "environment reference left for the user",
			src:  ".:53 {\n  forward . {$UPSTREAM}\n}\n",
			check: func(t *testing.T, cfg *config.Config) {
				if len(cfg.Forward.Upstreams) != 0 {
					t.Errorf("upstreams %q, want none", cfg.Forward.Upstreams)
				}
			},
			want: []string{`Corefile:2: plugin "forward" uses the environment variable {$UPSTREAM}, which CoreDNS reads from its own environment: write the value, or run convert with --expand-env`},
		},
		{
			name: "plugins that differ between blocks",
			src:  ".:53 {\n  cache 30\n  health\n}\nexample.org:53 {\n  cache 300\n  health :9090\n}\n",
			check: func(t *testing.T, cfg *config.Config) {
				if cfg.Cache.MaxTTL != 30 || cfg.HTTP.Listen != "0.0.0.0:8080" {
					t.Errorf("cache.maxTTL %d, http.listen %s: want the main block's", cfg.Cache.MaxTTL, cfg.HTTP.Listen)
				}
				if len(cfg.Servers) != 1 || cfg.Servers[0].Chain == nil || cfg.Servers[0].Chain.Cache.MaxTTL != 300 {
					t.Errorf("servers %+v: want example.org's chain with its own cache of 300 s", cfg.Servers)
				}
			},
			want: []string{
				"Corefile:7: health differs from line 3: shardns has one health endpoint for every server block",
			},
		},
		{
			name: "bind gives listeners; another address is a listener of its own",
			src:  ".:53 {\n  bind 127.0.0.1 ::1\n}\nexample.org:53 {\n  bind 127.0.0.2\n  file db.example.org\n}\nexample.net {\n  bind 127.0.0.1 ::1\n}\n",
			check: func(t *testing.T, cfg *config.Config) {
				if !reflect.DeepEqual(cfg.DNS.Listen, []string{"127.0.0.1:53", "[::1]:53"}) {
					t.Errorf("dns.listen %q", cfg.DNS.Listen)
				}
				if len(cfg.Servers) != 1 || !reflect.DeepEqual(cfg.Servers[0].Listen, []string{"127.0.0.2:53"}) ||
					!reflect.DeepEqual(cfg.Servers[0].Zones, []string{"example.org"}) {
					t.Errorf("servers %+v, want one on 127.0.0.2:53 for example.org", cfg.Servers)
				}
			},
		},
		{
			name: "keys on two ports: one listener each, the plugins once for all zones",
			src:  ".:53 {\n  forward . 10.0.0.53\n}\na.example:53 b.example:1053 c.example:1053 {\n  file db.shared\n}\n",
			check: func(t *testing.T, cfg *config.Config) {
				var origins []string
				for _, z := range cfg.Files.Zones {
					origins = append(origins, z.Origin)
				}
				if !reflect.DeepEqual(origins, []string{"a.example", "b.example", "c.example"}) {
					t.Errorf("file origins %q", origins)
				}
				if len(cfg.Servers) != 1 || !reflect.DeepEqual(cfg.Servers[0].Zones, []string{"b.example", "c.example"}) {
					t.Errorf("servers %+v, want one on 1053 for b and c", cfg.Servers)
				}
			},
		},
		{
			name: "whoami on the main listener",
			src:  ".:53 {\n  whoami\n}\n",
			want: []string{"Corefile:2: whoami on dns.listen has no shardns equivalent; give its server block a port of its own"},
		},
		{
			name: "autopath without verified pods",
			src:  ".:53 {\n  kubernetes cluster.local {\n    pods insecure\n  }\n  autopath @kubernetes\n}\n",
			check: func(t *testing.T, cfg *config.Config) {
				if cfg.Autopath.Enabled {
					t.Error("autopath enabled without pods verified")
				}
			},
			want: []string{"Corefile:5: autopath needs the kubernetes plugin with pods verified, to know each client's namespace"},
		},
		{
			name: "root, file transfer in both syntaxes, reload",
			src: "example.org {\n  root /etc/coredns/zones\n  file db.example.org {\n    transfer to * 10.0.0.1:53\n    reload 30s\n  }\n}\n" +
				"example.com {\n  file /srv/db.example.com\n  transfer {\n    to 192.0.2.0/24 2001:db8::1\n  }\n}\n",
			check: func(t *testing.T, cfg *config.Config) {
				want := []config.FileZoneConfig{
					{File: "/etc/coredns/zones/db.example.org", Origin: "example.org", TransferTo: []string{"*", "10.0.0.1"}},
					{File: "/srv/db.example.com", Origin: "example.com", TransferTo: []string{"192.0.2.0/24", "2001:db8::1"}},
				}
				if !reflect.DeepEqual(cfg.Files.Zones, want) {
					t.Errorf("files.zones %+v\nwant %+v", cfg.Files.Zones, want)
				}
				if cfg.Files.Interval.D().String() != "30s" {
					t.Errorf("files.interval %v", cfg.Files.Interval.D())
				}
			},
		},
		{
			name: "file zone inside a kubernetes zone",
			src:  ".:53 {\n  kubernetes cluster.local 10.0.0.0/8\n  file db.10 10.in-addr.arpa\n  file db.example example.org\n}\n",
			check: func(t *testing.T, cfg *config.Config) {
				if len(cfg.Files.Zones) != 1 || cfg.Files.Zones[0].Origin != "example.org" {
					t.Errorf("files.zones %+v, want example.org only", cfg.Files.Zones)
				}
			},
			want: []string{"Corefile:3: file zone 10.in-addr.arpa shares names with the kubernetes zone 10.in-addr.arpa: shardns answers those from the cluster's records only"},
		},
		{
			name: "stub inside a kubernetes zone without fallthrough",
			src:  "cluster.local:53 {\n  kubernetes\n  forward . 10.0.0.1\n}\n",
			check: func(t *testing.T, cfg *config.Config) {
				if len(cfg.Forward.Stubs) != 0 {
					t.Errorf("stubs %+v, want none", cfg.Forward.Stubs)
				}
			},
			want: []string{"Corefile:3: note: forward for cluster.local is left out: the kubernetes plugin answers every name there (it comes before forward in CoreDNS too) and no fallthrough reaches it"},
		},
		{
			name: "a server block for a subzone of the cluster",
			src:  ".:53 {\n  kubernetes cluster.local\n}\nsub.cluster.local:53 {\n  forward . 10.0.0.1\n}\n",
			check: func(t *testing.T, cfg *config.Config) {
				// Its own chain, without the cluster: CoreDNS sends these
				// names to this block, which forwards them.
				if len(cfg.Servers) != 1 || cfg.Servers[0].Chain == nil || cfg.Servers[0].Chain.AnswersCluster() ||
					len(cfg.Servers[0].Chain.Forward.Stubs) != 1 || cfg.Servers[0].Chain.Forward.Stubs[0].Zones[0] != "sub.cluster.local" {
					t.Errorf("servers %+v: want sub.cluster.local's chain forwarding it, without the cluster", cfg.Servers)
				}
			},
		},
		{
			name: "a second transport on the main address",
			src:  ".:53 {\n  forward . 10.0.0.1\n}\ntls://example.org:53 {\n  tls c.pem k.pem\n}\n",
			check: func(t *testing.T, cfg *config.Config) {
				if len(cfg.Servers) != 0 {
					t.Errorf("servers %+v, want none", cfg.Servers)
				}
			},
			want: []string{`Corefile:4: server block "tls://example.org:53": 0.0.0.0:53 is also dns.listen; shardns cannot split one address between listeners this way, so its plugins are not converted`},
		},
		{
			name: "file reload 0 and transfer from",
			src:  "example.org {\n  file db {\n    reload 0\n    transfer from 10.0.0.1\n  }\n}\n",
			want: []string{
				"Corefile:3: reload 0: shardns re-reads changed zone files (files.interval)",
				"Corefile:4: transfer from 10.0.0.1: shardns transfers its zones out (transfer to), never in",
			},
		},
		{
			name: "log class error logs the failed queries",
			src:  ".:53 {\n  log . {\n    class error\n  }\n}\n",
			check: func(t *testing.T, cfg *config.Config) {
				want := config.LogConfig{Level: "info", Format: "text", Queries: true, QueryClasses: []string{"error"}}
				if !reflect.DeepEqual(cfg.Log, want) {
					t.Errorf("log %+v, want %+v", cfg.Log, want)
				}
			},
		},
		{
			name: "OpenShift's debug log: class denial error",
			src:  ".:5353 {\n  errors\n  log . {\n    class denial error\n  }\n}\n",
			check: func(t *testing.T, cfg *config.Config) {
				want := config.LogConfig{Level: "info", Format: "text", Queries: true, Errors: true, QueryClasses: []string{"denial", "error"}}
				if !reflect.DeepEqual(cfg.Log, want) {
					t.Errorf("log %+v, want %+v", cfg.Log, want)
				}
			},
		},
		{
			name: "log names, a format and classes OR-ed over lines",
			src:  ".:53 {\n  log Example.org example.net. \"{name} {rcode}\" {\n    class denial\n    class success denial\n  }\n}\n",
			check: func(t *testing.T, cfg *config.Config) {
				want := config.LogConfig{Level: "info", Format: "text", Queries: true, QueryNames: []string{"example.org.", "example.net."},
					QueryClasses: []string{"denial", "success"}, QueryFormat: "{name} {rcode}"}
				if !reflect.DeepEqual(cfg.Log, want) {
					t.Errorf("log %+v, want %+v", cfg.Log, want)
				}
			},
		},
		{
			name: "log . {combined} with class all: every query of every name",
			src:  ".:53 {\n  log . {combined} {\n    class all error\n  }\n}\n",
			check: func(t *testing.T, cfg *config.Config) {
				want := config.LogConfig{Level: "info", Format: "text", Queries: true, QueryFormat: "{combined}"}
				if !reflect.DeepEqual(cfg.Log, want) {
					t.Errorf("log %+v, want %+v", cfg.Log, want)
				}
			},
		},
		{
			name: "log with a class CoreDNS refuses",
			src:  ".:53 {\n  log . {\n    class nodata\n  }\n}\n",
			check: func(t *testing.T, cfg *config.Config) {
				if cfg.Log.Queries || cfg.Log.QueryFormat != "" || cfg.Log.QueryClasses != nil {
					t.Errorf("log %+v, want no query log", cfg.Log)
				}
			},
			want: []string{"Corefile:3: log class nodata: not a class (all, success, denial, error)"},
		},
		{
			name: "log of a name that is not one",
			src:  ".:53 {\n  log Example.ORG a..b {combined}\n}\n",
			check: func(t *testing.T, cfg *config.Config) {
				if cfg.Log.Queries || cfg.Log.QueryFormat != "" || cfg.Log.QueryNames != nil {
					t.Errorf("log %+v, want no query log", cfg.Log)
				}
			},
			want: []string{"Corefile:2: log name a..b: not a domain name"},
		},
		{
			name: "log names are fully qualified and lower-cased",
			src:  ".:53 {\n  log Example.ORG svc.cluster.local.\n}\n",
			check: func(t *testing.T, cfg *config.Config) {
				if want := []string{"example.org.", "svc.cluster.local."}; !cfg.Log.Queries || !reflect.DeepEqual(cfg.Log.QueryNames, want) {
					t.Errorf("log %+v, want queries of %v", cfg.Log, want)
				}
			},
		},
		{
			name: "kubernetes defaults are CoreDNS's",
			src:  ".:53 {\n  kubernetes example.cluster 10.0.0.0/16 {\n    kubeconfig /etc/k.conf\n    fallthrough\n    ttl 4000\n  }\n}\n",
			check: func(t *testing.T, cfg *config.Config) {
				k := cfg.Kubernetes
				if k.Pods != "disabled" || k.Kubeconfig != "/etc/k.conf" || k.Context != "" || *k.TTL != 5 ||
					!reflect.DeepEqual(k.Zones, []string{"example.cluster"}) ||
					!reflect.DeepEqual(k.ReverseZones, []string{"0.10.in-addr.arpa"}) ||
					!reflect.DeepEqual(k.Fallthrough, []string{"example.cluster", "0.10.in-addr.arpa"}) {
					t.Errorf("kubernetes %+v", k)
				}
			},
			want: []string{"Corefile:5: ttl 4000: must be 0 to 3600 seconds"},
		},
		{
			name: "kubeconfig with a context",
			src:  ".:53 {\n  kubernetes cluster.local {\n    kubeconfig /etc/k.conf staging\n  }\n}\n",
			check: func(t *testing.T, cfg *config.Config) {
				if k := cfg.Kubernetes; k.Kubeconfig != "/etc/k.conf" || k.Context != "staging" {
					t.Errorf("kubeconfig %q context %q, want /etc/k.conf staging", k.Kubeconfig, k.Context)
				}
			},
		},
		{
			name: "kubeconfig with more than a context",
			src:  ".:53 {\n  kubernetes cluster.local {\n    kubeconfig /etc/k.conf staging extra\n  }\n}\n",
			check: func(t *testing.T, cfg *config.Config) {
				if k := cfg.Kubernetes; k.Kubeconfig != "" || k.Context != "" {
					t.Errorf("kubeconfig %q context %q, want neither", k.Kubeconfig, k.Context)
				}
			},
			want: []string{"Corefile:3: kubeconfig /etc/k.conf staging extra: takes a file and at most one context"},
		},
		{
			name: "proxy policies",
			src:  ".:53 {\n  proxy . 10.0.0.1 10.0.0.2 {\n    policy first\n  }\n}\nx.example {\n  proxy . 10.0.0.3 {\n    policy least_conn\n    health_check /health:8080\n  }\n}\n",
			check: func(t *testing.T, cfg *config.Config) {
				if cfg.Forward.Policy != "sequential" {
					t.Errorf("forward.policy %s", cfg.Forward.Policy)
				}
			},
			want: []string{
				"Corefile:8: policy least_conn: shardns has random, round_robin and first (sequential)",
				`Corefile:9: proxy option "health_check" has no shardns equivalent`,
			},
		},
		{
			name: "stub options that only the root forwarder has",
			src:  ".:53 {\n  forward . 10.0.0.1\n}\nx.example {\n  forward . 10.0.0.3 {\n    max_fails 5\n  }\n}\nx.example:1053 {\n  forward . 10.0.0.4\n}\n",
			want: []string{
				"Corefile:5: max_fails for stub domain x.example: one max_fails for every upstream (forward.*)",
				"Corefile:10: forward differs from line 5: shardns has one forwarder per zone for every server block",
			},
		},
		{
			name: "hosts with no file and fallthrough to every name",
			src:  ".:53 {\n  hosts {\n    10.0.0.1 a.example\n    fallthrough .\n    badoption x\n  }\n}\n",
			check: func(t *testing.T, cfg *config.Config) {
				h := cfg.Hosts
				if !reflect.DeepEqual(h.Files, []string{"/etc/hosts"}) || h.Zones != nil ||
					!reflect.DeepEqual(h.Fallthrough, []string{"."}) || !reflect.DeepEqual(h.Entries, []string{"10.0.0.1 a.example"}) {
					t.Errorf("hosts %+v", h)
				}
			},
			want: []string{`Corefile:5: hosts option "badoption" has no shardns equivalent`},
		},
		{
			name: "DNS over HTTPS",
			src:  ".:53 {\n}\nhttps://example.org {\n  tls cert.pem key.pem\n}\n",
			check: func(t *testing.T, cfg *config.Config) {
				want := []config.ServerConfig{{Listen: []string{"0.0.0.0:443"}, Transport: "https",
					Zones: []string{"example.org"}, TLS: config.TLSConfig{CertFile: "cert.pem", KeyFile: "key.pem"}}}
				if !reflect.DeepEqual(cfg.Servers, want) {
					t.Errorf("servers %+v", cfg.Servers)
				}
			},
		},
		{
			name: "rewrite's block form, as AKS documents it",
			src: ".:53 {\n  rewrite stop {\n    name regex (.*)\\.example\\.com {1}.default.svc.cluster.local\n" +
				"    answer name (.*)\\.default\\.svc\\.cluster\\.local {1}.example.com\n  }\n" +
				"  rewrite continue {\n    ttl regex (.*)\\.coredns\\.rocks 15\n  }\n" +
				"  rewrite stop {\n    name suffix .arpa .arpa\n    answer name auto\n  }\n" +
				"  rewrite name a.example.org b.example.org {\n  }\n}\n",
			check: func(t *testing.T, cfg *config.Config) {
				want := []config.RewriteRule{
					{Field: "name", Match: "regex", From: `(.*)\.example\.com`, To: "{1}.default.svc.cluster.local",
						AnswerName: []config.RewriteAnswer{{From: `(.*)\.default\.svc\.cluster\.local`, To: "{1}.example.com"}}},
					{Field: "ttl", Match: "regex", From: `(.*)\.coredns\.rocks`, TTL: "15", Continue: true},
					{Field: "name", Match: "suffix", From: ".arpa", To: ".arpa"},
				}
				if !reflect.DeepEqual(cfg.Rewrite, want) {
					t.Errorf("rewrite %+v\nwant %+v", cfg.Rewrite, want)
				}
			},
			want: []string{
				"Corefile:13: rewrite name a.example.org b.example.org with a block: CoreDNS takes the rule inside the block",
			},
		},
		{
			name: "rewrite's answer name and value, as Gardener's search-path rewrite writes them",
			src: ".:53 {\n  rewrite stop {\n" +
				"    name regex (^(?:[^\\.]+\\.)+)svc\\.cluster\\.local\\.svc\\.cluster\\.local {1}svc.cluster.local\n" +
				"    answer name (^(?:[^\\.]+\\.)+)svc\\.cluster\\.local {1}svc.cluster.local.svc.cluster.local\n" +
				"    answer value (^(?:[^\\.]+\\.)+)svc\\.cluster\\.local {1}svc.cluster.local.svc.cluster.local\n  }\n" +
				"  rewrite name regex (a)\\.x b.y answer value (c)\\.y {2}.x\n" +
				"  rewrite name regex (a)\\.x b.y answer name ( x\n}\n",
			check: func(t *testing.T, cfg *config.Config) {
				back := []config.RewriteAnswer{{From: `(^(?:[^\.]+\.)+)svc\.cluster\.local`, To: "{1}svc.cluster.local.svc.cluster.local"}}
				want := []config.RewriteRule{{Field: "name", Match: "regex",
					From: `(^(?:[^\.]+\.)+)svc\.cluster\.local\.svc\.cluster\.local`, To: "{1}svc.cluster.local",
					AnswerName: back, AnswerValue: back}}
				if !reflect.DeepEqual(cfg.Rewrite, want) {
					t.Errorf("rewrite %+v\nwant %+v", cfg.Rewrite, want)
				}
			},
			want: []string{
				`Corefile:7: rewrite answer value (c)\.y {2}.x: uses group {2}, the pattern has 1`,
				"Corefile:8: rewrite answer name (: error parsing regexp: missing closing ): `(`",
			},
		},
		{
			name: "acl lists in order, zones from the block",
			src: ".:53 {\n  acl {\n    allow net 192.168.1.0/24\n    block net 192.168.0.0/16\n  }\n}\n" +
				"example.org {\n  acl a.example.org {\n    filter type A AAAA net 10.0.0.1 ::1\n    drop\n  }\n  acl {\n    block type MX\n  }\n}\n",
			check: func(t *testing.T, cfg *config.Config) {
				want := []config.ACLConfig{
					{Policies: []config.ACLPolicy{{Action: "allow", Nets: []string{"192.168.1.0/24"}}, {Action: "block", Nets: []string{"192.168.0.0/16"}}}},
				}
				if !reflect.DeepEqual(cfg.ACL, want) {
					t.Errorf("acl %+v\nwant %+v", cfg.ACL, want)
				}
				// example.org's lists are its chain's: the root block's
				// do not apply to its names, as in CoreDNS.
				want = []config.ACLConfig{
					{Zones: []string{"a.example.org"}, Policies: []config.ACLPolicy{
						{Action: "filter", Types: []string{"A", "AAAA"}, Nets: []string{"10.0.0.1", "::1"}}, {Action: "drop"}}},
					{Zones: []string{"example.org"}, Policies: []config.ACLPolicy{{Action: "block", Types: []string{"MX"}}}},
				}
				if len(cfg.Servers) != 1 || cfg.Servers[0].Chain == nil || !reflect.DeepEqual(cfg.Servers[0].Chain.ACL, want) {
					t.Errorf("servers %+v: want example.org's chain with acl %+v", cfg.Servers, want)
				}
			},
		},
		{
			name: "acl lines CoreDNS refuses",
			src:  ".:53 {\n  acl {\n    deny net 10.0.0.0/8\n  }\n  acl {\n    block type A net\n  }\n  acl {\n    block net 10.0.0.0/33\n  }\n  acl {\n    block type NOPE\n  }\n}\n",
			want: []string{
				`Corefile:3: acl: unexpected "deny"; want allow, block, filter or drop`,
				`Corefile:6: acl: no value after "net"`,
				`Corefile:9: acl: "10.0.0.0/33" is not a CIDR`,
				`Corefile:12: acl: "NOPE" is not a DNS type`,
			},
		},
		{
			name: "import of an unknown snippet",
			src:  ".:53 {\n  import nothere\n}\n",
			want: []string{"Corefile:2: import nothere: other files and unknown snippets are not read; paste their content into the Corefile"},
		},
		{
			name: "an empty root block says what it turns off",
			src:  ". {\n}\n",
			want: []string{
				"Corefile: note: no errors plugin: log.errors: false",
				"Corefile: note: no cache plugin: cache.enabled: false",
				"Corefile: note: no loadbalance plugin: loadbalance.enabled: false",
				"Corefile: note: no kubernetes plugin: kubernetes.enabled: false, kubernetes.zones: [], kubernetes.reverseZones: []",
				"Corefile: note: no forward plugin for the root zone: forward.upstreams: [] (names outside every zone get REFUSED)",
				"Corefile: note: no health lameduck: http.lameduck: 0s (on SIGTERM the listeners close at once)",
				`Corefile: note: no health, ready or prometheus plugin: http.listen: "" (no HTTP endpoint)`,
			},
		},
	}
	runConvertCases(t, cases, wholeConfig)
}

// The findings of a kubeadm Corefile are notes only, so convert succeeds
// without --allow-unmapped; the file example has one unmapped line.
func TestUnmappedCount(t *testing.T) {
	for file, want := range map[string]int{"kubeadm": 0, "kubeadm-cache-disable": 0, "istio-stub": 0, "coredns-manual-zones": 0, "seeds": 0} {
		src := string(mustRead(t, "testdata/"+file+".Corefile"))
		if got := convert(t, src).Unmapped(); got != want {
			t.Errorf("%s: %d unmapped findings, want %d", file, got, want)
		}
	}
}

func TestConvertErrors(t *testing.T) {
	for src, want := range map[string]string{
		"# only a comment\n":            "Corefile: no server blocks",
		".:53 {\n}\nfoo://x.org {\n}\n": `Corefile:3: "foo://x.org": unknown scheme "foo"`,
	} {
		cf, err := Parse("Corefile", []byte(src), Options{})
		if err != nil {
			t.Fatal(err)
		}
		if _, err := Convert(cf); err == nil || err.Error() != want {
			t.Errorf("%q: error %v, want %s", src, err, want)
		}
	}
}

// The YAML holds only what differs from the defaults, top-level keys in
// the documentation's order.
func TestYAMLOnlyDifferences(t *testing.T) {
	out, err := convert(t, ".:53 {\n  errors\n  health {\n    lameduck 5s\n  }\n  kubernetes cluster.local in-addr.arpa ip6.arpa {\n    pods insecure\n    fallthrough in-addr.arpa ip6.arpa\n  }\n  forward . /etc/resolv.conf {\n    max_concurrent 1000\n  }\n  cache 30\n  loadbalance\n  chaos\n}\n").YAML()
	if err != nil {
		t.Fatal(err)
	}
	var keys []string
	for _, l := range strings.Split(string(out), "\n") {
		if l != "" && !strings.HasPrefix(l, "#") && !strings.HasPrefix(l, " ") && !strings.HasPrefix(l, "-") {
			keys = append(keys, l)
		}
	}
	if want := []string{"dns:", "http:", "chaos:"}; !slices.Equal(keys, want) {
		t.Errorf("top-level keys %q, want %q\n%s", keys, want, out)
	}
}

func mustRead(t *testing.T, path string) []byte {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return b
}
