package query

import (
	"net/netip"
	"testing"
	"time"

	"github.com/miekg/dns"

	"github.com/shardns/shardns/forward"
	"github.com/shardns/shardns/model"
	"github.com/shardns/shardns/zone"
)

// ednsQuery is a question offering size bytes over UDP, asking for NSID
// when nsid is set.
func ednsQuery(name string, qtype, size uint16, nsid bool) *dns.Msg {
	m := query(name, qtype)
	m.SetEdns0(size, false)
	if nsid {
		opt := m.IsEdns0()
		opt.Option = append(opt.Option, &dns.EDNS0_NSID{Code: dns.EDNS0NSID})
	}
	return m
}

func withModifiers(t testing.TB, m *Modifiers) *Handler {
	h := testHandler(t)
	h.Modify = m
	return h
}

func TestBufSizeCapsTheRequest(t *testing.T) {
	h := withModifiers(t, &Modifiers{BufSize: 1232})
	for _, c := range []struct {
		offered, advertised uint16
	}{
		{4096, 1232}, // capped
		{1232, 1232},
		{1000, 1000}, // a smaller offer is kept, and echoed as CoreDNS does
		{512, 512},
	} {
		req := pack(t, ednsQuery("big.ns.svc.cluster.local.", dns.TypeA, c.offered, false))
		r, n := serve(t, h, req, Transport{}), len(h.Serve(req, Transport{}, nil))
		opt := r.IsEdns0()
		if opt == nil || opt.UDPSize() != c.advertised {
			t.Fatalf("offered %d: OPT %v, want UDP size %d", c.offered, opt, c.advertised)
		}
		if !r.Truncated || n > int(c.advertised) {
			t.Errorf("offered %d: %d bytes, truncated %v; want truncated to at most %d", c.offered, n, r.Truncated, c.advertised)
		}
	}
	// Without the cap the same question gets up to 4096 bytes.
	req := pack(t, ednsQuery("big.ns.svc.cluster.local.", dns.TypeA, 4096, false))
	r, n := serve(t, testHandler(t), req, Transport{}), len(testHandler(t).Serve(req, Transport{}, nil))
	if n <= 1232 || r.IsEdns0().UDPSize() != MaxUDPSize {
		t.Errorf("no cap: %d bytes advertising %d, want more than 1232 advertising %d", n, r.IsEdns0().UDPSize(), MaxUDPSize)
	}
}

func TestNSID(t *testing.T) {
	h := withModifiers(t, &Modifiers{NSID: []byte("Use The Force")})
	r := serve(t, h, pack(t, ednsQuery("web.ns.svc.cluster.local.", dns.TypeA, 4096, true)), Transport{})
	opt := r.IsEdns0()
	if opt == nil || len(opt.Option) != 1 {
		t.Fatalf("OPT %v, want one NSID option", opt)
	}
	if n, ok := opt.Option[0].(*dns.EDNS0_NSID); !ok || n.Nsid != "5573652054686520466f726365" {
		t.Errorf("option %v, want NSID \"Use The Force\" (hex 5573652054686520466f726365)", opt.Option[0])
	}
	if r.IsEdns0().UDPSize() != MaxUDPSize || len(r.Answer) != 1 {
		t.Errorf("got %v, want the answer as without nsid", r)
	}
	// Not asked: not sent.
	r = serve(t, h, pack(t, ednsQuery("web.ns.svc.cluster.local.", dns.TypeA, 4096, false)), Transport{})
	if opt := r.IsEdns0(); opt == nil || len(opt.Option) != 0 {
		t.Errorf("OPT %v of a query without NSID, want no options", opt)
	}
}

