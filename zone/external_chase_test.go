package zone

import (
	"strings"
	"testing"

	"github.com/miekg/dns"

	"github.com/shardns/shardns/model"
)

// hostnameCluster adds load balancers with ingress hostnames to
// testCluster: elb has hostnames only, two ports; mixed has a hostname
// before an IP, one port.
func hostnameCluster() []any {
	http := model.Port{Name: "http", Protocol: "TCP", Port: 80}
	https := model.Port{Name: "https", Protocol: "TCP", Port: 443}
	return append(testCluster(),
		&model.Service{Namespace: "ns1", Name: "elb", ClusterIPs: ips("10.0.0.11"), Ports: []model.Port{http, https},
			ExternalHosts: []model.ExternalHost{{Name: "lb.elb.example.net."}}},
		&model.Service{Namespace: "ns1", Name: "mixed", ClusterIPs: ips("10.0.0.12"), Ports: []model.Port{http},
			ExternalIPs: ips("192.0.2.5"), ExternalHosts: []model.ExternalHost{{Name: "a.elb.example.net."}}},
	)
}

// A load balancer's ingress hostname is answered as k8s_external answers
// it: a CNAME per entry (each port's: CoreDNS does not fold them) with
// the cluster TTL, beside the addresses with the external TTL; an SRV
// record per port targets the hostname, with no address of its own in
// the additional section (the query path looks it up).
func TestAnswerExternalHostname(t *testing.T) {
	cfg := externalConfig(false)
	cfg.External.TTL = 60
	v := buildView(t, cfg, true, hostnameCluster())
	cname := "elb.ns1.example.org. 5 IN CNAME lb.elb.example.net."
	runCases(t, v, cfg, []tc{
		{qname: "elb.ns1.example.org.", qtype: A, answer: []string{cname, cname}},
		{qname: "elb.ns1.example.org.", qtype: AAAA, answer: []string{cname, cname}},
		{qname: "elb.ns1.example.org.", qtype: SRV, answer: []string{
			"elb.ns1.example.org. 5 IN SRV 0 50 80 lb.elb.example.net.",
			"elb.ns1.example.org. 5 IN SRV 0 50 443 lb.elb.example.net."}},
		{qname: "_https._tcp.elb.ns1.example.org.", qtype: SRV, answer: []string{
			"_https._tcp.elb.ns1.example.org. 5 IN SRV 0 100 443 lb.elb.example.net."}},
		{qname: "elb.ns1.example.org.", qtype: TXT, soa: eo},
		{qname: "elb.ns1.example.org.", qtype: dns.TypeCNAME, soa: eo},
		{qname: "elb.ns1.example.org.", qtype: PTRt, soa: eo},
		{qname: "mixed.ns1.example.org.", qtype: A, answer: []string{
			"mixed.ns1.example.org. 5 IN CNAME a.elb.example.net.", "mixed.ns1.example.org. 60 IN A 192.0.2.5"}},
		{qname: "mixed.ns1.example.org.", qtype: AAAA, answer: []string{"mixed.ns1.example.org. 5 IN CNAME a.elb.example.net."}},
		{qname: "mixed.ns1.example.org.", qtype: SRV, answer: []string{
			"mixed.ns1.example.org. 5 IN SRV 0 50 80 a.elb.example.net.",
			"mixed.ns1.example.org. 5 IN SRV 0 50 80 mixed.ns1.example.org."},
			extra: []string{"mixed.ns1.example.org. 60 IN A 192.0.2.5"}},
	})
	// The order is the load balancer's: the hostname came first.
	r := Answer(cfg, v, Question{Name: "mixed.ns1.example.org.", Type: A})
	if len(r.Answer) != 2 || r.Answer[0].Header().Rrtype != dns.TypeCNAME {
		t.Errorf("answer %v, want the CNAME before the A record", r.Answer)
	}
}

func TestExternalChases(t *testing.T) {
	cfg := externalConfig(false)
	srv := func(target string) dns.RR { return rr(t, "x.ns1.example.org. 5 IN SRV 0 100 80 "+target) }
	cname := rr(t, "x.ns1.example.org. 5 IN CNAME lb.example.net.")
	cases := []struct {
		name   string
		qname  string
		qtype  uint16
		answer []dns.RR
		want   bool
	}{
		{"a CNAME in an A answer", "x.ns1.example.org.", A, []dns.RR{cname}, true},
		{"a CNAME in an AAAA answer", "x.ns1.example.org.", AAAA, []dns.RR{cname}, true},
		{"addresses only", "x.ns1.example.org.", A, []dns.RR{rr(t, "x.ns1.example.org. 5 IN A 192.0.2.1")}, false},
		{"an SRV target outside the zone", "x.ns1.example.org.", SRV, []dns.RR{srv("lb.example.net.")}, true},
		{"SRV targets inside the zone", "x.ns1.example.org.", SRV, []dns.RR{srv("X.ns1.Example.org.")}, false},
		{"a type k8s_external does not chase", "x.ns1.example.org.", TXT, []dns.RR{cname}, false},
		{"a cluster name", "x.ns1.svc.cluster.local.", A, []dns.RR{cname}, false},
	}
	for _, c := range cases {
		if got := cfg.ExternalChases(c.qname, c.qtype, c.answer); got != c.want {
			t.Errorf("%s: ExternalChases = %v, want %v", c.name, got, c.want)
		}
	}
	if testConfig().ExternalChases("x.ns1.example.org.", A, []dns.RR{cname}) {
		t.Error("a server without external zones chases")
	}
}

