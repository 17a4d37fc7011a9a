package query

import (
	"errors"
	"fmt"
	"log/slog"
	"net/netip"
	"strings"
	"testing"

	"github.com/miekg/dns"

	"github.com/shardns/shardns/sources/zonefile"
	"github.com/shardns/shardns/zone"
)

// fileHandler serves cluster.local and the file zone example.org, which
// 127.0.0.1 may transfer; extra is appended to the zone file.
func fileHandler(t *testing.T, extra string) *Handler {
	t.Helper()
	text := `$ORIGIN example.org.
$TTL 60
@    SOA ns hostmaster 7 7200 3600 1209600 30
     NS  ns
ns   A   192.0.2.53
www  A   192.0.2.80
sub  NS  ns.sub
ns.sub A 192.0.2.54
` + extra
	f, err := zonefile.Parse("db.example", "example.org", []byte(text), []netip.Prefix{netip.MustParsePrefix("127.0.0.1/32")})
	if err != nil {
		t.Fatal(err)
	}
	h := testHandler(t)
	h.Zones = zone.NewStatic(h.Config, []any{f}, true)
	return h
}

// stream records the messages of a transfer.
type stream struct {
	msgs [][]byte
	err  error
}

func (s *stream) WriteStream(msg []byte) error {
	s.msgs = append(s.msgs, append([]byte(nil), msg...))
	return s.err
}

var (
	loopback = netip.MustParseAddrPort("127.0.0.1:5300")
	other    = netip.MustParseAddrPort("127.0.0.2:5300")
)

// transferOf runs one transfer request and returns every message the
// client gets, in order.
func transferOf(t *testing.T, h *Handler, req *dns.Msg, tr Transport) []*dns.Msg {
	t.Helper()
	s, _ := tr.Stream.(*stream)
	last := h.Serve(pack(t, req), tr, nil)
	if last == nil {
		t.Fatal("no response")
	}
	var wires [][]byte
	if s != nil {
		wires = s.msgs
	}
	var out []*dns.Msg
	for _, w := range append(wires, last) {
		m := new(dns.Msg)
		if err := m.Unpack(w); err != nil {
			t.Fatal(err)
		}
		out = append(out, m)
	}
	return out
}

func TestTransferRefused(t *testing.T) {
	h := fileHandler(t, "")
	for _, c := range []struct {
		name  string
		qname string
		qtype uint16
		tr    Transport
	}{
		{"over UDP", "example.org.", dns.TypeAXFR, Transport{Client: loopback}},
		{"from an address not allowed", "example.org.", dns.TypeAXFR, Transport{TCP: true, Stream: &stream{}, Client: other}},
		{"IXFR from an address not allowed", "example.org.", dns.TypeIXFR, Transport{TCP: true, Stream: &stream{}, Client: other}},
		{"of a name below the origin", "www.example.org.", dns.TypeAXFR, Transport{TCP: true, Stream: &stream{}, Client: loopback}},
		{"of a cluster zone", "cluster.local.", dns.TypeAXFR, Transport{TCP: true, Stream: &stream{}, Client: loopback}},
		{"of a name outside every zone", "example.com.", dns.TypeAXFR, Transport{TCP: true, Stream: &stream{}, Client: loopback}},
	} {
		t.Run(c.name, func(t *testing.T) {
			msgs := transferOf(t, h, query(c.qname, c.qtype), c.tr)
			if len(msgs) != 1 || msgs[0].Rcode != dns.RcodeRefused || len(msgs[0].Answer) != 0 {
				t.Fatalf("got %d messages, first %v; want one REFUSED", len(msgs), msgs[0])
			}
		})
	}
}

func TestTransferAXFR(t *testing.T) {
	h := fileHandler(t, "")
	msgs := transferOf(t, h, query("example.org.", dns.TypeAXFR), Transport{TCP: true, Stream: &stream{}, Client: loopback})
	var got []string
	for _, m := range msgs {
		if m.Id != 4242 || !m.Authoritative || m.Rcode != dns.RcodeSuccess {
			t.Fatalf("message %v", m)
		}
		for _, rr := range m.Answer {
			got = append(got, rr.Header().Name+" "+dns.TypeToString[rr.Header().Rrtype])
		}
	}
	want := "example.org. SOA,example.org. NS,ns.example.org. A,www.example.org. A,sub.example.org. NS,ns.sub.example.org. A,example.org. SOA"
	if strings.Join(got, ",") != want {
		t.Fatalf("transfer:\n%s\nwant:\n%s", strings.Join(got, ","), want)
	}
}

