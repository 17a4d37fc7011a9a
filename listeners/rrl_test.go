package listeners

import (
	"net/netip"
	"testing"
	"time"

	"github.com/miekg/dns"
)

// response packs a response to name/qtype with rcode and the records
// given as zone-file strings, by section.
func response(t testing.TB, name string, qtype uint16, rcode int, aa bool, answer, ns []string) []byte {
	t.Helper()
	q := new(dns.Msg)
	q.SetQuestion(name, qtype)
	m := new(dns.Msg)
	m.SetRcode(q, rcode)
	m.Authoritative = aa
	for _, s := range answer {
		m.Answer = append(m.Answer, mustRR(t, s))
	}
	for _, s := range ns {
		m.Ns = append(m.Ns, mustRR(t, s))
	}
	m.Compress = true
	b, err := m.Pack()
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func mustRR(t testing.TB, s string) dns.RR {
	rr, err := dns.NewRR(s)
	if err != nil {
		t.Fatal(err)
	}
	return rr
}

const soa = "cluster.local. 5 IN SOA ns.dns.cluster.local. hostmaster.cluster.local. 1 7200 1800 86400 5"

func TestClassify(t *testing.T) {
	nx := func(name string) []byte {
		return response(t, name, dns.TypeA, dns.RcodeNameError, true, nil, []string{soa})
	}
	cases := []struct {
		name      string
		resp      []byte
		class     RRLClass
		sameAs    []byte // nil: no other response to compare keys with
		sameKey   bool
		sameClass bool
	}{
		{name: "answer", resp: response(t, "web.ns.svc.cluster.local.", dns.TypeA, 0, true, []string{"web.ns.svc.cluster.local. 5 IN A 10.0.0.1"}, nil), class: RRLAnswer},
		{name: "answers to names differing in case share a key",
			resp:   response(t, "WEB.ns.svc.cluster.local.", dns.TypeA, 0, true, []string{"WEB.ns.svc.cluster.local. 5 IN A 10.0.0.1"}, nil),
			sameAs: response(t, "web.ns.svc.cluster.local.", dns.TypeA, 0, true, []string{"web.ns.svc.cluster.local. 5 IN A 10.0.0.1"}, nil),
			class:  RRLAnswer, sameKey: true},
		{name: "answers of another type do not",
			resp:   response(t, "web.ns.svc.cluster.local.", dns.TypeAAAA, 0, true, []string{"web.ns.svc.cluster.local. 5 IN AAAA ::1"}, nil),
			sameAs: response(t, "web.ns.svc.cluster.local.", dns.TypeA, 0, true, []string{"web.ns.svc.cluster.local. 5 IN A 10.0.0.1"}, nil),
			class:  RRLAnswer, sameKey: false},
		{name: "nodata", resp: response(t, "web.ns.svc.cluster.local.", dns.TypeMX, 0, true, nil, []string{soa}), class: RRLNodata},
		{name: "random names of one zone share the NXDOMAIN key (water torture)",
			resp: nx("x1q9.ns.svc.cluster.local."), sameAs: nx("a.b.c.cluster.local."), class: RRLNXDomain, sameKey: true},
		{name: "NXDOMAIN without SOA is keyed by the name",
			resp:   response(t, "x.example.", dns.TypeA, dns.RcodeNameError, false, nil, nil),
			sameAs: response(t, "y.example.", dns.TypeA, dns.RcodeNameError, false, nil, nil), class: RRLNXDomain, sameKey: false},
		{name: "referral", resp: response(t, "a.sub.example.", dns.TypeA, 0, false, nil, []string{"sub.example. 5 IN NS ns.sub.example."}), class: RRLReferral},
		{name: "errors share one key whatever the name",
			resp:   response(t, "a.example.", dns.TypeA, dns.RcodeRefused, false, nil, nil),
			sameAs: response(t, "b.example.", dns.TypeANY, dns.RcodeServerFailure, false, nil, nil), class: RRLError, sameKey: true},
		{name: "a runt", resp: []byte{1, 2, 3}, class: RRLError},
		{name: "a cut question", resp: response(t, "web.ns.svc.cluster.local.", dns.TypeA, 0, true, nil, nil)[:20], class: RRLError},
		{name: "a compression loop", resp: append([]byte{0, 1, 0x80, 0, 0, 1, 0, 1, 0, 0, 0, 0}, 0xc0, 12, 0, 1, 0, 1), class: RRLError},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			class, key := classify(c.resp, 7)
			if class != c.class {
				t.Fatalf("class %v, want %v", class, c.class)
			}
			if c.sameAs == nil {
				return
			}
			_, other := classify(c.sameAs, 7)
			if (key == other) != c.sameKey {
				t.Fatalf("keys %x and %x: same %v, want %v", key, other, key == other, c.sameKey)
			}
		})
	}
}

