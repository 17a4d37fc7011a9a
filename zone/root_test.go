package zone

import (
	"strings"
	"testing"

	"github.com/miekg/dns"
)

// A kubernetes plugin in a Corefile's "." block without zones of its own
// serves cluster names under the root, as CoreDNS 1.15 does: web.ns.svc.
// has the service's address, cluster.local names and every other name
// are NXDOMAIN, and the SOA is the root's.
func TestRootClusterDomain(t *testing.T) {
	cfg := &Config{Domains: Domains{Cluster: []string{"."}, Reverse: []string{"in-addr.arpa."}}, TTL: 5, Pods: PodsInsecure,
		NSAddrs: ips("10.96.0.10")}
	cfg.Prepare()
	v := NewStatic(cfg, testCluster(), true)
	for _, tc := range []struct {
		name   string
		qtype  uint16
		rcode  int
		answer string // the answer's first record, "" for none
		soa    bool   // a negative answer carries the root's SOA
	}{
		{"svc1.ns1.svc.", dns.TypeA, dns.RcodeSuccess, "svc1.ns1.svc.\t5\tIN\tA\t10.0.0.1", false},
		{"_http._tcp.svc1.ns1.svc.", dns.TypeSRV, dns.RcodeSuccess, "_http._tcp.svc1.ns1.svc.\t5\tIN\tSRV\t0 100 80 svc1.ns1.svc.", false},
		{"web-0.hdls.ns1.svc.", dns.TypeA, dns.RcodeSuccess, "web-0.hdls.ns1.svc.\t5\tIN\tA\t172.16.0.1", false},
		{"10-1-2-3.ns1.pod.", dns.TypeA, dns.RcodeSuccess, "10-1-2-3.ns1.pod.\t5\tIN\tA\t10.1.2.3", false},
		{"1.0.0.10.in-addr.arpa.", dns.TypePTR, dns.RcodeSuccess, "1.0.0.10.in-addr.arpa.\t5\tIN\tPTR\tsvc1.ns1.svc.", false},
		{"svc1.ns1.svc.cluster.local.", dns.TypeA, dns.RcodeNameError, "", true},
		{"www.example.com.", dns.TypeA, dns.RcodeNameError, "", true},
		{"nope.ns1.svc.", dns.TypeA, dns.RcodeNameError, "", true},
		{"ns1.svc.", dns.TypeA, dns.RcodeSuccess, "", true},
		{"svc.", dns.TypeA, dns.RcodeSuccess, "", true},
		{"dns-version.", dns.TypeTXT, dns.RcodeSuccess, "dns-version.\t28800\tIN\tTXT\t\"1.1.0\"", false},
		{".", dns.TypeSOA, dns.RcodeSuccess, ".\t5\tIN\tSOA\tns.dns. hostmaster.", false},
		{"ns.dns.", dns.TypeA, dns.RcodeSuccess, "ns.dns.\t5\tIN\tA\t10.96.0.10", false},
	} {
		r := Answer(cfg, v, Question{Name: tc.name, Type: tc.qtype})
		first := ""
		if len(r.Answer) > 0 {
			first = r.Answer[0].String()
		}
		if r.Rcode != tc.rcode || !strings.HasPrefix(first, tc.answer) || (tc.answer == "") != (first == "") {
			t.Errorf("%s %s: %s %q, want %s %q", tc.name, dns.TypeToString[tc.qtype], dns.RcodeToString[r.Rcode], first,
				dns.RcodeToString[tc.rcode], tc.answer)
		}
		if tc.soa && (len(r.Ns) != 1 || r.Ns[0].Header().Name != ".") {
			t.Errorf("%s: authority %v, want the root's SOA", tc.name, r.Ns)
		}
	}
	if k := ServiceZoneKey("ns1", "."); k != "ns1.svc." {
		t.Errorf("service zone key %q, want ns1.svc.", k)
	}
}
