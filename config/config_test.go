package config

import (
	"strings"
	"testing"
	"time"
)

func TestParseDefaults(t *testing.T) {
	cfg, err := Parse([]byte("kubernetes: {enabled: false}\n"))
	if err != nil {
		t.Fatal(err)
	}
	if *cfg.Kubernetes.TTL != 5 || cfg.DNS.Listen[0] != "127.0.0.1:5353" || cfg.Kubernetes.Pods != "insecure" ||
		cfg.Kubernetes.Zones[0] != "cluster.local" || *cfg.Cluster.ReplicationFactor != 2 ||
		cfg.Cluster.QuestionTimeout.D() != 600*time.Millisecond {
		t.Fatalf("defaults not applied: %+v", cfg)
	}
}

func TestParseIstio(t *testing.T) {
	cfg, err := Parse([]byte("kubernetes: {enabled: false}\nistio: {enabled: true}\n"))
	if err != nil {
		t.Fatal(err)
	}
	if !cfg.Istio.Enabled || cfg.Istio.TTL != 30 {
		t.Fatalf("istio = %+v, want enabled with TTL 30", cfg.Istio)
	}
}

func TestParseKubeconfigContext(t *testing.T) {
	cases := []struct {
		name, yaml          string
		kubeconfig, context string
	}{
		{"current context", "kubernetes: {kubeconfig: /etc/k.conf}\n", "/etc/k.conf", ""},
		{"named context", "kubernetes: {kubeconfig: /etc/k.conf, context: staging}\n", "/etc/k.conf", "staging"},
		{"in-cluster", "kubernetes: {enabled: true}\n", "", ""},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			cfg, err := Parse([]byte(c.yaml))
			if err != nil {
				t.Fatal(err)
			}
			if k := cfg.Kubernetes; k.Kubeconfig != c.kubeconfig || k.Context != c.context {
				t.Fatalf("kubeconfig %q context %q, want %q %q", k.Kubeconfig, k.Context, c.kubeconfig, c.context)
			}
		})
	}
}

// A node-local process may say pods: verified without watching the API:
// it routes pod names to the replicas that do.
func TestParseExternal(t *testing.T) {
	cfg, err := Parse([]byte("kubernetes: {enabled: false, external: {zones: [example.org], headless: true}}\n"))
	if err != nil {
		t.Fatal(err)
	}
	e := cfg.Kubernetes.External
	if e.ApexLabel() != "dns" || e.TTLSeconds() != 5 || !e.Headless {
		t.Errorf("apex %q, ttl %d, headless %v: want k8s_external's defaults dns and 5, and headless", e.ApexLabel(), e.TTLSeconds(), e.Headless)
	}
}

func TestParseMulticluster(t *testing.T) {
	cfg, err := Parse([]byte("kubernetes: {multicluster: [clusterset.local]}\n"))
	if err != nil {
		t.Fatal(err)
	}
	if got := cfg.Kubernetes.Multicluster; len(got) != 1 || got[0] != "clusterset.local" {
		t.Errorf("multicluster = %v, want [clusterset.local]", got)
	}
}

func TestParseNodeLocal(t *testing.T) {
	cfg, err := Parse([]byte("mode: nodelocal\ncluster: {replicas: [\"10.0.0.5:8090\"], credentialFile: /etc/shardns/nodelocal.cred}\nkubernetes: {enabled: false, pods: verified}\n"))
	if err != nil {
		t.Fatal(err)
	}
	if cfg.Mode != ModeNodeLocal {
		t.Fatalf("mode = %q", cfg.Mode)
	}
}

// A node-local process learns its clients from its node's pods: autopath
// and the AAAA policy need no pods: verified anywhere.
func TestParseNodeLocalClients(t *testing.T) {
	cases := []struct {
		yaml    string
		watches bool
	}{
		{"", false},
		{"autopath: {enabled: true}\nkubernetes: {pods: disabled}\n", true},
		{"nodeLocal: {aaaa: nodata, nodeName: node-a}\nkubernetes: {pods: insecure}\n", true},
		{"nodeLocal: {aaaa: answer}\n", false},
	}
	for _, tc := range cases {
		cfg, err := Parse([]byte("mode: nodelocal\ncluster: {replicas: [\"10.0.0.5:8090\"], credentialFile: /c}\n" + tc.yaml))
		if err != nil {
			t.Fatalf("%q: %v", tc.yaml, err)
		}
		if cfg.WatchesClients() != tc.watches {
			t.Errorf("%q: WatchesClients() = %v, want %v", tc.yaml, cfg.WatchesClients(), tc.watches)
		}
	}
}

