package query

import (
	"net"
	"net/netip"
	"time"

	"github.com/miekg/dns"
)

// DNS64 synthesises AAAA records from A records (RFC 6147) as CoreDNS's
// dns64 plugin does. An AAAA question is answered as usual first; when
// that answer is not NXDOMAIN and holds no AAAA record (or always, with
// TranslateAll), shardns asks itself the A question (the cluster zones,
// other replicas or the forwarder, whatever answers it) and answers with
// the A records' addresses embedded in Prefix. Either step may complete
// later, on a forwarder's goroutine: the synthesis then continues there
// and the answer goes out through Transport.Late.
type DNS64 struct {
	Prefix       netip.Prefix // of RFC 6052's lengths: 32, 40, 48, 56, 64 or 96
	TranslateAll bool         // synthesise even where AAAA records exist
	AllowIPv4    bool         // synthesise for IPv4 clients too, not only IPv6 ones
	// Translated counts synthesised answers; may be nil.
	Translated interface{ Inc() }
}

// soaTTLUnknown caps a synthesised record's TTL when the AAAA answer had
// no SOA (RFC 6147 section 5.1.7).
const soaTTLUnknown = 600

// synthesis is one AAAA question being answered by DNS64.
type synthesis struct {
	h     *Handler
	req   *dns.Msg // the client's question
	size  int      // of the client's request, for metrics
	t     Transport
	start time.Time
}

// serveDNS64 answers req when DNS64 applies to it; ok is false when it
// does not, and the request is served as any other. A lookup shardns
// makes of itself (t.internal) is never synthesised again.
func (h *Handler) serveDNS64(req []byte, t Transport, out []byte) (resp []byte, ok bool) {
	d := h.Modify.DNS64
	if t.internal || (!t.IPv6 && !d.AllowIPv4) {
		return nil, false
	}
	m := new(dns.Msg)
	if m.Unpack(req) != nil || m.Opcode != dns.OpcodeQuery || len(m.Question) != 1 ||
		m.Question[0].Qtype != dns.TypeAAAA || m.Question[0].Qclass != dns.ClassINET {
		return nil, false // not an AAAA question: answered, or refused, as usual
	}
	s := &synthesis{h: h, req: m, size: len(req), t: t, start: time.Now()}
	inner := t
	inner.internal = true
	if t.Late != nil {
		inner.Late = lateFunc(func(b []byte, _ netip.AddrPort) {
			if b = s.afterAAAA(b, nil); b != nil {
				t.Late.WriteLate(b, t.Client)
			}
		})
	}
	b := h.Serve(req, inner, out)
	if b == nil {
		return nil, true // answered later, or dropped
	}
	return s.afterAAAA(b, out), true
}

// afterAAAA takes the answer to the AAAA question: it is the answer when
// DNS64 does not apply to it; otherwise the A question is asked, and the
// synthesised answer returned, or nil when it comes later.
func (s *synthesis) afterAAAA(b, out []byte) []byte {
	aaaa := new(dns.Msg)
	if aaaa.Unpack(b) != nil || !s.h.Modify.DNS64.synthesises(aaaa) {
		return b
	}
	ask := s.req.Copy()
	ask.Question[0].Qtype = dns.TypeA
	wire, err := ask.Pack()
	if err != nil {
		return b
	}
	// The A answer is read, not sent: no size limit applies to it.
	inner := Transport{TCP: true, IPv6: s.t.IPv6, Client: s.t.Client, internal: true}
	if s.t.Late != nil {
		inner.Late = lateFunc(func(a []byte, _ netip.AddrPort) {
			s.t.Late.WriteLate(s.synthesise(aaaa, a, nil), s.t.Client)
		})
	}
	a := s.h.Serve(wire, inner, nil)
	if a == nil {
		return nil
	}
	return s.synthesise(aaaa, a, out)
}

// synthesises reports whether an AAAA answer is replaced: any answer but
// NXDOMAIN (RFC 6147 5.1.2; errors count as empty) that holds no AAAA
// record, or every such answer with TranslateAll. A truncated answer is
// left to the client to ask again over TCP.
func (d *DNS64) synthesises(aaaa *dns.Msg) bool {
	if aaaa.Rcode == dns.RcodeNameError || aaaa.Truncated {
		return false
	}
	if d.TranslateAll {
		return true
	}
	for _, rr := range aaaa.Answer {
		if rr.Header().Rrtype == dns.TypeAAAA {
			return false
		}
	}
	return true
}

// synthesise packs the answer made of the A answer a: its records with
// each A turned into an AAAA in the prefix, whose TTL is at most the AAAA
// answer's SOA TTL (600 without one), its rcode, authority and
// additional sections. Like CoreDNS's, it is a fresh reply: AA and RA
// are clear and the header rules of responses do not apply.
func (s *synthesis) synthesise(aaaa *dns.Msg, a []byte, out []byte) []byte {
	resp := new(dns.Msg)
	if err := resp.Unpack(a); err != nil {
		resp.SetRcode(s.req, dns.RcodeServerFailure)
	}
	soaTTL := uint32(soaTTLUnknown)
	for _, rr := range aaaa.Ns {
		if soa, ok := rr.(*dns.SOA); ok {
			soaTTL = soa.Hdr.Ttl
		}
	}
	d := s.h.Modify.DNS64
	r := new(dns.Msg)
	r.SetReply(s.req)
	r.Rcode = resp.Rcode
	r.Truncated = resp.Truncated
	r.Ns = resp.Ns
	r.Extra = withoutOPT(resp.Extra)
	r.Answer = make([]dns.RR, 0, len(resp.Answer))
	for _, rr := range resp.Answer {
		if v4, ok := rr.(*dns.A); ok && v4.A.To4() != nil {
			rr = &dns.AAAA{Hdr: dns.RR_Header{Name: v4.Hdr.Name, Rrtype: dns.TypeAAAA, Class: v4.Hdr.Class,
				Ttl: min(v4.Hdr.Ttl, soaTTL)}, AAAA: embed(d.Prefix, v4.A).AsSlice()}
		}
		r.Answer = append(r.Answer, rr)
	}
	if d.Translated != nil {
		d.Translated.Inc()
	}
	x := &exchange{req: s.req, reqSize: s.size, opt: s.req.IsEdns0(), t: s.t, zone: ".", start: s.start}
	b, err := s.h.packMsg(x, r, out)
	if err != nil {
		s.h.logError(x, "packing the synthesised answer", err)
		fail := new(dns.Msg)
		fail.SetRcode(s.req, dns.RcodeServerFailure)
		b, _ = fail.PackBuffer(out[:0])
	}
	return b
}

// embed puts an IPv4 address into an IPv6 prefix as RFC 6052 section 2.2
// lays it out: after the prefix's bits, skipping bits 64–71 (the "u"
// octet, always zero), the rest of the address behind them.
func embed(prefix netip.Prefix, ip net.IP) netip.Addr {
	v4 := netip.AddrFrom4([4]byte(ip.To4()))
	var v6 [16]byte
	p := prefix.Addr().As16()
	n := prefix.Bits() / 8
	copy(v6[:n], p[:n])
	i := n
	for _, octet := range v4.As4() {
		if i == 8 {
			i++ // the u octet
		}
		v6[i] = octet
		i++
	}
	return netip.AddrFrom16(v6)
}

// lateFunc is a LateWriter made of a function.
type lateFunc func(resp []byte, to netip.AddrPort)

func (f lateFunc) WriteLate(resp []byte, to netip.AddrPort) { f(resp, to) }