func TestHeaderRules(t *testing.T) {
	h := withModifiers(t, &Modifiers{
		QueryFlags:    []FlagRule{{Flag: "rd", Set: true}},
		ResponseFlags: []FlagRule{{Flag: "ra", Set: true}, {Flag: "aa", Set: false}, {Flag: "aa", Set: true}},
	})
	q := query("web.ns.svc.cluster.local.", dns.TypeA)
	q.RecursionDesired = false
	r := serve(t, h, pack(t, q), Transport{})
	if !r.RecursionDesired || !r.RecursionAvailable || !r.Authoritative || len(r.Answer) != 1 {
		t.Errorf("flags rd=%v ra=%v aa=%v, want all set (query set rd; response set ra, clear then set aa)",
			r.RecursionDesired, r.RecursionAvailable, r.Authoritative)
	}
	h.Modify = &Modifiers{ResponseFlags: []FlagRule{{Flag: "rd", Set: false}, {Flag: "aa", Set: false}}}
	r = serve(t, h, pack(t, query("web.ns.svc.cluster.local.", dns.TypeA)), Transport{})
	if r.RecursionDesired || r.Authoritative {
		t.Errorf("flags rd=%v aa=%v, want both cleared", r.RecursionDesired, r.Authoritative)
	}
}

var ipv6Client = Transport{IPv6: true, Client: netip.MustParseAddrPort("[::1]:5000")}

func dns64Handler(t testing.TB, d DNS64) *Handler {
	if !d.Prefix.IsValid() {
		d.Prefix = netip.MustParsePrefix("64:ff9b::/96")
	}
	return withModifiers(t, &Modifiers{DNS64: &d})
}

func TestDNS64ClusterName(t *testing.T) {
	h := dns64Handler(t, DNS64{})
	r := serve(t, h, pack(t, query("web.ns.svc.cluster.local.", dns.TypeAAAA)), ipv6Client)
	want := "web.ns.svc.cluster.local.\t5\tIN\tAAAA\t64:ff9b::a00:1"
	if r.Rcode != dns.RcodeSuccess || len(r.Answer) != 1 || r.Answer[0].String() != want {
		t.Fatalf("got %v, want %s", r, want)
	}
	if r.Authoritative || r.RecursionAvailable {
		t.Errorf("aa=%v ra=%v, want a fresh reply as CoreDNS's", r.Authoritative, r.RecursionAvailable)
	}
	// IPv4 clients get the plain answer, unless allowed.
	if r := serve(t, h, pack(t, query("web.ns.svc.cluster.local.", dns.TypeAAAA)), Transport{}); len(r.Answer) != 0 || !r.Authoritative {
		t.Errorf("IPv4 client: %v, want the authoritative NODATA", r)
	}
	h = dns64Handler(t, DNS64{AllowIPv4: true})
	if r := serve(t, h, pack(t, query("web.ns.svc.cluster.local.", dns.TypeAAAA)), Transport{}); len(r.Answer) != 1 {
		t.Errorf("IPv4 client with allowIPv4: %v, want the synthesised AAAA", r)
	}
	// NXDOMAIN stays NXDOMAIN; other types are left alone.
	if r := serve(t, h, pack(t, query("nope.ns.svc.cluster.local.", dns.TypeAAAA)), ipv6Client); r.Rcode != dns.RcodeNameError {
		t.Errorf("missing name: %s, want NXDOMAIN", dns.RcodeToString[r.Rcode])
	}
	if r := serve(t, h, pack(t, query("web.ns.svc.cluster.local.", dns.TypeA)), ipv6Client); r.Answer[0].(*dns.A).A.String() != "10.0.0.1" {
		t.Errorf("A question: %v", r)
	}
}

// fakeUpstream answers A questions with 192.0.2.33 (TTL 900) and AAAA
// questions with NODATA whose SOA has TTL soaTTL.
func fakeUpstream(t *testing.T, soaTTL string) *forward.Forwarder {
	t.Helper()
	return udpForwarder(t, func(w dns.ResponseWriter, r *dns.Msg) {
		m := new(dns.Msg)
		m.SetReply(r)
		m.RecursionAvailable = true
		q := r.Question[0]
		if q.Qtype == dns.TypeA {
			rr, _ := dns.NewRR(q.Name + " 900 IN A 192.0.2.33")
			m.Answer = []dns.RR{rr}
		} else {
			rr, _ := dns.NewRR("example. " + soaTTL + " IN SOA ns.example. host.example. 1 3600 600 86400 60")
			m.Ns = []dns.RR{rr}
		}
		w.WriteMsg(m)
	})
}