func newTestRRL(cfg RRLConfig) (*RRL, *fakeClock) {
	clock := &fakeClock{}
	clock.ns.Store(time.Unix(1e9, 0).UnixNano())
	r := NewRRL(clock.now)
	if cfg.IPv4PrefixLength == 0 {
		cfg.IPv4PrefixLength, cfg.IPv6PrefixLength = 24, 56
	}
	if cfg.MaxTableSize == 0 {
		cfg.MaxTableSize = 1024
	}
	r.Configure(cfg)
	return r, clock
}

// decisions counts the actions of n responses resp to client.
func decisions(r *RRL, client string, resp []byte, n int) map[RRLAction]int {
	got := map[RRLAction]int{}
	for range n {
		_, a := r.Decide(netip.MustParseAddr(client), resp)
		got[a]++
	}
	return got
}

func TestRRLDecide(t *testing.T) {
	answer := response(t, "web.ns.svc.cluster.local.", dns.TypeA, 0, true, []string{"web.ns.svc.cluster.local. 5 IN A 10.0.0.1"}, nil)
	rates := func(answer, nxdomain int) (p [NumRRLClasses]int) {
		p[RRLAnswer], p[RRLNXDomain] = answer, nxdomain
		return p
	}
	cases := []struct {
		name string
		cfg  RRLConfig
		n    int
		want map[RRLAction]int
	}{
		{"within the rate", RRLConfig{PerSecond: rates(10, 0), Slip: 2}, 10, map[RRLAction]int{RRLSend: 10}},
		{"slip 2: every second limited one slips", RRLConfig{PerSecond: rates(10, 0), Slip: 2}, 20, map[RRLAction]int{RRLSend: 10, RRLSlip: 5, RRLDrop: 5}},
		{"slip 1: all slip", RRLConfig{PerSecond: rates(10, 0), Slip: 1}, 20, map[RRLAction]int{RRLSend: 10, RRLSlip: 10}},
		{"slip 0: all drop", RRLConfig{PerSecond: rates(10, 0)}, 20, map[RRLAction]int{RRLSend: 10, RRLDrop: 10}},
		{"report only sends", RRLConfig{PerSecond: rates(10, 0), ReportOnly: true, Slip: 2}, 20, map[RRLAction]int{RRLSend: 10, RRLReport: 10}},
		{"a class without a rate is not limited", RRLConfig{PerSecond: rates(0, 10)}, 50, map[RRLAction]int{RRLSend: 50}},
		{"off", RRLConfig{}, 50, map[RRLAction]int{RRLSend: 50}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			r, _ := newTestRRL(c.cfg)
			got := decisions(r, "192.0.2.1", answer, c.n)
			for a := range NumRRLActions {
				if got[a] != c.want[a] {
					t.Fatalf("got %v, want %v", got, c.want)
				}
			}
		})
	}
}

// Clients of one prefix share an account; other prefixes have their own.
func TestRRLPrefixes(t *testing.T) {
	var rates [NumRRLClasses]int
	rates[RRLAnswer] = 5
	r, _ := newTestRRL(RRLConfig{PerSecond: rates})
	answer := response(t, "web.ns.svc.cluster.local.", dns.TypeA, 0, true, []string{"web.ns.svc.cluster.local. 5 IN A 10.0.0.1"}, nil)
	decisions(r, "192.0.2.1", answer, 5)
	for _, c := range []struct {
		client string
		sent   int
	}{{"192.0.2.200", 0}, {"::ffff:192.0.2.7", 0}, {"192.0.3.1", 5}, {"2001:db8:0:1::1", 5}, {"2001:db8:0:1::2", 0}, {"2001:db8:0:100::1", 5}} {
		if got := decisions(r, c.client, answer, 5)[RRLSend]; got != c.sent {
			t.Errorf("%s: %d of 5 sent, want %d", c.client, got, c.sent)
		}
	}
}

