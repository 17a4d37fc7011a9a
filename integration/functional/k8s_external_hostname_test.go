package functional

import (
	"testing"

	"github.com/miekg/dns"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"

	"github.com/shardns/shardns/integration/harness"
	"github.com/shardns/shardns/integration/kubeapi"
)

// k8sExternalForwardCorefile is CoreDNS's k8s_external README example
// with a forwarder, which its upstream lookups of ingress hostnames go
// through.
const k8sExternalForwardCorefile = `.:{{dns}} {
    bind 127.0.0.1
    kubernetes cluster.local {
        kubeconfig {{kubeconfig}} kubeapi
    }
    k8s_external example.org
    forward . {{upstream}}
}
`

// mkHostnameServices creates, in namespace ns, load balancers whose
// ingress is given by hostname, as AWS's are: elb (a hostname, two
// ports), mixed (an external IP, then a hostname and an IP in its
// ingress) and nx (a hostname the upstream does not know).
func mkHostnameServices(t *testing.T, c kubernetes.Interface, ns string) {
	t.Helper()
	harness.CreateNamespace(t, c, ns, nil)
	lb := func(name string, ingress []corev1.LoadBalancerIngress, ports ...corev1.ServicePort) {
		s := harness.ClusterIPService(ns, name, ports...)
		s.Spec.Type = corev1.ServiceTypeLoadBalancer
		if name == "mixed" {
			s.Spec.ExternalIPs = []string{"192.0.2.30"}
		}
		s = harness.CreateService(t, c, s)
		s.Status.LoadBalancer.Ingress = ingress
		if _, err := c.CoreV1().Services(ns).UpdateStatus(ctx, s, metav1.UpdateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	lb("elb", []corev1.LoadBalancerIngress{{Hostname: "elb.example.test"}},
		corev1.ServicePort{Name: "http", Port: 80, Protocol: corev1.ProtocolTCP},
		corev1.ServicePort{Name: "https", Port: 443, Protocol: corev1.ProtocolTCP})
	lb("mixed", []corev1.LoadBalancerIngress{{Hostname: "mixed-lb.example.test"}, {IP: "198.51.100.30"}})
	lb("nx", []corev1.LoadBalancerIngress{{Hostname: "nx-lb.example.test"}})
}

// A load balancer's ingress hostname gets, from `shardns serve
// --corefile`, the responses CoreDNS 1.15 gives from the same Corefile:
// a CNAME to the hostname (one per port, as CoreDNS writes them) with the
// hostname's records looked up through the server's forwarder to a real
// Unbound behind each, SRV records targeting it with its A and AAAA
// records in the additional section, beside the external IPs of the same
// Service; rcode, flags and every section, TTLs included.
func TestK8sExternalHostnameBesideCoreDNS(t *testing.T) {
	cp := kubeapi.Shared(t)
	mkHostnameServices(t, cp.Client, "k8sexth")
	u := harness.StartUnbound(t, "elb.example.test. 300 IN A 203.0.113.40", "elb.example.test. 300 IN AAAA 2001:db8::40",
		"mixed-lb.example.test. 300 IN A 203.0.113.41")
	vars := map[string]string{"kubeconfig": cp.Kubeconfig, "upstream": u.Addr}
	shardns := serveCorefileText(t, harness.RenderCorefile(t, k8sExternalForwardCorefile, vars).Text)
	coreRun := harness.RenderCorefile(t, k8sExternalForwardCorefile, vars)
	coredns := harness.StartCoreDNS(t, harness.CoreDNSOptions{Corefile: coreRun.Text, Addr: coreRun.Addrs["dns"], Probe: "mixed.k8sexth.example.org."})

	const elb, mixed = "elb.k8sexth.example.org.", "mixed.k8sexth.example.org."
	elbCNAME := elb + "\t5\tIN\tCNAME\telb.example.test."
	harness.AskBoth(t, shardns, coredns, []harness.Question{
		{Name: elb, Qtype: dns.TypeA, Rcode: dns.RcodeSuccess, Answer: []string{elbCNAME, elbCNAME,
			"elb.example.test.\t300\tIN\tA\t203.0.113.40", "elb.example.test.\t300\tIN\tA\t203.0.113.40"}},
		{Name: elb, Qtype: dns.TypeAAAA, Rcode: dns.RcodeSuccess, Answer: []string{elbCNAME, elbCNAME,
			"elb.example.test.\t300\tIN\tAAAA\t2001:db8::40", "elb.example.test.\t300\tIN\tAAAA\t2001:db8::40"}},
		{Name: "_https._tcp." + elb, Qtype: dns.TypeSRV, Rcode: dns.RcodeSuccess, Answer: []string{
			"_https._tcp." + elb + "\t5\tIN\tSRV\t0 100 443 elb.example.test."}},
		{Name: mixed, Qtype: dns.TypeA, Rcode: dns.RcodeSuccess, Answer: []string{mixed + "\t5\tIN\tA\t192.0.2.30", mixed + "\t5\tIN\tA\t198.51.100.30",
			mixed + "\t5\tIN\tCNAME\tmixed-lb.example.test.", "mixed-lb.example.test.\t300\tIN\tA\t203.0.113.41"}},
		{Name: "nx.k8sexth.example.org.", Qtype: dns.TypeA, Rcode: dns.RcodeSuccess, Answer: []string{"nx.k8sexth.example.org.\t5\tIN\tCNAME\tnx-lb.example.test."}},
	})
	for _, n := range []string{"elb", "mixed", "nx", "x.elb", "_http._tcp.elb", "_https._tcp.mixed", "_http._tcp.mixed", "none"} {
		for _, qt := range []uint16{dns.TypeA, dns.TypeAAAA, dns.TypeSRV, dns.TypeTXT, dns.TypeCNAME, dns.TypePTR} {
			sameResponses(t, shardns, coredns, externalQuestion{n + ".k8sexth.example.org.", qt})
		}
	}
}
