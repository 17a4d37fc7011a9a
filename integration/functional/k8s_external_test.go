package functional

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

	"github.com/shardns/shardns/integration/harness"
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
	harness.CreateNamespace(t, c, ns, nil)
	web := harness.ClusterIPService(ns, "web", corev1.ServicePort{Name: "http", Port: 80, Protocol: corev1.ProtocolTCP},
		corev1.ServicePort{Name: "https", Port: 443, Protocol: corev1.ProtocolTCP})
	web.Spec.ExternalIPs = []string{"192.0.2.10", "2001:db8::10"}
	harness.CreateService(t, c, web)
	lb := harness.ClusterIPService(ns, "lb")
	lb.Spec.Type = corev1.ServiceTypeLoadBalancer
	lb = harness.CreateService(t, c, lb)
	lb.Status.LoadBalancer.Ingress = []corev1.LoadBalancerIngress{{IP: "198.51.100.20"}, {IP: "198.51.100.21"}}
	if _, err := c.CoreV1().Services(ns).UpdateStatus(ctx, lb, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	harness.CreateService(t, c, harness.HeadlessService(ns, "db"))
	harness.CreateEndpointSlice(t, c, ns, "db", "db-v4", discoveryv1.AddressTypeIPv4,
		harness.Endpoint{IP: "10.244.9.10", Hostname: "db-0"}, harness.Endpoint{IP: "10.244.9.11"}, harness.Endpoint{IP: "10.244.9.12", NotReady: true})
	harness.CreateService(t, c, harness.ClusterIPService(ns, "plain"))
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
		want          []harness.Question
	}{
		{
			name:  "defaults",
			names: []string{"web", "lb", "db", "plain", "none", "x.web", "db-0.db", "_https._tcp.web", "_ftp._tcp.web", "_http._tcp.db", "a.b.c.web"},
			want: []harness.Question{
				{Name: "web.k8sext.example.org.", Qtype: dns.TypeA, Rcode: dns.RcodeSuccess, Answer: []string{"web.k8sext.example.org.\t5\tIN\tA\t192.0.2.10"}},
				{Name: "web.k8sext.example.org.", Qtype: dns.TypeAAAA, Rcode: dns.RcodeSuccess, Answer: []string{"web.k8sext.example.org.\t5\tIN\tAAAA\t2001:db8::10"}},
				{Name: "lb.k8sext.example.org.", Qtype: dns.TypeA, Rcode: dns.RcodeSuccess, Answer: []string{
					"lb.k8sext.example.org.\t5\tIN\tA\t198.51.100.20", "lb.k8sext.example.org.\t5\tIN\tA\t198.51.100.21"}},
				{Name: "_https._tcp.web.k8sext.example.org.", Qtype: dns.TypeSRV, Rcode: dns.RcodeSuccess, Answer: []string{
					"_https._tcp.web.k8sext.example.org.\t5\tIN\tSRV\t0 50 443 web.k8sext.example.org."}},
				{Name: "db.k8sext.example.org.", Qtype: dns.TypeA, Rcode: dns.RcodeNameError, Answer: nil},
				{Name: "plain.k8sext.example.org.", Qtype: dns.TypeA, Rcode: dns.RcodeNameError, Answer: nil},
			},
		},
		{
			name:    "headless, apex and ttl",
			options: "{\n        headless\n        apex zone\n        ttl 60\n    }",
			names:   []string{"web", "lb", "db", "plain", "db-0.db", "10-244-9-11.db", "10-244-9-12.db", "_http._tcp.db", "_http._tcp.lb", "x.plain"},
			want: []harness.Question{
				{Name: "db.k8sext.example.org.", Qtype: dns.TypeA, Rcode: dns.RcodeSuccess, Answer: []string{
					"db.k8sext.example.org.\t60\tIN\tA\t10.244.9.10", "db.k8sext.example.org.\t60\tIN\tA\t10.244.9.11"}},
				{Name: "db-0.db.k8sext.example.org.", Qtype: dns.TypeA, Rcode: dns.RcodeSuccess, Answer: []string{"db-0.db.k8sext.example.org.\t60\tIN\tA\t10.244.9.10"}},
				{Name: "_http._tcp.db.k8sext.example.org.", Qtype: dns.TypeSRV, Rcode: dns.RcodeSuccess, Answer: []string{
					"_http._tcp.db.k8sext.example.org.\t5\tIN\tSRV\t0 50 80 db-0.db.k8sext.example.org.",
					"_http._tcp.db.k8sext.example.org.\t5\tIN\tSRV\t0 50 80 10-244-9-11.db.k8sext.example.org."}},
				{Name: "web.k8sext.example.org.", Qtype: dns.TypeA, Rcode: dns.RcodeSuccess, Answer: []string{"web.k8sext.example.org.\t60\tIN\tA\t192.0.2.10"}},
			},
		},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			vars := map[string]string{"kubeconfig": cp.Kubeconfig, "options": c.options}
			shardns := serveCorefileText(t, harness.RenderCorefile(t, k8sExternalCorefile, vars).Text)
			coreRun := harness.RenderCorefile(t, k8sExternalCorefile, vars)
			coredns := harness.StartCoreDNS(t, harness.CoreDNSOptions{Corefile: coreRun.Text, Addr: coreRun.Addrs["dns"], Probe: "web.k8sext.example.org."})
			// What a user sees first, then every other question asked of
			// both and compared whole.
			harness.AskBoth(t, shardns, coredns, c.want)
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
	return harness.Start(t, harness.Options{Args: []string{"--corefile", path}}).Addr
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
	return msgText(r, true), nil
}

