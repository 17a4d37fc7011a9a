package query

import (
	"net"
	"net/netip"
	"testing"

	"github.com/miekg/dns"

	"github.com/shardns/shardns/zone"
)

func TestAutopath(t *testing.T) {
	h := testHandler(t)
	pods := &zone.PodIndex{}
	pods.Set(netip.MustParseAddr("10.9.0.7"), "ns")
	h.Autopath = pods
	pod := Transport{Client: netip.MustParseAddrPort("10.9.0.7:5000")}
	stranger := Transport{Client: netip.MustParseAddrPort("10.9.0.8:5000")}
	cases := []struct {
		name   string
		qname  string
		t      Transport
		rcode  int
		answer []string
	}{
		{"service in the pod's namespace: as asked", "web.ns.svc.cluster.local.", pod, dns.RcodeSuccess,
			[]string{"web.ns.svc.cluster.local.\t5\tIN\tA\t10.0.0.1"}},
		{"second search domain", "web.ns.ns.svc.cluster.local.", pod, dns.RcodeSuccess, []string{
			"web.ns.ns.svc.cluster.local.\t5\tIN\tCNAME\tweb.ns.svc.cluster.local.",
			"web.ns.svc.cluster.local.\t5\tIN\tA\t10.0.0.1",
		}},
		{"not a pod: the NXDOMAIN chain", "web.ns.ns.svc.cluster.local.", stranger, dns.RcodeNameError, nil},
		{"nothing anywhere, no upstream", "nothing.ns.svc.cluster.local.", pod, dns.RcodeRefused, nil},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			m := query(c.qname, dns.TypeA)
			r := serve(t, h, pack(t, m), c.t)
			if r.Rcode != c.rcode {
				t.Fatalf("rcode %s, want %s", dns.RcodeToString[r.Rcode], dns.RcodeToString[c.rcode])
			}
			if len(r.Answer) != len(c.answer) {
				t.Fatalf("answer %v, want %v", r.Answer, c.answer)
			}
			for i, rr := range r.Answer {
				if rr.String() != c.answer[i] {
					t.Fatalf("answer[%d] = %q, want %q", i, rr.String(), c.answer[i])
				}
			}
			if r.Question[0].Name != c.qname {
				t.Fatalf("question %v, want %s", r.Question, c.qname)
			}
		})
	}
}

func TestLoadBalanceShufflesAddressesOnly(t *testing.T) {
	h := testHandler(t)
	h.LoadBalance = true
	seen := map[string]bool{}
	for range 50 {
		r := serve(t, h, pack(t, query("big.ns.svc.cluster.local.", dns.TypeA)), Transport{TCP: true})
		if len(r.Answer) != 300 {
			t.Fatalf("%d answers, want 300", len(r.Answer))
		}
		seen[r.Answer[0].(*dns.A).A.String()] = true
	}
	if len(seen) < 2 {
		t.Fatal("first address never changed over 50 answers")
	}
	cn := shuffled([]dns.RR{
		&dns.CNAME{Hdr: dns.RR_Header{Name: "a.", Rrtype: dns.TypeCNAME}, Target: "b."},
		&dns.A{Hdr: dns.RR_Header{Name: "b.", Rrtype: dns.TypeA}, A: net.ParseIP("1.1.1.1")},
		&dns.A{Hdr: dns.RR_Header{Name: "b.", Rrtype: dns.TypeA}, A: net.ParseIP("2.2.2.2")},
	})
	if cn[0].Header().Rrtype != dns.TypeCNAME {
		t.Fatalf("CNAME moved: %v", cn)
	}
}
