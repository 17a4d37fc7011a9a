package functional

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/miekg/dns"
	discoveryv1 "k8s.io/api/discovery/v1"

	"github.com/shardns/shardns/integration/harness"
	"github.com/shardns/shardns/integration/kubeapi"
)

// nodeLocalDNSTemplate is NodeLocal DNSCache's Corefile
// (kubernetes/kubernetes cluster/addons/dns/nodelocaldns/nodelocaldns.yaml)
// as its installer leaves it with kube-proxy in iptables mode, on
// loopback: 127.0.0.1 for the link-local address (169.254.20.10),
// 127.0.0.2 for the kube-dns ClusterIP it binds too, loopback ports for
// :53, :9253 and :8080. __PILLAR__CLUSTER__DNS__ and
// __PILLAR__UPSTREAM__SERVERS__ are left for node-cache, here shardns,
// to fill.
const nodeLocalDNSTemplate = `cluster.local:{{dns}} {
    errors
    cache {
            success 9984 30
            denial 9984 5
    }
` + nodeLocalToKubeDNS + `    health 127.0.0.1:{{health}}
    }
in-addr.arpa:{{dns}} {
    errors
    cache 30
` + nodeLocalToKubeDNS + `    }
ip6.arpa:{{dns}} {
    errors
    cache 30
` + nodeLocalToKubeDNS + `    }
.:{{dns}} {
    errors
    cache 30
    reload
    loop
    bind 127.0.0.1 127.0.0.2
    forward . __PILLAR__UPSTREAM__SERVERS__
    prometheus 127.0.0.1:{{metrics}}
    }
`

// nodeLocalToKubeDNS is how NodeLocal DNSCache's blocks for the
// cluster's zones (cluster.local and both reverse zones) go on after
// their cache, alike in each: forward to kube-dns over TCP.
const nodeLocalToKubeDNS = `    reload
    loop
    bind 127.0.0.1 127.0.0.2
    forward . __PILLAR__CLUSTER__DNS__ {
            force_tcp
    }
    prometheus 127.0.0.1:{{metrics}}
`