// A zone larger than one message goes out in several, in file order, each
// within the TCP message size.
func TestTransferManyMessages(t *testing.T) {
	var b strings.Builder
	for i := range 2000 {
		fmt.Fprintf(&b, "h%d TXT \"%s\"\n", i, strings.Repeat("x", 100))
	}
	h := fileHandler(t, b.String())
	msgs := transferOf(t, h, query("example.org.", dns.TypeAXFR), Transport{TCP: true, Stream: &stream{}, Client: loopback})
	if len(msgs) < 10 {
		t.Fatalf("%d messages for about 250 KB of records", len(msgs))
	}
	n := 0
	for i, m := range msgs {
		for j, rr := range m.Answer {
			first, last := i == 0 && j == 0, i == len(msgs)-1 && j == len(m.Answer)-1
			if _, soa := rr.(*dns.SOA); soa != (first || last) {
				t.Fatalf("message %d record %d: %v", i, j, rr)
			}
			if txt, ok := rr.(*dns.TXT); ok {
				if want := fmt.Sprintf("h%d.example.org.", n); txt.Hdr.Name != want {
					t.Fatalf("record %s, want %s", txt.Hdr.Name, want)
				}
				n++
			}
		}
	}
	if n != 2000 {
		t.Fatalf("%d TXT records transferred, want 2000", n)
	}
}

func TestTransferIXFR(t *testing.T) {
	h := fileHandler(t, "")
	ixfr := func(serial uint32) *dns.Msg {
		m := query("example.org.", dns.TypeIXFR)
		m.Ns = []dns.RR{&dns.SOA{Hdr: dns.RR_Header{Name: "example.org.", Rrtype: dns.TypeSOA, Class: dns.ClassINET},
			Ns: "ns.example.org.", Mbox: "hostmaster.example.org.", Serial: serial}}
		return m
	}
	tr := func() Transport { return Transport{TCP: true, Stream: &stream{}, Client: loopback} }
	// Up to date: the SOA alone.
	if msgs := transferOf(t, h, ixfr(7), tr()); len(msgs) != 1 || len(msgs[0].Answer) != 1 {
		t.Fatalf("up to date: %v", msgs)
	}
	// Older: the whole zone, as an AXFR.
	msgs := transferOf(t, h, ixfr(6), tr())
	if len(msgs) != 1 || len(msgs[0].Answer) != 7 {
		t.Fatalf("older serial: %v", msgs)
	}
}

// A transfer whose connection broke ends without a last message.
func TestTransferBrokenStream(t *testing.T) {
	var b strings.Builder
	for i := range 1000 {
		fmt.Fprintf(&b, "h%d TXT \"%s\"\n", i, strings.Repeat("x", 100))
	}
	h := fileHandler(t, b.String())
	s := &stream{err: errors.New("connection reset")}
	if out := h.Serve(pack(t, query("example.org.", dns.TypeAXFR)), Transport{TCP: true, Stream: s, Client: loopback}, nil); out != nil {
		t.Fatalf("a last message after the stream broke")
	}
	if len(s.msgs) != 1 {
		t.Fatalf("%d messages written after the first failed", len(s.msgs))
	}
}

// A referral from a file zone has no AA bit, and ANY does not turn it
// into RFC 8482's answer.
func TestServeReferral(t *testing.T) {
	h := fileHandler(t, "")
	for _, qtype := range []uint16{dns.TypeA, dns.TypeANY} {
		for _, tr := range []Transport{{}, {TCP: true}} {
			r := serve(t, h, pack(t, query("www.sub.example.org.", qtype)), tr)
			if r.Authoritative || r.Rcode != dns.RcodeSuccess || len(r.Answer) != 0 || len(r.Ns) != 1 || len(r.Extra) != 1 {
				t.Fatalf("%s: %v", dns.TypeToString[qtype], r)
			}
		}
	}
	r := serve(t, h, pack(t, query("WWW.Example.org.", dns.TypeA)), Transport{})
	if !r.Authoritative || len(r.Answer) != 1 || r.Answer[0].Header().Name != "WWW.Example.org." {
		t.Fatalf("www: %v", r)
	}
}

// A zone file's NXDOMAIN is final, also inside a kubernetes.fallthrough
// zone (a reverse zone narrowed around it): it never goes upstream.
func TestFileZoneNXDOMAINDoesNotFallThrough(t *testing.T) {
	h := fileHandler(t, "")
	h.Upstream = &Upstream{Fallthrough: []string{"org."}}
	for _, log := range []*slog.Logger{nil, slog.New(slog.DiscardHandler)} {
		h.QueryLog = log // a query log takes the full path, not the fast one
		for _, tr := range []Transport{{}, {TCP: true}} {
			r := serve(t, h, pack(t, query("nope.example.org.", dns.TypeA)), tr)
			if r.Rcode != dns.RcodeNameError || !r.Authoritative || len(r.Ns) != 1 {
				t.Fatalf("nope.example.org over TCP %v, query log %v: %v", tr.TCP, log != nil, r)
			}
		}
	}
}
