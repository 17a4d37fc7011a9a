package functional

import (
	"context"
	"os"
	"path/filepath"
	"testing"

	"github.com/miekg/dns"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/shardns/shardns/integration/harness"
	"github.com/shardns/shardns/integration/kubeapi"
)

// federatedCorefile is the Corefile Kubernetes' kube-dns migration makes
// of a ConfigMap with `federations: {"myfed": "fed.example.test"}`
// (corefile.KubeDNSCorefile), on loopback ports; {{upstream}} is the
// federation plugin's upstream line, or nothing.
const federatedCorefile = `.:{{dns}} {
    bind 127.0.0.1
    errors
    health 127.0.0.1:{{health}}
    ready
    kubernetes cluster.local in-addr.arpa ip6.arpa {
        pods insecure
        fallthrough in-addr.arpa ip6.arpa
        ttl 30
    }
    federation cluster.local {
        myfed fed.example.test
        {{chase}}
    }
    prometheus 127.0.0.1:{{metrics}}
    forward . {{resolver}}
    cache 30
    loop
    reload
    loadbalance
}
`

// Federation names, served from a Corefile with CoreDNS 1.6's federation
// plugin (what a kube-dns ConfigMap's federations become): a service
// that exists here is answered here under the federated name; one that
// does not is a CNAME to the federation's name for this node's zone and
// region, read from the Node's topology labels; with upstream, the
// target's records follow.
func TestServeFederation(t *testing.T) {
	cp := kubeapi.Shared(t)
	c := cp.Client
	harness.CreateNamespace(t, c, "fedns", nil)
	web := harness.CreateService(t, c, harness.ClusterIPService("fedns", "web"))
	node := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "fed-node-1", Labels: map[string]string{
		"topology.kubernetes.io/zone": "zone-b", "topology.kubernetes.io/region": "region-1"}}}
	if _, err := c.CoreV1().Nodes().Create(context.Background(), node, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.CoreV1().Nodes().Delete(context.Background(), node.Name, metav1.DeleteOptions{}) })
	target := "gone.fedns.myfed.svc.zone-b.region-1.fed.example.test."
	resolver := harness.StartUnbound(t, target+" 300 IN A 192.0.2.99")

	// The base says what a kube-dns ConfigMap cannot: where the API is
	// and which node this is.
	dir := t.TempDir()
	base := filepath.Join(dir, "base.yaml")
	if err := os.WriteFile(base, []byte("kubernetes: {kubeconfig: "+cp.Kubeconfig+"}\nfederation: {nodeName: fed-node-1}\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	serve := func(chase string) string {
		run := harness.RenderCorefile(t, federatedCorefile, map[string]string{"resolver": resolver.Addr, "chase": chase})
		path := filepath.Join(t.TempDir(), "Corefile")
		if err := os.WriteFile(path, []byte(run.Text), 0o644); err != nil {
			t.Fatal(err)
		}
		return harness.Start(t, harness.Options{Args: []string{"--corefile", path, "--config", base}}).Addr
	}
	cname := "gone.fedns.myfed.svc.cluster.local.\t0\tIN\tCNAME\t" + target
	ip := web.Spec.ClusterIP
	common := []harness.Question{
		{Name: "web.fedns.myfed.svc.cluster.local.", Qtype: dns.TypeA, Rcode: dns.RcodeSuccess, Answer: []string{"web.fedns.myfed.svc.cluster.local.\t30\tIN\tA\t" + ip}},
		{Name: "web.fedns.svc.cluster.local.", Qtype: dns.TypeA, Rcode: dns.RcodeSuccess, Answer: []string{"web.fedns.svc.cluster.local.\t30\tIN\tA\t" + ip}},
		// Not a federation: the label is read as a namespace.
		{Name: "web.fedns.otherfed.svc.cluster.local.", Qtype: dns.TypeA, Rcode: dns.RcodeNameError, Answer: nil},
	}
	t.Run("cname", func(t *testing.T) {
		addr := serve("")
		harness.AnswersAre(t, addr, append(common,
			harness.Question{Name: "gone.fedns.myfed.svc.cluster.local.", Qtype: dns.TypeA, Rcode: dns.RcodeSuccess, Answer: []string{cname}})...)
		r := harness.Ask(t, addr, "udp", "gone.fedns.myfed.svc.cluster.local.", dns.TypeA)
		if !r.Authoritative || len(r.Ns) != 0 {
			t.Errorf("CNAME answer: aa %v, authority %v; want aa and no authority", r.Authoritative, r.Ns)
		}
	})
	t.Run("upstream", func(t *testing.T) {
		addr := serve("upstream")
		harness.AnswersAre(t, addr, append(common,
			harness.Question{Name: "gone.fedns.myfed.svc.cluster.local.", Qtype: dns.TypeA, Rcode: dns.RcodeSuccess,
				Answer: []string{cname, target + "\t300\tIN\tA\t192.0.2.99"}})...)
	})
}