// ChaseExternal puts the upstream's records where CoreDNS's k8s_external
// puts them: behind each CNAME of an A or AAAA answer (of the type
// asked), and, for SRV, each outside target's A and AAAA records once in
// the additional section. A lookup that got no answer adds nothing.
func TestChaseExternal(t *testing.T) {
	upstream := map[string]*dns.Msg{
		"lb.example.net./A":      {Answer: []dns.RR{rr(t, "lb.example.net. 300 IN A 203.0.113.1")}},
		"lb.example.net./AAAA":   {Answer: []dns.RR{rr(t, "lb.example.net. 300 IN AAAA 2001:db8::1")}},
		"big.example.net./A":     {MsgHdr: dns.MsgHdr{Truncated: true}, Answer: []dns.RR{rr(t, "big.example.net. 300 IN A 203.0.113.2")}},
		"chain.example.net./A":   {Answer: []dns.RR{rr(t, "chain.example.net. 300 IN CNAME lb.example.net."), rr(t, "lb.example.net. 300 IN A 203.0.113.1")}},
		"silent.example.net./A":  nil,
		"nxdomain.example.net./": nil,
	}
	var asked []string
	lookup := func(name string, qtype uint16) *dns.Msg {
		k := name + "/" + dns.TypeToString[qtype]
		asked = append(asked, k)
		return upstream[k]
	}
	cases := []struct {
		name          string
		qtype         uint16
		answer, extra []string
		wantAnswer    []string
		wantExtra     []string
		wantTC        bool
	}{
		{name: "A behind each CNAME, in order", qtype: A,
			answer: []string{"x. 5 IN CNAME lb.example.net.", "x. 60 IN A 192.0.2.5", "x. 5 IN CNAME chain.example.net."},
			wantAnswer: []string{"x. 5 IN CNAME lb.example.net.", "lb.example.net. 300 IN A 203.0.113.1", "x. 60 IN A 192.0.2.5",
				"x. 5 IN CNAME chain.example.net.", "chain.example.net. 300 IN CNAME lb.example.net.", "lb.example.net. 300 IN A 203.0.113.1"}},
		{name: "AAAA", qtype: AAAA, answer: []string{"x. 5 IN CNAME lb.example.net."},
			wantAnswer: []string{"x. 5 IN CNAME lb.example.net.", "lb.example.net. 300 IN AAAA 2001:db8::1"}},
		{name: "a truncated lookup truncates", qtype: A,
			answer:     []string{"x. 5 IN CNAME big.example.net.", "x. 5 IN CNAME lb.example.net."},
			wantAnswer: []string{"x. 5 IN CNAME big.example.net.", "big.example.net. 300 IN A 203.0.113.2", "x. 5 IN CNAME lb.example.net.", "lb.example.net. 300 IN A 203.0.113.1"},
			wantTC:     true},
		{name: "no answer upstream: the CNAME alone", qtype: A, answer: []string{"x. 5 IN CNAME silent.example.net."},
			wantAnswer: []string{"x. 5 IN CNAME silent.example.net."}},
		{name: "SRV: outside targets' addresses once, after the zone's", qtype: SRV,
			answer: []string{"x.ns1.example.org. 5 IN SRV 0 33 80 lb.example.net.", "x.ns1.example.org. 5 IN SRV 0 33 443 LB.example.net.",
				"x.ns1.example.org. 5 IN SRV 0 33 80 x.ns1.example.org."},
			extra: []string{"x.ns1.example.org. 60 IN A 192.0.2.5"},
			wantAnswer: []string{"x.ns1.example.org. 5 IN SRV 0 33 80 lb.example.net.", "x.ns1.example.org. 5 IN SRV 0 33 443 LB.example.net.",
				"x.ns1.example.org. 5 IN SRV 0 33 80 x.ns1.example.org."},
			wantExtra: []string{"x.ns1.example.org. 60 IN A 192.0.2.5", "lb.example.net. 300 IN A 203.0.113.1", "lb.example.net. 300 IN AAAA 2001:db8::1"}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			answer, extra := rrs(t, c.answer), rrs(t, c.extra)
			before := rrList(answer) + rrList(extra)
			ans, ext, tc := ChaseExternal(eo, c.qtype, answer, extra, lookup)
			if got, want := rrList(ans), rrList(rrs(t, c.wantAnswer)); got != want {
				t.Errorf("answer:\n%s\nwant:\n%s", got, want)
			}
			if got, want := rrList(ext), rrList(rrs(t, c.wantExtra)); got != want {
				t.Errorf("extra:\n%s\nwant:\n%s", got, want)
			}
			if tc != c.wantTC {
				t.Errorf("truncated = %v, want %v", tc, c.wantTC)
			}
			if after := rrList(answer) + rrList(extra); after != before {
				t.Error("the answer given was written: it may be a cached owner's")
			}
		})
	}
	if strings.Count(strings.Join(asked, " "), "lb.example.net./AAAA") != 2 {
		t.Errorf("asked %v: an SRV target's AAAA once, and the AAAA case's once", asked)
	}
}

func rr(t *testing.T, s string) dns.RR {
	t.Helper()
	r, err := dns.NewRR(s)
	if err != nil {
		t.Fatal(err)
	}
	return r
}

func rrs(t *testing.T, ss []string) []dns.RR {
	var out []dns.RR
	for _, s := range ss {
		out = append(out, rr(t, s))
	}
	return out
}

// rrList is rrs in order, one a line.
func rrList(rrs []dns.RR) string {
	var b strings.Builder
	for _, r := range rrs {
		b.WriteString(r.String() + "\n")
	}
	return b.String()
}