// msgText is responseText of r, with the TTLs or without them (0): a
// replica relaying an owner's answer from its cache counts them down.
func msgText(r *dns.Msg, ttls bool) string {
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
			if !ttls {
				rr = dns.Copy(rr)
				rr.Header().Ttl = 0
			}
			out = append(out, rr.String())
		}
		slices.Sort(out)
		return "[" + strings.Join(out, " | ") + "]"
	}
	return fmt.Sprintf("%s aa=%v tc=%v ra=%v answer=%s ns=%s extra=%s", dns.RcodeToString[r.Rcode], r.Authoritative,
		r.Truncated, r.RecursionAvailable, section(r.Answer), section(r.Ns), section(r.Extra))
}

// The k8s_external names of a cluster of three replicas, replication
// factor 1, get the same, right answers from every replica over UDP and
// TCP: the owner of their namespace answers them from its snapshot, the
// two others ask it. An AXFR of the zone asked of each replica gives the
// same records, every namespace's part among them. When the owner of one
// namespace is killed, the two
// left answer that namespace's names again, names never asked before
// among them, which no cache on the way can answer.
func TestK8sExternalSharded(t *testing.T) {
	cp := kubeapi.Shared(t)
	var nss []string
	questions := map[string][]harness.Question{} // by namespace
	for i := range 6 {
		ns := fmt.Sprintf("extshard%d", i)
		nss = append(nss, ns)
		questions[ns] = mkExternalNamespace(t, cp.Client, ns, i)
	}
	var rs []*harness.Replica
	byName := map[string]*harness.Replica{}
	for i := range 3 {
		var seeds []string
		if i > 0 {
			seeds = []string{rs[0].Gossip}
		}
		name := fmt.Sprintf("xr%d", i)
		r := harness.StartReplica(t, cp, harness.ReplicaOptions{Name: name, Seeds: seeds, RF: 1, Cluster: harness.FastGossip, Kube: "external: {zones: [example.org], transferTo: ['127.0.0.1']}"})

		rs = append(rs, r)
		byName[name] = r
	}
	harness.Settled(t, rs, 3)
	owners := harness.ExternalOwners(t, rs, nss)
	spread := map[string]bool{}
	for _, o := range owners {
		spread[o] = true
	}
	t.Logf("owners: %v", owners)
	if len(spread) < 2 {
		t.Fatalf("one replica owns every namespace (%v): the test checks one owner only", owners)
	}
	for _, ns := range nss {
		if err := sameExternalAnswers(harness.Addrs(rs), questions[ns]); err != nil {
			t.Fatal(err)
		}
	}
	sameExternalTransfers(t, harness.Addrs(rs), questions)

	ns := nss[0]
	victim := byName[owners[ns]]
	var survivors []*harness.Replica
	for _, r := range rs {
		if r != victim {
			survivors = append(survivors, r)
		}
	}
	victim.Cmd.Process.Kill()
	// Each attempt asks names of the namespace no replica was asked
	// before: a name below the service, which answers as the service, and
	// one that does not exist. Only a live owner of the namespace can
	// answer them.
	attempt := 0
	testutil.Eventually(t, 60*time.Second, func() error {
		attempt++
		web := questions[ns][0] // web's A, as mkExternalNamespace lists it first
		fresh := fmt.Sprintf("again%d.web.%s.example.org.", attempt, ns)
		var answer []string
		for _, rr := range web.Answer {
			answer = append(answer, strings.Replace(rr, web.Name, fresh, 1))
		}
		qs := append(slices.Clone(questions[ns]),
			harness.Question{Name: fresh, Qtype: dns.TypeA, Rcode: dns.RcodeSuccess, Answer: answer},
			harness.Question{Name: fmt.Sprintf("gone%d.%s.example.org.", attempt, ns), Qtype: dns.TypeA, Rcode: dns.RcodeNameError, Answer: nil})
		for _, other := range nss[1:] {
			qs = append(qs, questions[other]...)
		}
		return sameExternalAnswers(harness.Addrs(survivors), qs)
	})
	t.Logf("%s's names answered by the two replicas left after %d attempts", ns, attempt)
}

