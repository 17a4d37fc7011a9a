package query

import (
	"context"
	"net/netip"
	"slices"
	"testing"
	"time"

	"github.com/miekg/dns"

	"github.com/shardns/shardns/cache"
	"github.com/shardns/shardns/model"
	"github.com/shardns/shardns/zone"
)

// externalHandler serves cluster.local and the k8s_external zone
// example.org, which 127.0.0.1 may transfer, from a view where namespace
// ns (movingZone) is held by the replicas in order, or here when none.
func externalHandler(t *testing.T, r *replicas, order ...string) (*Handler, *zone.Static) {
	t.Helper()
	cfg := &zone.Config{Domains: zone.Domains{Cluster: []string{"cluster.local."}, External: []string{"example.org."}, ExternalApex: "dns"},
		TTL: 5, NSAddrs: []netip.Addr{netip.MustParseAddr("10.96.0.10")}}
	cfg.External = &zone.External{Zones: cfg.Domains.External, Apex: "dns", TTL: 5,
		TransferTo: []netip.Prefix{netip.MustParsePrefix("127.0.0.1/32")}}
	cfg.Prepare()
	http := model.Port{Name: "http", Protocol: "TCP", Port: 80}
	objs := []any{&model.Namespace{Name: "ns"}, &model.Namespace{Name: "other"},
		&model.Service{Namespace: "ns", Name: "lb", ClusterIPs: []netip.Addr{netip.MustParseAddr("10.0.0.1")}, Ports: []model.Port{http},
			ExternalIPs: []netip.Addr{netip.MustParseAddr("192.0.2.1")}},
		&model.Service{Namespace: "other", Name: "web", ClusterIPs: []netip.Addr{netip.MustParseAddr("10.0.0.2")}, Ports: []model.Port{http},
			ExternalIPs: []netip.Addr{netip.MustParseAddr("192.0.2.2")}},
	}
	static := zone.NewStatic(cfg, objs, true)
	v := &movingReader{Static: static}
	v.here.Store(len(order) == 0)
	v.order.Store(&order)
	h := &Handler{Config: cfg, Zones: v}
	if r != nil {
		h.Cluster = &Cluster{Ask: r.ask, Cache: cache.New(cache.Config{Size: 100, SuccessMaxTTL: time.Minute}),
			Timeout: 100 * time.Millisecond, Attempts: 3, MaxInFlight: 10, Now: time.Now}
	}
	return h, static
}

func axfr(qtype uint16, serial uint32) *dns.Msg {
	m := query("example.org.", qtype)
	if qtype == dns.TypeIXFR {
		m.Ns = []dns.RR{&dns.SOA{Hdr: dns.RR_Header{Name: "example.org.", Rrtype: dns.TypeSOA, Class: dns.ClassINET}, Ns: "ns1.dns.example.org.", Mbox: "hostmaster.dns.example.org.", Serial: serial}}
	}
	return m
}

var wantExternalZone = []string{
	"example.org.\t5\tIN\tSOA\tns1.dns.example.org. hostmaster.dns.example.org. 1 7200 1800 86400 5",
	"example.org.\t5\tIN\tNS\tns1.dns.example.org.",
	"ns1.dns.example.org.\t5\tIN\tA\t10.96.0.10",
	"lb.ns.example.org.\t5\tIN\tA\t192.0.2.1",
	"lb.ns.example.org.\t5\tIN\tSRV\t0 100 80 lb.ns.example.org.",
	"_http._tcp.lb.ns.example.org.\t5\tIN\tSRV\t0 100 80 lb.ns.example.org.",
	"web.other.example.org.\t5\tIN\tA\t192.0.2.2",
	"web.other.example.org.\t5\tIN\tSRV\t0 100 80 web.other.example.org.",
	"_http._tcp.web.other.example.org.\t5\tIN\tSRV\t0 100 80 web.other.example.org.",
	"example.org.\t5\tIN\tSOA\tns1.dns.example.org. hostmaster.dns.example.org. 1 7200 1800 86400 5",
}

// answerText is the answer records of msgs, in order.
func answerText(msgs []*dns.Msg) []string {
	var out []string
	for _, m := range msgs {
		for _, rr := range m.Answer {
			out = append(out, rr.String())
		}
	}
	return out
}

