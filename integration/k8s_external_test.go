package integration

import (
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/miekg/dns"
	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"

	"github.com/shardns/shardns/integration/kubeapi"
	"github.com/shardns/shardns/internal/testutil"
)

// k8sExternalCorefile is CoreDNS's k8s_external README example on
// loopback ports, its options ({{options}}) filled per case.
const k8sExternalCorefile = `.:{{dns}} {
    bind 127.0.0.1
    kubernetes cluster.local {
        kubeconfig {{kubeconfig}} kubeapi
    }
    k8s_external example.org {{options}}
}
`

// mkExternalServices creates, in namespace ns, a ClusterIP Service with
// external IPs (web), a LoadBalancer Service whose status gets ingress
// IPs (lb), a headless Service with endpoints (db) and a Service with
// neither (plain).
func mkExternalServices(t *testing.T, c kubernetes.Interface, ns string) {
	t.Helper()
	mkNamespace(t, c, ns, nil)
	web := clusterIPService(ns, "web", corev1.ServicePort{Name: "http", Port: 80, Protocol: corev1.ProtocolTCP},
		corev1.ServicePort{Name: "https", Port: 443, Protocol: corev1.ProtocolTCP})
	web.Spec.ExternalIPs = []string{"192.0.2.10", "2001:db8::10"}
	mkService(t, c, web)
	lb := clusterIPService(ns, "lb")
	lb.Spec.Type = corev1.ServiceTypeLoadBalancer
	lb = mkService(t, c, lb)
	lb.Status.LoadBalancer.Ingress = []corev1.LoadBalancerIngress{{IP: "198.51.100.20"}, {IP: "198.51.100.21"}}
	if _, err := c.CoreV1().Services(ns).UpdateStatus(ctx, lb, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	mkService(t, c, headlessService(ns, "db"))
	mkSlice(t, c, ns, "db", "db-v4", discoveryv1.AddressTypeIPv4,
		ep{ip: "10.244.9.10", hostname: "db-0"}, ep{ip: "10.244.9.11"}, ep{ip: "10.244.9.12", notReady: true})
	mkService(t, c, clusterIPService(ns, "plain"))
}

// The names k8s_external publishes get, from `shardns serve --corefile`,
// the responses CoreDNS 1.15 gives from the same Corefile: rcode, flags
// and every section, TTLs included (SOA serials aside: each server
// counts its own).
func TestK8sExternalBesideCoreDNS(t *testing.T) {
	cp := kubeapi.Shared(t)
	mkExternalServices(t, cp.Client, "k8sext")
	cases := []struct {
		name, options string
		names         []string
		want          []convertQuestion
	}{
		{
			name:  "defaults",
			names: []string{"web", "lb", "db", "plain", "none", "x.web", "db-0.db", "_https._tcp.web", "_ftp._tcp.web", "_http._tcp.db", "a.b.c.web"},
			want: []convertQuestion{
				{"web.k8sext.example.org.", dns.TypeA, dns.RcodeSuccess, []string{"web.k8sext.example.org.\t5\tIN\tA\t192.0.2.10"}},
				{"web.k8sext.example.org.", dns.TypeAAAA, dns.RcodeSuccess, []string{"web.k8sext.example.org.\t5\tIN\tAAAA\t2001:db8::10"}},
				{"lb.k8sext.example.org.", dns.TypeA, dns.RcodeSuccess, []string{
					"lb.k8sext.example.org.\t5\tIN\tA\t198.51.100.20", "lb.k8sext.example.org.\t5\tIN\tA\t198.51.100.21"}},
				{"_https._tcp.web.k8sext.example.org.", dns.TypeSRV, dns.RcodeSuccess, []string{
					"_https._tcp.web.k8sext.example.org.\t5\tIN\tSRV\t0 50 443 web.k8sext.example.org."}},
				{"db.k8sext.example.org.", dns.TypeA, dns.RcodeNameError, nil},
				{"plain.k8sext.example.org.", dns.TypeA, dns.RcodeNameError, nil},
			},
		},
		{
			name:    "headless, apex and ttl",
			options: "{\n        headless\n        apex zone\n        ttl 60\n    }",
			names:   []string{"web", "lb", "db", "plain", "db-0.db", "10-244-9-11.db", "10-244-9-12.db", "_http._tcp.db", "_http._tcp.lb", "x.plain"},
			want: []convertQuestion{
				{"db.k8sext.example.org.", dns.TypeA, dns.RcodeSuccess, []string{
					"db.k8sext.example.org.\t60\tIN\tA\t10.244.9.10", "db.k8sext.example.org.\t60\tIN\tA\t10.244.9.11"}},
				{"db-0.db.k8sext.example.org.", dns.TypeA, dns.RcodeSuccess, []string{"db-0.db.k8sext.example.org.\t60\tIN\tA\t10.244.9.10"}},
				{"_http._tcp.db.k8sext.example.org.", dns.TypeSRV, dns.RcodeSuccess, []string{
					"_http._tcp.db.k8sext.example.org.\t5\tIN\tSRV\t0 50 80 db-0.db.k8sext.example.org.",
					"_http._tcp.db.k8sext.example.org.\t5\tIN\tSRV\t0 50 80 10-244-9-11.db.k8sext.example.org."}},
				{"web.k8sext.example.org.", dns.TypeA, dns.RcodeSuccess, []string{"web.k8sext.example.org.\t60\tIN\tA\t192.0.2.10"}},
			},
		},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			vars := map[string]string{"kubeconfig": cp.Kubeconfig, "options": c.options}
			shardns := serveCorefileText(t, renderCorefile(t, k8sExternalCorefile, vars).text)
			coreRun := renderCorefile(t, k8sExternalCorefile, vars)
			coredns := startCoreDNSCorefile(t, coreRun.text, coreRun.addrs["dns"], "web.k8sext.example.org.")
			// What a user sees first, then every other question asked of
			// both and compared whole.
			askBoth(t, shardns, coredns, c.want)
			var qs []externalQuestion
			for _, n := range c.names {
				for _, qt := range []uint16{dns.TypeA, dns.TypeAAAA, dns.TypeSRV, dns.TypeTXT} {
					qs = append(qs, externalQuestion{n + ".k8sext.example.org.", qt})
				}
			}
			for _, n := range []string{"k8sext.example.org.", "nons.example.org.", "web.nons.example.org.", "example.org.",
				"dns.example.org.", "zone.example.org.", "ns2.zone.example.org.", "ns2.dns.example.org."} {
				qs = append(qs, externalQuestion{n, dns.TypeA}, externalQuestion{n, dns.TypeSOA})
			}
			for _, q := range qs {
				sameResponses(t, shardns, coredns, q)
			}
		})
	}
}

