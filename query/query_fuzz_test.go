package query

import (
	"bytes"
	"io"
	"log/slog"
	"net/netip"
	"strings"
	"testing"

	"github.com/miekg/dns"

	"github.com/shardns/shardns/metrics"
	"github.com/shardns/shardns/zone"
)

// toleratedEDNSOverrun is how many bytes a UDP response to an EDNS0 request
// may exceed the client's buffer (treated as at least 512) before
// FuzzServe fails. It is the size of the OPT record: pack truncates to
// max(size-optSize, 512) and appends the OPT afterwards, so a client
// advertising 512–522 gets up to 523 bytes. Set it to 0 once pack truncates
// with the OPT record in the message.
const toleratedEDNSOverrun = 0

// fuzzSeeds are well-formed and hostile requests for the zone of
// testHandler.
func fuzzSeeds(tb testing.TB) [][]byte {
	tb.Helper()
	q := func(name string, qtype uint16, mut ...func(*dns.Msg)) []byte {
		m := new(dns.Msg)
		m.SetQuestion(name, qtype)
		m.Id = 4242
		for _, f := range mut {
			f(m)
		}
		b, err := m.Pack()
		if err != nil {
			tb.Fatalf("seed %s: %v", name, err)
		}
		return b
	}
	edns := func(size uint16, version uint8) func(*dns.Msg) {
		return func(m *dns.Msg) {
			m.SetEdns0(size, true)
			m.IsEdns0().SetVersion(version)
		}
	}
	opcode := func(op int) func(*dns.Msg) { return func(m *dns.Msg) { m.Opcode = op } }
	class := func(c uint16) func(*dns.Msg) { return func(m *dns.Msg) { m.Question[0].Qclass = c } }

	good := q("web.ns.svc.cluster.local.", dns.TypeA)
	header := good[:12]
	raw := func(parts ...[]byte) []byte { return bytes.Join(append([][]byte{header}, parts...), nil) }
	// A wire name of labels of n bytes each, repeated count times.
	labels := func(n, count int) []byte {
		var b []byte
		for range count {
			b = append(b, byte(n))
			b = append(b, bytes.Repeat([]byte{'a'}, n)...)
		}
		return append(b, 0)
	}
	typeA := []byte{0, 1, 0, 1}

	two := new(dns.Msg)
	two.SetQuestion("web.ns.svc.cluster.local.", dns.TypeA)
	two.Question = append(two.Question, two.Question[0])
	two.Id = 4242
	twoQ, _ := two.Pack()

	response := append([]byte(nil), good...)
	response[2] |= 0x80
	qd0 := append([]byte(nil), good...)
	qd0[5] = 0

	return [][]byte{
		good,
		q("web.ns.svc.cluster.local.", dns.TypeAAAA),
		q("big.ns.svc.cluster.local.", dns.TypeA),
		q("big.ns.svc.cluster.local.", dns.TypeA, edns(1232, 0)),
		q("big.ns.svc.cluster.local.", dns.TypeA, edns(512, 0)),
		q("big.ns.svc.cluster.local.", dns.TypeA, edns(65535, 0)),
		q("big.ns.svc.cluster.local.", dns.TypeSRV, edns(4096, 0)),
		q("_http._tcp.web.ns.svc.cluster.local.", dns.TypeSRV),
		q("_http._tcp.big.ns.svc.cluster.local.", dns.TypeSRV, edns(1232, 0)),
		q("10-1-0-1.big.ns.svc.cluster.local.", dns.TypeA),
		q("1.0.0.10.in-addr.arpa.", dns.TypePTR),
		q("1.0.1.10.in-addr.arpa.", dns.TypePTR, edns(1232, 0)),
		q("10-1-2-3.ns.pod.cluster.local.", dns.TypeA),
		q("dns-version.cluster.local.", dns.TypeTXT),
		q("cluster.local.", dns.TypeSOA),
		q("cluster.local.", dns.TypeNS),
		q("ns.svc.cluster.local.", dns.TypeAXFR),
		q("ns.svc.cluster.local.", dns.TypeIXFR),
		q("nope.ns.svc.cluster.local.", dns.TypeA),
		q("example.com.", dns.TypeA),
		q("WeB.Ns.SVC.Cluster.LOCAL.", dns.TypeA),
		q("BIG.ns.svc.cluster.local.", dns.TypeA, edns(4096, 0)),
		q("web.ns.svc.cluster.local.", dns.TypeA, edns(1232, 1)),
		q("web.ns.svc.cluster.local.", dns.TypeA, edns(65535, 0)),
		q("web.ns.svc.cluster.local.", dns.TypeA, edns(0, 0)),
		q("cluster.local.", dns.TypeSOA, opcode(dns.OpcodeNotify)),
		q("cluster.local.", dns.TypeSOA, opcode(dns.OpcodeUpdate)),
		q("version.bind.", dns.TypeTXT, class(dns.ClassCHAOS)),
		twoQ,
		qd0,
		response,
		good[:11],
		good[:len(good)-3],
		// The first label points at itself.
		raw([]byte{0xC0, 12}, typeA),
		// A label of 64 bytes.
		raw(labels(64, 1), typeA),
		// A name of 4×63+4 bytes: over 255.
		raw(labels(63, 4), typeA),
		// A name of exactly 255 bytes (3×63 + 62 + 4 length bytes... + root).
		raw(labels(63, 3), []byte{61}, bytes.Repeat([]byte{'b'}, 61), []byte{0}, typeA),
		// Pointer past the end of the message.
		raw([]byte{0xC0, 0xFF}, typeA),
	}
}