// A prefix that kept flooding stays limited until it has been quiet for
// the window, and then gets its full second's worth again.
func TestRRLWindow(t *testing.T) {
	var rates [NumRRLClasses]int
	rates[RRLNXDomain] = 10
	r, clock := newTestRRL(RRLConfig{PerSecond: rates, Window: 5 * time.Second})
	nx := response(t, "q1.ns.svc.cluster.local.", dns.TypeA, dns.RcodeNameError, true, nil, []string{soa})
	for range 10 { // ten seconds of 100 a second
		decisions(r, "192.0.2.1", nx, 100)
		clock.advance(time.Second)
	}
	if got := decisions(r, "192.0.2.1", nx, 1)[RRLSend]; got != 0 {
		t.Fatalf("a second after the flood: sent, want limited")
	}
	clock.advance(5 * time.Second)
	if got := decisions(r, "192.0.2.1", nx, 10)[RRLSend]; got != 10 {
		t.Fatalf("after the window: %d of 10 sent, want 10", got)
	}
}

// However many prefixes a flood spoofs, the table keeps its size, and a
// limited account is not forgotten for new ones.
func TestRRLTableIsBounded(t *testing.T) {
	var rates [NumRRLClasses]int
	rates[RRLAnswer] = 2
	r, _ := newTestRRL(RRLConfig{PerSecond: rates, MaxTableSize: 64})
	answer := response(t, "web.ns.svc.cluster.local.", dns.TypeA, 0, true, []string{"web.ns.svc.cluster.local. 5 IN A 10.0.0.1"}, nil)
	decisions(r, "198.51.100.1", answer, 10)
	for i := range 10000 {
		decisions(r, netip.AddrFrom4([4]byte{10, byte(i >> 8), byte(i), 1}).String(), answer, 1)
	}
	if n := len(r.params.Load().sets) * rrlWays; n != 64 {
		t.Fatalf("table holds %d accounts, want 64", n)
	}
	if got := decisions(r, "198.51.100.1", answer, 1)[RRLSend]; got != 0 {
		t.Fatal("the limited prefix was forgotten")
	}
}

// A slipped response is the header with TC and the question, nothing else.
func TestSlipped(t *testing.T) {
	resp := response(t, "web.ns.svc.cluster.local.", dns.TypeANY, 0, true,
		[]string{"web.ns.svc.cluster.local. 5 IN A 10.0.0.1", "web.ns.svc.cluster.local. 5 IN TXT \"" + string(make([]byte, 200)) + "\""}, nil)
	b, ok := slipped(resp)
	if !ok {
		t.Fatal("not slipped")
	}
	m := new(dns.Msg)
	if err := m.Unpack(b); err != nil {
		t.Fatal(err)
	}
	if !m.Truncated || m.Rcode != dns.RcodeSuccess || len(m.Answer)+len(m.Ns)+len(m.Extra) != 0 ||
		len(m.Question) != 1 || m.Question[0].Name != "web.ns.svc.cluster.local." {
		t.Fatalf("slipped: %v", m)
	}
	if _, ok := slipped([]byte{1, 2, 3}); ok {
		t.Fatal("a runt slipped")
	}
}

// BenchmarkRRLDecide is what RRL adds to each UDP answer: no allocations.
func BenchmarkRRLDecide(b *testing.B) {
	var rates [NumRRLClasses]int
	for c := range rates {
		rates[c] = 1 << 20
	}
	r := NewRRL(time.Now)
	r.Configure(RRLConfig{PerSecond: rates, Slip: 2, IPv4PrefixLength: 24, IPv6PrefixLength: 56, Window: 15 * time.Second, MaxTableSize: 100000})
	resp := response(b, "web.ns.svc.cluster.local.", dns.TypeA, dns.RcodeNameError, true, nil, []string{soa})
	client := netip.MustParseAddr("10.1.2.3")
	b.ReportAllocs()
	for b.Loop() {
		r.Decide(client, resp)
	}
}

// BenchmarkServeUDPRRL is BenchmarkServeUDP with RRL on (and never
// reached): the UDP path stays free of allocations.
func BenchmarkServeUDPRRL(b *testing.B) {
	var rates [NumRRLClasses]int
	for c := range rates {
		rates[c] = 1 << 30
	}
	r := NewRRL(time.Now)
	r.Configure(RRLConfig{PerSecond: rates, Slip: 2, IPv4PrefixLength: 24, IPv6PrefixLength: 56, Window: 15 * time.Second, MaxTableSize: 100000})
	addr := startListenerWith(b, Config{MaxConnections: 4, IdleTimeout: time.Second, RRL: r, RRLCounters: rrlTestCounters()})
	benchUDPExchanges(b, addr)
}