// A forwarded name is asked upstream twice, AAAA then A, each answered
// later on the forwarder's goroutine; the synthesised answer goes out
// late, with the SOA's TTL capping the A record's.
func TestDNS64ForwardedName(t *testing.T) {
	for _, prefix := range []struct{ prefix, want string }{
		{"64:ff9b::/96", "64:ff9b::c000:221"},
		{"2001:db8::/32", "2001:db8:c000:221::"},
	} {
		h := dns64Handler(t, DNS64{Prefix: netip.MustParsePrefix(prefix.prefix)})
		h.Upstream = &Upstream{Forwarder: fakeUpstream(t, "300"), Deadline: 2 * time.Second, Now: time.Now}
		late := make(lateAnswers, 1)
		tr := ipv6Client
		tr.Late = late
		if out := h.Serve(pack(t, ednsQuery("www.example.", dns.TypeAAAA, 4096, false)), tr, nil); out != nil {
			t.Fatal("answered at once, want the upstream asked")
		}
		var r dns.Msg
		select {
		case b := <-late:
			if err := r.Unpack(b); err != nil {
				t.Fatal(err)
			}
		case <-time.After(5 * time.Second):
			t.Fatal("no late answer")
		}
		want := "www.example.\t300\tIN\tAAAA\t" + prefix.want
		if r.Rcode != dns.RcodeSuccess || len(r.Answer) != 1 || r.Answer[0].String() != want || r.IsEdns0() == nil {
			t.Errorf("prefix %s: got %v, want %s with an OPT record", prefix.prefix, &r, want)
		}
	}
}

// dualStackView holds api.ns.svc.cluster.local with an IPv4 and an IPv6
// cluster IP.
func dualStackView(t testing.TB, cfg *zone.Config) zone.Reader {
	return zone.NewStatic(cfg, []any{
		&model.Namespace{Name: "ns"},
		&model.Service{Namespace: "ns", Name: "api", ClusterIPs: []netip.Addr{
			netip.MustParseAddr("10.0.0.2"), netip.MustParseAddr("fd00::1")}, Ports: []model.Port{{Name: "http", Protocol: "TCP", Port: 80}}},
	}, true)
}

func TestDNS64TranslateAll(t *testing.T) {
	h := dns64Handler(t, DNS64{})
	h.Zones = dualStackView(t, h.Config)
	if r := serve(t, h, pack(t, query("api.ns.svc.cluster.local.", dns.TypeAAAA)), ipv6Client); len(r.Answer) != 1 || r.Answer[0].(*dns.AAAA).AAAA.String() != "fd00::1" {
		t.Errorf("a name with AAAA records: %v, want them unchanged", r)
	}
	h.Modify.DNS64.TranslateAll = true
	if r := serve(t, h, pack(t, query("api.ns.svc.cluster.local.", dns.TypeAAAA)), ipv6Client); len(r.Answer) != 1 || r.Answer[0].(*dns.AAAA).AAAA.String() != "64:ff9b::a00:2" {
		t.Errorf("translate_all: %v, want the A record synthesised", r)
	}
}

// RFC 6052 section 2.4's examples: 192.0.2.33 in each prefix length.
func TestEmbed(t *testing.T) {
	for _, c := range []struct{ prefix, want string }{
		{"2001:db8::/32", "2001:db8:c000:221::"},
		{"2001:db8:100::/40", "2001:db8:1c0:2:21::"},
		{"2001:db8:122::/48", "2001:db8:122:c000:2:2100::"},
		{"2001:db8:122:300::/56", "2001:db8:122:3c0:0:221::"},
		{"2001:db8:122:344::/64", "2001:db8:122:344:c0:2:2100:0"},
		{"2001:db8:122:344::/96", "2001:db8:122:344::c000:221"},
	} {
		if got := embed(netip.MustParsePrefix(c.prefix), []byte{192, 0, 2, 33}); got.String() != c.want {
			t.Errorf("%s: %s, want %s", c.prefix, got, c.want)
		}
	}
}

// BenchmarkServeWithModifiers is BenchmarkServe with bufsize set: every
// query takes the full path.
func BenchmarkServeWithModifiers(b *testing.B) {
	h := withModifiers(b, &Modifiers{BufSize: 1232})
	req, _ := ednsQuery("web.ns.svc.cluster.local.", dns.TypeA, 4096, false).Pack()
	out := make([]byte, 0, 512)
	b.ReportAllocs()
	for b.Loop() {
		out = h.Serve(req, Transport{}, out[:0])
	}
}