// podClient is the address of a pod of namespace ns, for autopath.
var podClient = netip.MustParseAddrPort("10.9.0.7:5000")

// fuzzHandlers are the handler of the query tests, and the same with
// autopath (for podClient), metrics and logs on.
func fuzzHandlers(tb testing.TB) (plain, pod *Handler) {
	plain = testHandler(tb)
	pod = testHandler(tb)
	pods := &zone.PodIndex{}
	pods.Set(netip.MustParseAddr("10.9.0.7"), "ns")
	pod.Autopath = pods
	_, pod.Metrics = metrics.New("fuzz")
	pod.Server = "dns://127.0.0.1:53"
	discard := slog.New(slog.NewTextHandler(io.Discard, nil))
	pod.QueryLog, pod.ErrorLog = discard, discard
	return plain, pod
}

func FuzzServe(f *testing.F) {
	for _, s := range fuzzSeeds(f) {
		f.Add(s, false, false)
		f.Add(s, true, false)
	}
	for _, s := range autopathSeeds(f) {
		f.Add(s, false, true)
	}
	plain, pod := fuzzHandlers(f)
	// Responses that must not change: the snapshot records are shared, so
	// a request that writes to them would change later answers.
	canon := [][]byte{
		packSeed(f, "web.ns.svc.cluster.local.", dns.TypeA, 0),
		packSeed(f, "_http._tcp.big.ns.svc.cluster.local.", dns.TypeSRV, 1232),
	}
	want := map[*Handler][][]byte{}
	for _, h := range []*Handler{plain, pod} {
		for _, c := range canon {
			want[h] = append(want[h], h.Serve(c, Transport{}, nil))
		}
	}
	f.Fuzz(func(t *testing.T, req []byte, tcp, fromPod bool) {
		h, tr := plain, Transport{TCP: tcp}
		if fromPod {
			h, tr.Client = pod, podClient
		}
		orig := append([]byte(nil), req...)
		out := h.Serve(req, tr, nil)
		if !bytes.Equal(req, orig) {
			t.Fatalf("Serve modified the request")
		}
		checkResponse(t, req, tr, out)

		// The result does not depend on what the out buffer held.
		buf := bytes.Repeat([]byte{0xAA}, 600)
		again := h.Serve(req, tr, buf)
		if !bytes.Equal(out, again) {
			t.Fatalf("answer depends on the out buffer:\n nil: %x\n buf: %x", out, again)
		}
		for i, c := range canon {
			if got := h.Serve(c, Transport{}, nil); !bytes.Equal(got, want[h][i]) {
				t.Fatalf("request changed later answers (shared records written?): canonical %d\n got  %x\n want %x", i, got, want[h][i])
			}
		}
	})
}

// autopathSeeds are requests from a pod of namespace ns: search-path
// expansions that autopath answers on the server.
func autopathSeeds(tb testing.TB) [][]byte {
	tb.Helper()
	return [][]byte{
		packSeed(tb, "web.ns.ns.svc.cluster.local.", dns.TypeA, 0),
		packSeed(tb, "WEB.Ns.ns.svc.cluster.local.", dns.TypeA, 1232),
		packSeed(tb, "web.ns.svc.ns.svc.cluster.local.", dns.TypeA, 0),
		packSeed(tb, "big.ns.ns.svc.cluster.local.", dns.TypeA, 512),
		packSeed(tb, "big.ns.ns.svc.cluster.local.", dns.TypeSRV, 0),
		packSeed(tb, "nothing.ns.svc.cluster.local.", dns.TypeA, 0),
		packSeed(tb, "example.com.ns.svc.cluster.local.", dns.TypeA, 0),
		packSeed(tb, "ns.svc.cluster.local.ns.svc.cluster.local.", dns.TypeA, 0),
		packSeed(tb, "web.ns.svc.cluster.local.", dns.TypeA, 0),
	}
}