// Every error names the key a user has to fix.
func TestParseRejects(t *testing.T) {
	cases := []struct {
		name, yaml, key string
	}{
		{"unknown top-level key", "kubernetes: {enabled: false}\nfoo: 1\n", `"foo"`},
		{"gossip beyond loopback without a key", "kubernetes: {enabled: false}\ncluster: {join: [\"10.0.0.1\"], remote: \"127.0.0.1:8090\"}\n", "cluster.bind"},
		{"remote beyond loopback without a key", "kubernetes: {enabled: false}\ncluster: {enabled: true, bind: \"127.0.0.1:7946\"}\n", "cluster.remote"},
		{"both key sources", "kubernetes: {enabled: false}\ncluster: {enabled: true, secret: a/b, secretKeyFile: /k}\n", "cluster.secret"},
		{"secret not namespaced", "kubernetes: {enabled: false}\ncluster: {enabled: true, secret: gossip}\n", "cluster.secret"},
		{"admitted service not namespaced", "kubernetes: {enabled: false}\ncluster: {enabled: true, secret: a/b, admitServices: [x]}\n", "cluster.admitServices"},
		{"node-local joining gossip", "mode: nodelocal\nkubernetes: {enabled: false}\ncluster: {join: [\"10.0.0.5:7946\"], credentialFile: /c}\n", "cluster.join"},
		{"node-local asking no one", "mode: nodelocal\nkubernetes: {enabled: false}\ncluster: {credentialFile: /c}\n", "cluster.replicas"},
		{"node-local holding the replicas' key", "mode: nodelocal\nkubernetes: {enabled: false}\ncluster: {replicas: [\"10.0.0.5:8090\"], secretKeyFile: /k, credentialFile: /c}\n", "must not hold the replicas' key"},
		{"node-local beyond loopback without a credential", "mode: nodelocal\nkubernetes: {enabled: false}\ncluster: {replicas: [\"10.0.0.5:8090\"]}\n", "cluster.remote"},
		{"node-local replica address", "mode: nodelocal\nkubernetes: {enabled: false}\ncluster: {replicas: [\"10.0.0.5\"], credentialFile: /c}\n", "cluster.replicas[0]"},
		{"a replica with a node-local's keys", "kubernetes: {enabled: false}\ncluster: {enabled: true, secret: a/b, replicas: [\"10.0.0.5:8090\"]}\n", "nodelocal process's"},
		{"node-local secret not namespaced", "kubernetes: {enabled: false}\ncluster: {enabled: true, secret: a/b, nodeLocalSecret: x}\n", "cluster.nodeLocalSecret"},
		{"unknown nested key", "kubernetes: {enabled: false, tll: 5}\n", `"tll"`},
		{"cache bytes not a size", "kubernetes: {enabled: false}\ncache: {maxBytes: lots}\n", "cache.maxBytes"},
		{"cache bytes too small", "kubernetes: {enabled: false}\ncache: {maxBytes: 1Ki}\n", "cache.maxBytes"},
		{"ttl too large", "kubernetes: {enabled: false, ttl: 3601}\n", "kubernetes.ttl"},
		{"ttl negative", "kubernetes: {enabled: false, ttl: -1}\n", "kubernetes.ttl"},
		{"negative API request rate", "kubernetes: {enabled: false, apiserverQPS: -1}\n", "kubernetes.apiserverQPS"},
		{"negative API requests at once", "kubernetes: {enabled: false, apiserverMaxInflight: -2}\n", "kubernetes.apiserverMaxInflight"},
		{"pods mode", "kubernetes: {enabled: false, pods: sometimes}\n", "kubernetes.pods"},
		{"listen address", "kubernetes: {enabled: false}\ndns: {listen: [\"localhost\"]}\n", "dns.listen[0]"},
		{"no listen address", "kubernetes: {enabled: false}\ndns: {listen: []}\n", "dns.listen"},
		{"mode", "kubernetes: {enabled: false}\nmode: primary\n", "mode"},
		{"reverse zone", "kubernetes: {enabled: false, reverseZones: [example.com]}\n", "kubernetes.reverseZones[0]"},
		{"no cluster domain with the API", "kubernetes: {zones: [], reverseZones: []}\n", "kubernetes.zones: needs at least one cluster domain for kubernetes.enabled"},
		{"no cluster domain with reverse zones", "kubernetes: {enabled: false, zones: []}\n", "kubernetes.zones: needs at least one cluster domain for kubernetes.reverseZones"},
		{"no cluster domain with manifests", "kubernetes: {enabled: false, zones: [], reverseZones: []}\nmanifests: {files: [a.yaml]}\n", "for manifests.files"},
		{"replication factor", "kubernetes: {enabled: false}\ncluster: {replicationFactor: -1}\n", "cluster.replicationFactor"},
		{"question timeout", "kubernetes: {enabled: false}\ncluster: {questionTimeout: 0s}\n", "cluster.questionTimeout: must be positive"},
		{"probe interval too short", "kubernetes: {enabled: false}\ncluster: {failureDetection: {probeInterval: 10ms}}\n", "cluster.failureDetection.probeInterval"},
		{"probe interval negative", "kubernetes: {enabled: false}\ncluster: {failureDetection: {probeInterval: -1s}}\n", "cluster.failureDetection.probeInterval"},
		{"probe timeout over the interval", "kubernetes: {enabled: false}\ncluster: {failureDetection: {probeInterval: 300ms, probeTimeout: 400ms}}\n", "cluster.failureDetection.probeTimeout"},
		{"probe timeout over the fast profile's interval", "kubernetes: {enabled: false}\ncluster: {gossip: fast, failureDetection: {probeTimeout: 300ms}}\n", "cluster.failureDetection.probeTimeout"},
		{"suspicion multiplier", "kubernetes: {enabled: false}\ncluster: {failureDetection: {suspicionMult: -2}}\n", "cluster.failureDetection.suspicionMult"},
		{"unknown failure detection key", "kubernetes: {enabled: false}\ncluster: {failureDetection: {probeIntervall: 1s}}\n", `"probeIntervall"`},
		{"duration", "kubernetes: {enabled: false}\nmanifests: {interval: soon}\n", "soon"},
		{"wrong type", "kubernetes: {enabled: false, ttl: five}\n", "ttl"},
		{"not yaml", "kubernetes: [\n", "yaml"},
		{"verified without the API", "kubernetes: {enabled: false, pods: verified}\n", "kubernetes.pods"},
		{"context without a kubeconfig", "kubernetes: {context: staging}\n", "kubernetes.context: needs kubernetes.kubeconfig"},
		{"multicluster not a domain", "kubernetes: {multicluster: [\"cluster set\"]}\n", "kubernetes.multicluster[0]"},
		{"multicluster zone a cluster domain", "kubernetes: {multicluster: [cluster.local]}\n", "kubernetes.multicluster[0]: \"cluster.local\" overlaps"},
		{"multicluster zone twice", "kubernetes: {multicluster: [clusterset.local, a.clusterset.local]}\n", "kubernetes.multicluster[1]"},
		{"multicluster without the API", "kubernetes: {enabled: false, multicluster: [clusterset.local]}\n", "kubernetes.multicluster: needs"},
		{"istio ttl", "kubernetes: {enabled: false}\nistio: {enabled: true, ttl: 3601}\n", "istio.ttl"},
		{"nodelocal without replicas", "mode: nodelocal\n", "cluster.join"},
		{"nodelocal with manifests", "mode: nodelocal\ncluster: {join: [\"127.0.0.1:7946\"]}\nmanifests: {files: [a.yaml]}\n", "manifests.files"},
		{"nodelocal with istio", "mode: nodelocal\ncluster: {join: [\"127.0.0.1:7946\"]}\nistio: {enabled: true}\n", "istio.enabled"},
		{"federation name not a label", "federation: {names: {My_Fed: fed.example.com}}\n", `"My_Fed" is not a DNS label`},
		{"federation domain", "federation: {names: {prod: \"fed example\"}}\n", "federation.names"},
		{"federation zone not a cluster domain", "federation: {names: {prod: fed.example.com}, zones: [example.org]}\n", "federation.zones[0]"},
		{"federation zone without region", "federation: {names: {prod: fed.example.com}, nodeZone: z1}\n", "federation.nodeZone"},
		{"federation without the API nor a locality", "kubernetes: {enabled: false}\nfederation: {names: {prod: fed.example.com}}\n", "federation.nodeZone"},
		{"federation upstream without names", "federation: {upstream: true}\n", "federation.names"},
		{"external without zones", "kubernetes: {enabled: false, external: {ttl: 5}}\n", "kubernetes.external.zones"},
		{"external zone overlapping the cluster domain", "kubernetes: {enabled: false, external: {zones: [svc.cluster.local]}}\n", "kubernetes.external.zones[0]"},
		{"external zone not a domain", "kubernetes: {enabled: false, external: {zones: [\"ex ample.org\"]}}\n", "kubernetes.external.zones[0]"},
		{"external apex of two labels", "kubernetes: {enabled: false, external: {zones: [example.org], apex: a.b}}\n", "kubernetes.external.apex"},
		{"external ttl", "kubernetes: {enabled: false, external: {zones: [example.org], ttl: 3601}}\n", "kubernetes.external.ttl"},
		{"external transferTo", "kubernetes: {enabled: false, external: {zones: [example.org], transferTo: ['*', 10.0.0.0/8, nowhere]}}\n", "kubernetes.external.transferTo[2]"},
		{"external fallthrough", "kubernetes: {enabled: false, external: {zones: [example.org], fallthrough: [\"a b\"]}}\n", "kubernetes.external.fallthrough[0]"},
		{"unknown external key", "kubernetes: {enabled: false, external: {zones: [example.org], headles: true}}\n", `"headles"`},
		{"replica autopath without verified pods", "autopath: {enabled: true}\n", "autopath.enabled"},
		{"nodeLocal keys on a replica", "nodeLocal: {aaaa: nodata}\n", "nodeLocal: is read in mode: nodelocal only"},
		{"nodeLocal aaaa policy", "mode: nodelocal\ncluster: {replicas: [\"127.0.0.1:8090\"], remote: \"127.0.0.1:8091\"}\nnodeLocal: {aaaa: drop}\n", "nodeLocal.aaaa"},
		{"nodeLocal node name", "mode: nodelocal\ncluster: {replicas: [\"127.0.0.1:8090\"], remote: \"127.0.0.1:8091\"}\nnodeLocal: {nodeName: \"a b\"}\n", "nodeLocal.nodeName"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			_, err := Parse([]byte(c.yaml))
			if err == nil {
				t.Fatalf("accepted %q", c.yaml)
			}
			if !strings.Contains(err.Error(), c.key) {
				t.Fatalf("error %q does not name %s", err, c.key)
			}
		})
	}
}