// externalQuestion is a question asked of shardns and CoreDNS alike.
type externalQuestion struct {
	name  string
	qtype uint16
}

// serveCorefileText runs `shardns serve --corefile` on text and returns
// its DNS address.
func serveCorefileText(t *testing.T, text string) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), "Corefile")
	if err := os.WriteFile(path, []byte(text), 0o644); err != nil {
		t.Fatal(err)
	}
	return startServe(t, "--corefile", path).addr
}

// sameResponses asks q of both servers over UDP and TCP until their
// responses agree: rcode, the AA, TC and RA flags, and every section
// with its TTLs, the SOA serial left out.
func sameResponses(t *testing.T, shardns, coredns string, q externalQuestion) {
	t.Helper()
	for _, proto := range []string{"udp", "tcp"} {
		testutil.Eventually(t, 10*time.Second, func() error {
			a, err := responseText(shardns, proto, q)
			if err != nil {
				return err
			}
			b, err := responseText(coredns, proto, q)
			if err != nil {
				return err
			}
			if a != b {
				return fmt.Errorf("%s %s over %s:\nshardns %s\ncoredns %s", q.name, dns.TypeToString[q.qtype], proto, a, b)
			}
			return nil
		})
	}
}

// responseText is a response as compared: its rcode, flags and sections,
// each section's records sorted.
func responseText(addr, proto string, q externalQuestion) (string, error) {
	r, err := testutil.Exchange(addr, proto, q.name, q.qtype)
	if err != nil {
		return "", err
	}
	section := func(rrs []dns.RR) string {
		var out []string
		for _, rr := range rrs {
			if rr.Header().Rrtype == dns.TypeOPT {
				continue
			}
			if soa, ok := rr.(*dns.SOA); ok {
				c := *soa
				c.Serial = 0
				rr = &c
			}
			out = append(out, rr.String())
		}
		slices.Sort(out)
		return "[" + strings.Join(out, " | ") + "]"
	}
	return fmt.Sprintf("%s aa=%v tc=%v ra=%v answer=%s ns=%s extra=%s", dns.RcodeToString[r.Rcode], r.Authoritative,
		r.Truncated, r.RecursionAvailable, section(r.Answer), section(r.Ns), section(r.Extra)), nil
}