// mkExternalNamespace creates namespace ns, the i-th of the test, with a
// Service web that has an external IP and two ports and a LoadBalancer
// lb whose status has two ingress IPs, each namespace's addresses its
// own, and returns the questions of its names with their answers: A and
// SRV of web, A of lb, and a name that does not exist.
func mkExternalNamespace(t *testing.T, c kubernetes.Interface, ns string, i int) []harness.Question {
	t.Helper()
	harness.CreateNamespace(t, c, ns, nil)
	web := harness.ClusterIPService(ns, "web", corev1.ServicePort{Name: "http", Port: 80, Protocol: corev1.ProtocolTCP},
		corev1.ServicePort{Name: "https", Port: 443, Protocol: corev1.ProtocolTCP})
	webIP := fmt.Sprintf("192.0.2.%d", 10+i)
	web.Spec.ExternalIPs = []string{webIP}
	harness.CreateService(t, c, web)
	lb := harness.ClusterIPService(ns, "lb")
	lb.Spec.Type = corev1.ServiceTypeLoadBalancer
	lb = harness.CreateService(t, c, lb)
	lbIPs := []string{fmt.Sprintf("198.51.100.%d", 10+i), fmt.Sprintf("198.51.100.%d", 110+i)}
	for _, ip := range lbIPs {
		lb.Status.LoadBalancer.Ingress = append(lb.Status.LoadBalancer.Ingress, corev1.LoadBalancerIngress{IP: ip})
	}
	if _, err := c.CoreV1().Services(ns).UpdateStatus(ctx, lb, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	// kubernetes.external.ttl and kubernetes.ttl are both 5 by default.
	webName, lbName := "web."+ns+".example.org.", "lb."+ns+".example.org."
	return []harness.Question{
		{Name: webName, Qtype: dns.TypeA, Rcode: dns.RcodeSuccess, Answer: []string{webName + "\t5\tIN\tA\t" + webIP}},
		{Name: webName, Qtype: dns.TypeSRV, Rcode: dns.RcodeSuccess, Answer: []string{
			webName + "\t5\tIN\tSRV\t0 50 80 " + webName, webName + "\t5\tIN\tSRV\t0 50 443 " + webName}},
		{Name: lbName, Qtype: dns.TypeA, Rcode: dns.RcodeSuccess, Answer: []string{lbName + "\t5\tIN\tA\t" + lbIPs[0], lbName + "\t5\tIN\tA\t" + lbIPs[1]}},
		{Name: "absent." + ns + ".example.org.", Qtype: dns.TypeA, Rcode: dns.RcodeNameError, Answer: nil},
	}
}

// sameExternalAnswers asks every question of every address over UDP and
// TCP, and wants its answer from each, and the same response from all:
// rcode, flags and sections (TTLs aside, which a replica relaying the
// owner's cached answer counts down).
func sameExternalAnswers(addrs []string, qs []harness.Question) error {
	for _, q := range qs {
		for _, proto := range []string{"udp", "tcp"} {
			var first, firstAddr string
			for _, addr := range addrs {
				r, err := testutil.Exchange(addr, proto, q.Name, q.Qtype)
				if err != nil {
					return err
				}
				if err := harness.ResponseMatches(r, addr, proto, q); err != nil {
					return err
				}
				text := msgText(r, false)
				if first == "" {
					first, firstAddr = text, addr
				} else if text != first {
					return fmt.Errorf("%s %s over %s:\n%s: %s\n%s: %s", q.Name, dns.TypeToString[q.Qtype], proto,
						firstAddr, first, addr, text)
				}
			}
		}
	}
	return nil
}
