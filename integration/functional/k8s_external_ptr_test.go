package functional

import (
	"strings"
	"testing"

	"github.com/miekg/dns"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/shardns/shardns/integration/harness"
	"github.com/shardns/shardns/integration/kubeapi"
)

// k8sExternalPTRCorefile serves reverse zones of the external addresses
// under k8s_external, after a kubernetes plugin ({{kube}} its zones and
// options).
const k8sExternalPTRCorefile = `.:{{dns}} {
    bind 127.0.0.1
    kubernetes cluster.local {{kube}}
    k8s_external example.org 2.0.192.in-addr.arpa 8.b.d.0.1.0.0.2.ip6.arpa
}
`

// The PTRs of external IPs in k8s_external's reverse zones get, from
// `shardns serve --corefile`, the responses CoreDNS 1.15 gives: the
// Services' names in the first external zone with the plugin's TTL, a
// miss NXDOMAIN with the external zone's SOA, other types as the zone's
// names. With the kubernetes plugin serving in-addr.arpa and falling
// through, a cluster IP stays its answer and only its misses reach
// k8s_external; without reverse zones of its own, k8s_external answers
// alone.
func TestK8sExternalPTRBesideCoreDNS(t *testing.T) {
	cp := kubeapi.Shared(t)
	const ns = "k8sptr"
	harness.CreateNamespace(t, cp.Client, ns, nil)
	web := harness.ClusterIPService(ns, "web")
	web.Spec.ExternalIPs = []string{"192.0.2.210", "2001:db8::210"}
	web = harness.CreateService(t, cp.Client, web)
	lb := harness.ClusterIPService(ns, "lb")
	lb.Spec.Type = corev1.ServiceTypeLoadBalancer
	lb = harness.CreateService(t, cp.Client, lb)
	lb.Status.LoadBalancer.Ingress = []corev1.LoadBalancerIngress{{IP: "192.0.2.211"}, {IP: "198.51.100.211"}}
	if _, err := cp.Client.CoreV1().Services(ns).UpdateStatus(ctx, lb, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	shared := harness.ClusterIPService(ns, "shared")
	shared.Spec.ExternalIPs = []string{"192.0.2.210"}
	harness.CreateService(t, cp.Client, shared)
	clusterPTR, _ := dns.ReverseAddr(web.Spec.ClusterIP)
	const rz = "2.0.192.in-addr.arpa."
	v6, _ := dns.ReverseAddr("2001:db8::210")
	cases := []struct {
		name, kube string
		want       []harness.Question
		also       []string // reverse names asked for PTR alone and compared whole
	}{
		{
			name: "after the kubernetes plugin's fallthrough",
			kube: "in-addr.arpa ip6.arpa {\n        kubeconfig {{kubeconfig}} kubeapi\n        fallthrough in-addr.arpa ip6.arpa\n    }",
			want: []harness.Question{
				{Name: "210." + rz, Qtype: dns.TypePTR, Rcode: dns.RcodeSuccess, Answer: []string{
					"210." + rz + "\t5\tIN\tPTR\tweb.k8sptr.example.org.", "210." + rz + "\t5\tIN\tPTR\tshared.k8sptr.example.org."}},
				{Name: clusterPTR, Qtype: dns.TypePTR, Rcode: dns.RcodeSuccess, Answer: []string{clusterPTR + "\t5\tIN\tPTR\tweb.k8sptr.svc.cluster.local."}},
			},
			also: []string{clusterPTR},
		},
		{
			name: "alone",
			kube: "{\n        kubeconfig {{kubeconfig}} kubeapi\n    }",
			want: []harness.Question{
				{Name: "211." + rz, Qtype: dns.TypePTR, Rcode: dns.RcodeSuccess, Answer: []string{"211." + rz + "\t5\tIN\tPTR\tlb.k8sptr.example.org."}},
			},
		},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			vars := map[string]string{"kubeconfig": cp.Kubeconfig}
			text := strings.Replace(k8sExternalPTRCorefile, "{{kube}}", c.kube, 1)
			shardns := serveCorefileText(t, harness.RenderCorefile(t, text, vars).Text)
			coreRun := harness.RenderCorefile(t, text, vars)
			coredns := harness.StartCoreDNS(t, harness.CoreDNSOptions{Corefile: coreRun.Text, Addr: coreRun.Addrs["dns"], Probe: "web.k8sptr.example.org."})
			harness.AskBoth(t, shardns, coredns, c.want)
			for _, n := range []string{"210." + rz, "211." + rz, "212." + rz, "x." + rz, "k8sptr." + rz, rz, v6,
				"8.b.d.0.1.0.0.2.ip6.arpa."} {
				for _, qt := range []uint16{dns.TypePTR, dns.TypeA, dns.TypeSOA} {
					sameResponses(t, shardns, coredns, externalQuestion{n, qt})
				}
			}
			// Other types of a cluster IP's name differ: CoreDNS's
			// kubernetes plugin passes them on, to no plugin (SERVFAIL).
			for _, n := range c.also {
				sameResponses(t, shardns, coredns, externalQuestion{n, dns.TypePTR})
			}
		})
	}
}
