package query

import (
	"fmt"
	"net/netip"
	"testing"

	"github.com/miekg/dns"

	"github.com/shardns/shardns/model"
	"github.com/shardns/shardns/zone"
)

func testHandler(t testing.TB) *Handler {
	cfg := &zone.Config{
		Domains: zone.Domains{Cluster: []string{"cluster.local."}, Reverse: []string{"in-addr.arpa."}},
		TTL:     5, Pods: zone.PodsInsecure,
	}
	cfg.Prepare()
	http := model.Port{Name: "http", Protocol: "TCP", Port: 80}
	big := &model.EndpointSlice{Namespace: "ns", Name: "big-1", ServiceName: "big", Ports: []model.Port{http}}
	for i := range 300 {
		big.Endpoints = append(big.Endpoints, model.Endpoint{Ready: true,
			Addresses: []netip.Addr{netip.MustParseAddr(fmt.Sprintf("10.1.%d.%d", i/250, i%250+1))}})
	}
	objs := []any{
		&model.Namespace{Name: "ns"},
		&model.Service{Namespace: "ns", Name: "web", ClusterIPs: []netip.Addr{netip.MustParseAddr("10.0.0.1")}, Ports: []model.Port{http}},
		&model.Service{Namespace: "ns", Name: "big", Type: model.ServiceHeadless, Ports: []model.Port{http}},
		big,
	}
	return &Handler{Config: cfg, Zones: zone.NewStatic(cfg, objs, true)}
}

func query(name string, qtype uint16) *dns.Msg {
	m := new(dns.Msg)
	m.SetQuestion(name, qtype)
	m.Id = 4242
	return m
}

func pack(t testing.TB, m *dns.Msg) []byte {
	t.Helper()
	b, err := m.Pack()
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// serve runs one request and unpacks the response.
func serve(t testing.TB, h *Handler, req []byte, tr Transport) *dns.Msg {
	t.Helper()
	out := h.Serve(req, tr, nil)
	if out == nil {
		t.Fatal("request dropped, want a response")
	}
	r := new(dns.Msg)
	if err := r.Unpack(out); err != nil {
		t.Fatalf("response does not unpack: %v", err)
	}
	if !r.Response {
		t.Fatal("QR bit not set on the response")
	}
	return r
}

func TestServeAnswers(t *testing.T) {
	h := testHandler(t)
	r := serve(t, h, pack(t, query("web.ns.svc.cluster.local.", dns.TypeA)), Transport{})
	if r.Id != 4242 || r.Rcode != dns.RcodeSuccess || !r.Authoritative || len(r.Answer) != 1 {
		t.Fatalf("got %v", r)
	}
	if a := r.Answer[0].(*dns.A); a.A.String() != "10.0.0.1" {
		t.Fatalf("answer %v", a)
	}
}

func TestServePreservesCase(t *testing.T) {
	h := testHandler(t)
	r := serve(t, h, pack(t, query("WeB.Ns.svc.Cluster.Local.", dns.TypeA)), Transport{})
	if len(r.Answer) != 1 || r.Answer[0].Header().Name != "WeB.Ns.svc.Cluster.Local." {
		t.Fatalf("answer %v, want the owner as asked", r.Answer)
	}
	if r.Question[0].Name != "WeB.Ns.svc.Cluster.Local." {
		t.Fatalf("question %v", r.Question)
	}
	// The shared snapshot keeps its lower-case owner.
	r = serve(t, h, pack(t, query("web.ns.svc.cluster.local.", dns.TypeA)), Transport{})
	if r.Answer[0].Header().Name != "web.ns.svc.cluster.local." {
		t.Fatalf("snapshot record was modified: %v", r.Answer[0])
	}
}

func TestServeHostileInput(t *testing.T) {
	h := testHandler(t)
	good := pack(t, query("web.ns.svc.cluster.local.", dns.TypeA))
	withHeader := func(mut func(b []byte)) []byte {
		b := append([]byte(nil), good...)
		mut(b)
		return b
	}
	twoQuestions := query("web.ns.svc.cluster.local.", dns.TypeA)
	twoQuestions.Question = append(twoQuestions.Question, twoQuestions.Question[0])
	notify := query("cluster.local.", dns.TypeSOA)
	notify.Opcode = dns.OpcodeNotify
	update := query("cluster.local.", dns.TypeSOA)
	update.Opcode = dns.OpcodeUpdate
	chaos := query("version.bind.", dns.TypeTXT)
	chaos.Question[0].Qclass = dns.ClassCHAOS
	ednsV1 := query("web.ns.svc.cluster.local.", dns.TypeA)
	ednsV1.SetEdns0(1232, false)
	ednsV1.IsEdns0().SetVersion(1)
	// A name whose first label points at itself.
	loop := append(append([]byte(nil), good[:12]...), 0xC0, 12, 0, 1, 0, 1)

	cases := []struct {
		name  string
		req   []byte
		rcode int
	}{
		{"qdcount 0", withHeader(func(b []byte) { b[5] = 0 }), dns.RcodeFormatError},
		{"qdcount 2", pack(t, twoQuestions), dns.RcodeFormatError},
		{"body cut short", good[:len(good)-3], dns.RcodeFormatError},
		{"compression loop", loop, dns.RcodeFormatError},
		{"label over 63", append(append(append([]byte(nil), good[:12]...), 64), make([]byte, 70)...), dns.RcodeFormatError},
		{"opcode notify", pack(t, notify), dns.RcodeNotImplemented},
		{"opcode update", pack(t, update), dns.RcodeNotImplemented},
		{"edns version 1", pack(t, ednsV1), dns.RcodeBadVers},
		{"chaos class", pack(t, chaos), dns.RcodeRefused},
		{"axfr over udp", pack(t, query("ns.svc.cluster.local.", dns.TypeAXFR)), dns.RcodeRefused},
		{"outside the cluster", pack(t, query("example.com.", dns.TypeA)), dns.RcodeRefused},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			r := serve(t, h, c.req, Transport{})
			if r.Rcode != c.rcode {
				t.Fatalf("rcode %s, want %s", dns.RcodeToString[r.Rcode], dns.RcodeToString[c.rcode])
			}
			if r.Id != 4242 {
				t.Fatalf("id %d, want the request's", r.Id)
			}
		})
	}
}