// Without the API, the manifests and other cluster zones, kubernetes.zones
// may be empty: a Corefile without the kubernetes plugin, whose
// cluster.local names go to stub domains and the forwarder.
func TestParseNoClusterDomain(t *testing.T) {
	cfg, err := Parse([]byte("kubernetes: {enabled: false, zones: [], reverseZones: []}\nforward: {stubs: [{zones: [cluster.local], upstreams: [10.0.0.10]}]}\n"))
	if err != nil {
		t.Fatal(err)
	}
	if len(cfg.Kubernetes.AllZones()) != 0 {
		t.Errorf("cluster zones %q, want none", cfg.Kubernetes.AllZones())
	}
}

// Gossip and remote may listen beyond loopback with a key, or without one
// only when the operator says so; on loopback no key is needed.
func TestClusterTrustAccepts(t *testing.T) {
	for _, y := range []string{
		"cluster: {enabled: true, secretKeyFile: /etc/shardns/gossip.key}\n",
		"cluster: {joinService: kube-system/shardns-peers, secret: kube-system/shardns-gossip, admitServices: [kube-system/shardns-nodelocal]}\n",
		"cluster: {enabled: true, insecure: true}\n",
		"cluster: {join: [\"127.0.0.1:7946\"], bind: \"127.0.0.1:7947\", remote: \"127.0.0.1:8090\"}\n",
		"cluster: {join: [\"[::1]:7946\"], bind: \"[::1]:7947\", remote: \"[::1]:8090\", advertise: \"[::1]:7947\"}\n",
	} {
		if _, err := Parse([]byte("kubernetes: {enabled: false}\n" + y)); err != nil {
			t.Errorf("%s: %v", y, err)
		}
	}
}

// cluster.failureDetection leaves the gossip profile alone unless set, and
// takes any consistent setting.
func TestFailureDetectionAccepts(t *testing.T) {
	if fd := Default().Cluster.FailureDetection; fd != (FailureDetectionConfig{}) {
		t.Fatalf("failureDetection defaults to %+v, want the gossip profile's (zero)", fd)
	}
	for _, y := range []string{
		"cluster: {failureDetection: {probeInterval: 250ms}}\n",
		"cluster: {failureDetection: {probeInterval: 250ms, probeTimeout: 250ms, suspicionMult: 2}}\n",
		"cluster: {failureDetection: {probeTimeout: 900ms}}\n",
		"cluster: {gossip: fast, failureDetection: {suspicionMult: 6}}\n",
	} {
		if _, err := Parse([]byte("kubernetes: {enabled: false}\n" + y)); err != nil {
			t.Fatalf("%q: %v", y, err)
		}
	}
}
