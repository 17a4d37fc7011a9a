package functional

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/miekg/dns"

	"github.com/shardns/shardns/integration/harness"
	"github.com/shardns/shardns/integration/kubeapi"
)

// k3sCorefile is k3s's default Corefile (its manifests/coredns.yaml,
// corefile/testdata/realworld/k3s.Corefile) on loopback ports, with the
// test apiserver's kubeconfig, a local upstream in place of resolv.conf,
// and NodeHosts by its absolute path; the coredns-custom ConfigMap's
// files are imported from custom/ beside the Corefile, as k3s mounts
// them.
const k3sCorefile = `.:{{dns}} {
    bind 127.0.0.1
    errors
    health 127.0.0.1:{{health}}
    ready 127.0.0.1:{{ready}}
    kubernetes cluster.local in-addr.arpa ip6.arpa {
      kubeconfig {{kubeconfig}}
      pods insecure
      fallthrough in-addr.arpa ip6.arpa
    }
    hosts {{dir}}/NodeHosts {
      ttl 60
      reload 15s
      fallthrough
    }
    prometheus 127.0.0.1:{{metrics}}
    forward . {{upstream}}
    cache 30
    reload
    loadbalance
    import custom/*.override
}
import custom/*.server
`

// The custom files: an override in the main block and a stub domain's
// server block, as AKS and k3s users write them.
const (
	k3sOverride = "rewrite name exact nodes.internal node-a answer auto\n"
	k3sServer   = `corp.test:{{dns}} {
    bind 127.0.0.1
    errors
    cache 30
    forward . {{corp}}
}
`
)

// k3s's Corefile with its NodeHosts file and a coredns-custom folder,
// served by `shardns serve --corefile` as it is and by CoreDNS: the same
// answers for cluster names, NodeHosts names, an override's rewrite, a
// stub domain and forwarded names, each from a real Unbound.
func TestServeK3sCorefileBesideCoreDNS(t *testing.T) {
	cp := kubeapi.Shared(t)
	c := cp.Client
	harness.CreateNamespace(t, c, "k3s", nil)
	web := harness.CreateService(t, c, harness.ClusterIPService("k3s", "web"))
	upstream := harness.StartUnbound(t, "www.example.test. 300 IN A 192.0.2.1")
	corp := harness.StartUnbound(t, "wiki.corp.test. 300 IN A 192.0.2.80")

	// start writes the Corefile and its files into a folder of their
	// own, on ports of their own, and starts serve with it.
	start := func(serve func(t *testing.T, path string, run harness.Corefile) string) string {
		dir := t.TempDir()
		if err := os.Mkdir(filepath.Join(dir, "custom"), 0o755); err != nil {
			t.Fatal(err)
		}
		vars := map[string]string{"kubeconfig": cp.Kubeconfig, "upstream": upstream.Addr, "corp": corp.Addr, "dir": dir}
		run := harness.RenderCorefile(t, k3sCorefile, vars)
		vars["dns"] = strings.TrimPrefix(run.Addrs["dns"], "127.0.0.1:")
		files := map[string]string{
			"Corefile":               run.Text,
			"NodeHosts":              "192.168.1.10 node-a\n192.168.1.11 node-b\n",
			"custom/nodes.override":  k3sOverride,
			"custom/corp.server":     harness.RenderCorefile(t, k3sServer, vars).Text,
			"custom/README.disabled": "not matched by the imports\n",
		}
		for name, text := range files {
			if err := os.WriteFile(filepath.Join(dir, name), []byte(text), 0o644); err != nil {
				t.Fatal(err)
			}
		}
		return serve(t, filepath.Join(dir, "Corefile"), run)
	}
	shardns := start(func(t *testing.T, path string, run harness.Corefile) string {
		return harness.Start(t, harness.Options{Args: []string{"--corefile", path}}).Addr
	})
	coredns := start(func(t *testing.T, path string, run harness.Corefile) string {
		text, err := os.ReadFile(path)
		if err != nil {
			t.Fatal(err)
		}
		// CoreDNS reads imports from its working directory's view of the
		// Corefile's folder: run it from there.
		return harness.StartCoreDNS(t, harness.CoreDNSOptions{Dir: filepath.Dir(path), Corefile: string(text), Addr: run.Addrs["dns"], Probe: "web.k3s.svc.cluster.local."})
	})

	ip := web.Spec.ClusterIP
	harness.AskBoth(t, shardns, coredns, []harness.Question{
		{Name: "web.k3s.svc.cluster.local.", Qtype: dns.TypeA, Rcode: dns.RcodeSuccess, Answer: []string{"web.k3s.svc.cluster.local.\t5\tIN\tA\t" + ip}},
		{Name: "nope.k3s.svc.cluster.local.", Qtype: dns.TypeA, Rcode: dns.RcodeNameError, Answer: nil},
		{Name: harness.ReverseName(ip), Qtype: dns.TypePTR, Rcode: dns.RcodeSuccess, Answer: []string{harness.ReverseName(ip) + "\t5\tIN\tPTR\tweb.k3s.svc.cluster.local."}},
		{Name: "node-b.", Qtype: dns.TypeA, Rcode: dns.RcodeSuccess, Answer: []string{"node-b.\t60\tIN\tA\t192.168.1.11"}},
		{Name: "nodes.internal.", Qtype: dns.TypeA, Rcode: dns.RcodeSuccess, Answer: []string{"nodes.internal.\t60\tIN\tA\t192.168.1.10"}},
		{Name: "wiki.corp.test.", Qtype: dns.TypeA, Rcode: dns.RcodeSuccess, Answer: []string{"wiki.corp.test.\t300\tIN\tA\t192.0.2.80"}},
		{Name: "www.example.test.", Qtype: dns.TypeA, Rcode: dns.RcodeSuccess, Answer: []string{"www.example.test.\t300\tIN\tA\t192.0.2.1"}},
	})
}