// NodeLocal DNSCache's Corefile served by `shardns serve --corefile`, its
// placeholders filled as node-cache fills them, answers as CoreDNS 1.15
// running the same file: cluster names through a shardns replica set
// standing for kube-dns (the kube-dns-upstream Service), other names
// through Unbound (the node's resolvers). Then the same file with a base
// in mode: nodelocal asks the replicas directly and answers the same.
func TestNodeLocalDNSCorefile(t *testing.T) {
	cp := kubeapi.Shared(t)
	harness.CreateNamespace(t, cp.Client, "nldns", nil)
	web := harness.CreateService(t, cp.Client, harness.ClusterIPService("nldns", "web"))
	harness.CreateService(t, cp.Client, harness.HeadlessService("nldns", "db"))
	harness.CreateEndpointSlice(t, cp.Client, "nldns", "db", "db-v4", discoveryv1.AddressTypeIPv4, harness.Endpoint{IP: "10.244.9.10", Hostname: "db-0"})
	u := harness.StartUnbound(t, "www.example.test. 300 IN A 192.0.2.1",
		"77.2.0.192.in-addr.arpa. 300 IN PTR printer.example.test.")
	a := startKubeDNSReplica(t, cp, "kd0", "", u.Addr)
	b := startKubeDNSReplica(t, cp, "kd1", a.Gossip, u.Addr)
	harness.Settled(t, []*harness.Replica{a, b}, 2)
	kubeDNS := a.Addr // the kube-dns-upstream Service: any replica answers any name

	ip := web.Spec.ClusterIP
	questions := []harness.Question{
		{Name: "web.nldns.svc.cluster.local.", Qtype: dns.TypeA, Rcode: dns.RcodeSuccess, Answer: []string{"web.nldns.svc.cluster.local.\t30\tIN\tA\t" + ip}},
		{Name: "web.nldns.svc.cluster.local.", Qtype: dns.TypeAAAA, Rcode: dns.RcodeSuccess, Answer: nil},
		{Name: "db.nldns.svc.cluster.local.", Qtype: dns.TypeA, Rcode: dns.RcodeSuccess, Answer: []string{"db.nldns.svc.cluster.local.\t30\tIN\tA\t10.244.9.10"}},
		{Name: "_http._tcp.web.nldns.svc.cluster.local.", Qtype: dns.TypeSRV, Rcode: dns.RcodeSuccess,
			Answer: []string{"_http._tcp.web.nldns.svc.cluster.local.\t30\tIN\tSRV\t0 100 80 web.nldns.svc.cluster.local."}},
		{Name: harness.ReverseName(ip), Qtype: dns.TypePTR, Rcode: dns.RcodeSuccess, Answer: []string{harness.ReverseName(ip) + "\t30\tIN\tPTR\tweb.nldns.svc.cluster.local."}},
		{Name: "nope.nldns.svc.cluster.local.", Qtype: dns.TypeA, Rcode: dns.RcodeNameError, Answer: nil},
		{Name: "web.no-such-namespace.svc.cluster.local.", Qtype: dns.TypeA, Rcode: dns.RcodeNameError, Answer: nil},
		{Name: "www.example.test.", Qtype: dns.TypeA, Rcode: dns.RcodeSuccess, Answer: []string{"www.example.test.\t300\tIN\tA\t192.0.2.1"}},
		{Name: "missing.example.test.", Qtype: dns.TypeA, Rcode: dns.RcodeNameError, Answer: nil},
		// A reverse name the cluster does not know: kube-dns falls
		// through to its upstream, the node tier to the node's.
		{Name: "77.2.0.192.in-addr.arpa.", Qtype: dns.TypePTR, Rcode: dns.RcodeSuccess, Answer: []string{"77.2.0.192.in-addr.arpa.\t300\tIN\tPTR\tprinter.example.test."}},
	}

	// CoreDNS runs the file as node-cache writes it, without loop: its
	// probe of the root block would send Unbound to the internet.
	fill := strings.NewReplacer("__PILLAR__CLUSTER__DNS__", kubeDNS, "__PILLAR__UPSTREAM__SERVERS__", u.Addr, "    loop\n", "")
	coreRun := harness.RenderCorefile(t, fill.Replace(nodeLocalDNSTemplate), nil)
	core := harness.StartCoreDNS(t, harness.CoreDNSOptions{Corefile: coreRun.Text, Addr: coreRun.Addrs["dns"], Probe: "web.nldns.svc.cluster.local."})
	nodeCacheFlags := []string{"--localip", "127.0.0.1,127.0.0.2", "--upstreamsvc", "kube-dns-upstream",
		"--cluster-dns", kubeDNS, "--upstream-servers", u.Addr}

	t.Run("forwarding to kube-dns", func(t *testing.T) {
		run := harness.RenderCorefile(t, nodeLocalDNSTemplate, nil)
		path := filepath.Join(t.TempDir(), "Corefile")
		if err := os.WriteFile(path, []byte(run.Text), 0o644); err != nil {
			t.Fatal(err)
		}
		p := harness.Start(t, harness.Options{Args: append([]string{"--corefile", path}, nodeCacheFlags...)})
		p.WaitReady(t)
		harness.AskBoth(t, p.Addr, core, questions)
		alikeResponses(t, p.Addr, core, questions)
	})

	t.Run("asking the owners (mode: nodelocal)", func(t *testing.T) {
		run := harness.RenderCorefile(t, nodeLocalDNSTemplate, nil)
		dir := t.TempDir()
		path := filepath.Join(dir, "Corefile")
		base := filepath.Join(dir, "base.yaml")
		baseYAML := fmt.Sprintf(`mode: nodelocal
cluster:
  nodeName: nl0
  replicas: [%q]
  remote: "127.0.0.1:%d"
  gossip: fast
`, harness.RemoteOf(t, a), harness.FreePort(t))
		for file, text := range map[string]string{path: run.Text, base: baseYAML} {
			if err := os.WriteFile(file, []byte(text), 0o644); err != nil {
				t.Fatal(err)
			}
		}
		p := harness.Start(t, harness.Options{Args: append([]string{"--corefile", path, "--config", base}, nodeCacheFlags...)})
		p.WaitReady(t)
		http := p.HTTPAddr(t)
		before := totalDispatches(t, http)
		harness.AskBoth(t, p.Addr, core, questions)
		alikeResponses(t, p.Addr, core, questions)
		if after := totalDispatches(t, http); after <= before {
			t.Errorf("the node tier asked the owners %v times, want the cluster's names asked of them", after-before)
		}
	})
}

// startKubeDNSReplica starts a replica standing for kube-dns: the
// cluster's names from the test apiserver with kubeadm's TTL (30 s,
// above NodeLocal's 5 s cap on cluster.local denials), others forwarded
// to upstream (kube-dns's forward . /etc/resolv.conf), joining seed
// unless "".
func startKubeDNSReplica(t *testing.T, cp *kubeapi.ControlPlane, name, seed, upstream string) *harness.Replica {
	t.Helper()
	join := "enabled: true"
	if seed != "" {
		join = fmt.Sprintf("join: [%q]", seed)
	}
	gossip := fmt.Sprintf("127.0.0.1:%d", harness.FreePort(t))
	p := harness.Start(t, harness.Options{Config: fmt.Sprintf(`
dns: {listen: ["127.0.0.1:0"]}
http: {listen: "127.0.0.1:0", lameduck: 0s}
kubernetes: {enabled: true, kubeconfig: %q, ttl: 30}
forward: {upstreams: [%q]}
cluster:
  nodeName: %s
  %s
  bind: %q
  remote: "127.0.0.1:%d"
  replicationFactor: 2
  gossip: fast
`, cp.Kubeconfig, upstream, name, join, gossip, harness.FreePort(t))})

	return &harness.Replica{Process: p, HTTP: p.HTTPAddr(t), Gossip: gossip}
}