func packSeed(tb testing.TB, name string, qtype uint16, edns uint16) []byte {
	tb.Helper()
	m := new(dns.Msg)
	m.SetQuestion(name, qtype)
	m.Id = 4242
	if edns > 0 {
		m.SetEdns0(edns, false)
	}
	b, err := m.Pack()
	if err != nil {
		tb.Fatal(err)
	}
	return b
}

// checkResponse holds the invariants of Serve for any input.
func checkResponse(t *testing.T, req []byte, tr Transport, out []byte) {
	t.Helper()
	drop := len(req) < headerSize || req[2]&0x80 != 0
	if drop {
		if out != nil {
			t.Fatalf("answered %x, want dropped (short or QR set)", out)
		}
		return
	}
	if out == nil {
		t.Fatalf("dropped a request that must be answered")
	}
	if len(out) < headerSize {
		t.Fatalf("response of %d bytes, shorter than a header", len(out))
	}
	if out[0] != req[0] || out[1] != req[1] {
		t.Fatalf("response id %x, want the request's %x", out[:2], req[:2])
	}
	if out[2]&0x80 == 0 {
		t.Fatalf("QR not set: %x", out)
	}
	if out[2]&0x78 != req[2]&0x78 {
		t.Fatalf("opcode %d, want the request's %d", out[2]>>3&0xF, req[2]>>3&0xF)
	}
	r := new(dns.Msg)
	if err := r.Unpack(out); err != nil {
		t.Fatalf("response does not unpack: %v\n%x", err, out)
	}

	m := new(dns.Msg)
	reqErr := m.Unpack(req)
	var opt *dns.OPT
	if reqErr == nil {
		opt = m.IsEdns0()
	}
	if !tr.TCP {
		limit := dns.MinMsgSize
		if opt != nil {
			limit = min(max(int(opt.UDPSize()), dns.MinMsgSize), MaxUDPSize) + toleratedEDNSOverrun
		}
		if len(out) > limit {
			t.Fatalf("UDP response of %d bytes, over the %d the client can take (EDNS0: %v)", len(out), limit, opt != nil)
		}
		if len(out) > MaxUDPSize {
			t.Fatalf("UDP response of %d bytes, over %d", len(out), MaxUDPSize)
		}
	}
	if reqErr != nil {
		if r.Rcode != dns.RcodeFormatError || len(out) != headerSize {
			t.Fatalf("request that does not unpack (%v): rcode %s, %d bytes, want a bare FORMERR header",
				reqErr, dns.RcodeToString[r.Rcode], len(out))
		}
		return
	}
	switch {
	case m.Opcode != dns.OpcodeQuery:
		if r.Rcode != dns.RcodeNotImplemented {
			t.Fatalf("opcode %d: rcode %s, want NOTIMP", m.Opcode, dns.RcodeToString[r.Rcode])
		}
		return
	case len(m.Question) != 1:
		if r.Rcode != dns.RcodeFormatError {
			t.Fatalf("%d questions: rcode %s, want FORMERR", len(m.Question), dns.RcodeToString[r.Rcode])
		}
		return
	case opt != nil && opt.Version() != 0:
		if r.Rcode != dns.RcodeBadVers {
			t.Fatalf("EDNS version %d: rcode %s, want BADVERS", opt.Version(), dns.RcodeToString[r.Rcode])
		}
	case m.Question[0].Qclass != dns.ClassINET:
		if r.Rcode != dns.RcodeRefused {
			t.Fatalf("class %d: rcode %s, want REFUSED", m.Question[0].Qclass, dns.RcodeToString[r.Rcode])
		}
	}
	if opt != nil && r.IsEdns0() == nil && r.Rcode != dns.RcodeServerFailure {
		t.Fatalf("EDNS0 request answered without OPT: %v", r)
	}
	if opt == nil && r.IsEdns0() != nil {
		t.Fatalf("request without EDNS0 answered with OPT: %v", r)
	}
	if len(r.Question) != 1 || r.Question[0] != m.Question[0] {
		t.Fatalf("question %v, want the request's %v", r.Question, m.Question[0])
	}
	// Answers echo the question's letter case.
	qname := m.Question[0].Name
	for _, rr := range r.Answer {
		if n := rr.Header().Name; n != qname && strings.EqualFold(n, qname) {
			t.Fatalf("answer owner %q, want the question's case %q", n, qname)
		}
	}
}
