package query

import (
	"maps"
	"net/netip"
	"testing"

	"github.com/miekg/dns"

	"github.com/shardns/shardns/expression"
	"github.com/shardns/shardns/hosts"
	"github.com/shardns/shardns/metrics"
)

// viewHandler is CoreDNS's view README example: test. answers from the
// hosts of the first view whose client CIDR holds, else from the default
// block's.
func viewHandler(t testing.TB) *Handler {
	h := testHandler(t)
	h.Hosts = hostsFor(t, hosts.Options{}, "3.3.3.3 test")
	for _, v := range []struct{ name, expr, host string }{
		{"example1", "incidr(client_ip(), '127.0.0.0/24')", "1.1.1.1 test"},
		{"example2", "incidr(client_ip(), '192.168.0.0/16')", "2.2.2.2 test"},
		{"v6", "incidr(client_ip(), '2001:0DB8::/32')", "2001:db8::1 test"},
	} {
		c, err := expression.Compile(v.expr)
		if err != nil {
			t.Fatal(err)
		}
		vh := testHandler(t)
		vh.Hosts = hostsFor(t, hosts.Options{}, v.host)
		h.Views = append(h.Views, View{Name: v.name, Conditions: []*expression.Condition{c}, Handler: vh})
	}
	return h
}

func TestViewsPickTheFirstThatHolds(t *testing.T) {
	h := viewHandler(t)
	cases := []struct {
		client string
		qtype  uint16
		want   string // the answer's address; "" for an empty answer
	}{
		{"127.0.0.2:4000", dns.TypeA, "1.1.1.1"},
		{"[::ffff:127.0.0.9]:4000", dns.TypeA, "1.1.1.1"},
		{"192.168.3.4:4000", dns.TypeA, "2.2.2.2"},
		{"[2001:db8::7]:4000", dns.TypeAAAA, "2001:db8::1"},
		{"[2001:db8::7]:4000", dns.TypeA, ""}, // the view's hosts have no A: NODATA, not the default's
		{"10.0.0.1:4000", dns.TypeA, "3.3.3.3"},
	}
	for _, c := range cases {
		for _, tcp := range []bool{false, true} {
			tr := Transport{Client: netip.MustParseAddrPort(c.client), TCP: tcp}
			r := serve(t, h, pack(t, query("test.", c.qtype)), tr)
			got := ""
			if len(r.Answer) == 1 {
				switch rr := r.Answer[0].(type) {
				case *dns.A:
					got = rr.A.String()
				case *dns.AAAA:
					got = rr.AAAA.String()
				}
			}
			if r.Rcode != dns.RcodeSuccess || got != c.want || len(r.Answer) > 1 {
				t.Errorf("%s %s tcp=%v: %s %v, want NOERROR %q", c.client, dns.TypeToString[c.qtype], tcp,
					dns.RcodeToString[r.Rcode], r.Answer, c.want)
			}
		}
	}
}

// A request that does not unpack is answered by the default plane as
// it would be without views.
func TestViewsMalformedRequest(t *testing.T) {
	h := viewHandler(t)
	req := pack(t, query("test.", dns.TypeA))
	req = req[:len(req)-2]
	tr := Transport{Client: netip.MustParseAddrPort("127.0.0.2:4000")}
	got := serve(t, h, req, tr)
	h.Views = nil
	want := serve(t, h, req, tr)
	if got.String() != want.String() {
		t.Errorf("with views:\n%v\nwithout:\n%v", got, want)
	}
}

// BenchmarkServeWithViews is BenchmarkServe with a client the first of
// three views holds for: the cost of picking the view.
func BenchmarkServeWithViews(b *testing.B) {
	h := viewHandler(b)
	req, _ := query("web.ns.svc.cluster.local.", dns.TypeA).Pack()
	tr := Transport{Client: netip.MustParseAddrPort("127.0.0.2:4000")}
	out := make([]byte, 0, 512)
	b.ReportAllocs()
	for b.Loop() {
		out = h.Serve(req, tr, out[:0])
	}
}

// A query a view answers is counted with the view's name in the view
// label, as CoreDNS's metrics plugin counts it; the others with none.
func TestViewsLabelTheirMetrics(t *testing.T) {
	h := viewHandler(t)
	reg, m := metrics.New("test")
	h.Metrics = m
	for i := range h.Views {
		h.Views[i].Handler.Metrics = m
		h.Views[i].Handler.ViewName = h.Views[i].Name
	}
	for _, client := range []string{"127.0.0.2:4000", "127.0.0.3:4000", "192.168.3.4:4000", "10.0.0.1:4000"} {
		serve(t, h, pack(t, query("test.", dns.TypeA)), Transport{Client: netip.MustParseAddrPort(client)})
	}
	families, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]float64{}
	for _, f := range families {
		if f.GetName() != "shardns_dns_requests_total" && f.GetName() != "shardns_dns_responses_total" {
			continue
		}
		for _, s := range f.GetMetric() {
			for _, l := range s.GetLabel() {
				if l.GetName() == "view" {
					got[f.GetName()+"{view="+l.GetValue()+"}"] += s.GetCounter().GetValue()
				}
			}
		}
	}
	want := map[string]float64{
		"shardns_dns_requests_total{view=example1}": 2, "shardns_dns_requests_total{view=example2}": 1, "shardns_dns_requests_total{view=}": 1,
		"shardns_dns_responses_total{view=example1}": 2, "shardns_dns_responses_total{view=example2}": 1, "shardns_dns_responses_total{view=}": 1,
	}
	if !maps.Equal(got, want) {
		t.Fatalf("requests and responses by view: %v, want %v", got, want)
	}
}