// A replica holding every namespace transfers the external zone to the
// clients transferTo allows, over TCP; an IXFR that is up to date gets
// the SOA alone, an older one the whole zone.
func TestExternalTransferHeld(t *testing.T) {
	h, _ := externalHandler(t, nil)
	tcp := func(c netip.AddrPort) Transport { return Transport{TCP: true, Client: c, Stream: &stream{}} }
	tests := []struct {
		name   string
		req    *dns.Msg
		tr     Transport
		rcode  int
		answer []string
	}{
		{name: "AXFR", req: axfr(dns.TypeAXFR, 0), tr: tcp(loopback), answer: wantExternalZone},
		{name: "IXFR up to date", req: axfr(dns.TypeIXFR, 1), tr: tcp(loopback), answer: wantExternalZone[:1]},
		{name: "IXFR behind", req: axfr(dns.TypeIXFR, 0), tr: tcp(loopback), answer: wantExternalZone},
		{name: "not in transferTo", req: axfr(dns.TypeAXFR, 0), tr: tcp(other), rcode: dns.RcodeRefused},
		{name: "over UDP", req: axfr(dns.TypeAXFR, 0), tr: Transport{Client: loopback}, rcode: dns.RcodeRefused},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			msgs := transferOf(t, h, tt.req, tt.tr)
			if rc := msgs[len(msgs)-1].Rcode; rc != tt.rcode {
				t.Fatalf("rcode %s, want %s", dns.RcodeToString[rc], dns.RcodeToString[tt.rcode])
			}
			if got := answerText(msgs); !slices.Equal(got, tt.answer) {
				t.Fatalf("records:\n%q\nwant\n%q", got, tt.answer)
			}
		})
	}
}

// A namespace held elsewhere is asked of its owners, and its part goes
// where the replica holding everything would put it; when no owner gives
// it, the client gets SERVFAIL and no records.
func TestExternalTransferAsksOwners(t *testing.T) {
	tests := []struct {
		name   string
		owners map[string]func(ctx context.Context) (*dns.Msg, error)
		rcode  int
		answer []string
	}{
		{name: "the second owner gives it", rcode: dns.RcodeSuccess, answer: wantExternalZone,
			owners: map[string]func(ctx context.Context) (*dns.Msg, error){"a": notServed}},
		{name: "no owner answers", rcode: dns.RcodeServerFailure,
			owners: map[string]func(ctx context.Context) (*dns.Msg, error){"a": silent, "b": silent}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := &replicas{asked: map[string]int{}, answer: tt.owners}
			h, whole := externalHandler(t, r, "a", "b")
			if r.answer["b"] == nil {
				r.answer["b"] = func(context.Context) (*dns.Msg, error) {
					rrs, _ := zone.ExternalPartAt(h.Config, whole, zone.ExternalPartName("ns", "example.org."))
					m := new(dns.Msg)
					m.SetQuestion("ns.example.org.", dns.TypeAXFR)
					m.Answer = rrs
					return m, nil
				}
			}
			late, s := make(lateAnswers, 1), &stream{}
			if b := h.Serve(pack(t, axfr(dns.TypeAXFR, 0)), Transport{TCP: true, Client: loopback, Stream: s, Late: late}, nil); b != nil {
				t.Fatal("answered before asking the owners")
			}
			var last []byte
			select {
			case last = <-late:
			case <-time.After(10 * time.Second):
				t.Fatal("no answer")
			}
			var msgs []*dns.Msg
			for _, w := range append(s.msgs, last) {
				m := new(dns.Msg)
				if err := m.Unpack(w); err != nil {
					t.Fatal(err)
				}
				msgs = append(msgs, m)
			}
			if rc := msgs[len(msgs)-1].Rcode; rc != tt.rcode {
				t.Fatalf("rcode %s, want %s", dns.RcodeToString[rc], dns.RcodeToString[tt.rcode])
			}
			if got := answerText(msgs); !slices.Equal(got, tt.answer) {
				t.Fatalf("records:\n%q\nwant\n%q", got, tt.answer)
			}
		})
	}
}