// ANY gets RFC 8482's minimal answer for a name that exists, and the
// usual NXDOMAIN for one that does not.
func TestServeANY(t *testing.T) {
	h := testHandler(t)
	r := serve(t, h, pack(t, query("web.ns.svc.cluster.local.", dns.TypeANY)), Transport{})
	if r.Rcode != dns.RcodeSuccess || len(r.Answer) != 1 || r.Answer[0].(*dns.HINFO).Cpu != "RFC8482" {
		t.Fatalf("ANY of a service: %v", r)
	}
	r = serve(t, h, pack(t, query("nope.ns.svc.cluster.local.", dns.TypeANY)), Transport{})
	if r.Rcode != dns.RcodeNameError {
		t.Fatalf("ANY of a missing name: %s", dns.RcodeToString[r.Rcode])
	}
}

func TestServeDrops(t *testing.T) {
	h := testHandler(t)
	good := pack(t, query("web.ns.svc.cluster.local.", dns.TypeA))
	resp := append([]byte(nil), good...)
	resp[2] |= 0x80
	for name, req := range map[string][]byte{"empty": nil, "short": good[:11], "response": resp} {
		if out := h.Serve(req, Transport{}, nil); out != nil {
			t.Errorf("%s: answered %x, want dropped", name, out)
		}
	}
}

func TestServeTruncation(t *testing.T) {
	h := testHandler(t)
	q := query("big.ns.svc.cluster.local.", dns.TypeA)
	r := serve(t, h, pack(t, q), Transport{})
	if !r.Truncated || len(r.Answer) >= 300 {
		t.Fatalf("UDP without EDNS: tc=%v with %d answers, want truncated", r.Truncated, len(r.Answer))
	}
	if out := h.Serve(pack(t, q), Transport{}, nil); len(out) > 512 {
		t.Fatalf("UDP response of %d bytes exceeds 512", len(out))
	}
	r = serve(t, h, pack(t, q), Transport{TCP: true})
	if r.Truncated || len(r.Answer) != 300 {
		t.Fatalf("TCP: tc=%v with %d answers, want all 300", r.Truncated, len(r.Answer))
	}
	e := query("big.ns.svc.cluster.local.", dns.TypeA)
	e.SetEdns0(65535, false)
	out := h.Serve(pack(t, e), Transport{}, nil)
	if len(out) > MaxUDPSize {
		t.Fatalf("EDNS 65535: %d bytes, want at most %d", len(out), MaxUDPSize)
	}
	r = serve(t, h, pack(t, e), Transport{})
	if r.IsEdns0() == nil {
		t.Fatal("EDNS request answered without OPT")
	}
	if !r.Truncated || len(r.Answer) <= 100 {
		t.Fatalf("EDNS 65535: tc=%v with %d answers, want many but truncated", r.Truncated, len(r.Answer))
	}
}

func TestServeNoTruncationWhenItFits(t *testing.T) {
	h := testHandler(t)
	e := query("web.ns.svc.cluster.local.", dns.TypeA)
	e.SetEdns0(1232, false)
	r := serve(t, h, pack(t, e), Transport{})
	if r.Truncated || len(r.Answer) != 1 || r.IsEdns0() == nil {
		t.Fatalf("got %v", r)
	}
}

func BenchmarkServe(b *testing.B) {
	h := testHandler(b)
	m := query("web.ns.svc.cluster.local.", dns.TypeA)
	req, _ := m.Pack()
	out := make([]byte, 0, 512)
	b.ReportAllocs()
	for b.Loop() {
		out = h.Serve(req, Transport{}, out[:0])
	}
}
