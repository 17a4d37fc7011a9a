// Package query turns one DNS request in wire format into one response in
// wire format: header checks, EDNS0, answer from the zone core, case
// preservation, truncation and packing. Listeners call it in place, on
// their own goroutine; it holds no state of its own.
package query

import (
	"net"
	"slices"
	"strings"
	"time"

	"github.com/miekg/dns"

	"github.com/shardns/shardns/metrics"
	"github.com/shardns/shardns/zone"
)

const (
	headerSize = 12
	// MaxUDPSize caps the EDNS0 buffer a client may ask for; larger
	// answers go over TCP. 4096 is what the DNS flag day still allows.
	MaxUDPSize = 4096
	// optSize is the wire size of an OPT record without options.
	optSize = 11
)

// Handler answers requests from a view of the zones.
type Handler struct {
	Config  *zone.Config
	View    zone.View
	Metrics *metrics.All // may be nil in tests
	Server  string       // the server label of metrics, e.g. dns://127.0.0.1:53
	// Upstream answers names outside the cluster zones, and NXDOMAIN in the
	// fallthrough zones; nil refuses them.
	Upstream *Upstream
}

// Transport is how a request arrived.
type Transport struct {
	TCP  bool // 64 KiB answers; otherwise the EDNS0 buffer size applies
	IPv6 bool // the client's address family, for metrics
	// Late writes responses that are ready only after Serve returned
	// (forwarded answers) to Client. Nil answers them with SERVFAIL.
	Late   LateWriter
	Client net.Addr
}

// LateWriter sends a response produced after Serve returned. It must be
// safe to call from any goroutine.
type LateWriter interface {
	WriteLate(resp []byte, to net.Addr)
}

// exchange is one request being answered.
type exchange struct {
	req   *dns.Msg
	opt   *dns.OPT
	t     Transport
	zone  string // metrics label: the zone that answered
	start time.Time
}

// Serve answers req and returns the packed response appended to out[:0].
// It returns nil when the request is dropped (too short, or a response)
// and when the answer comes later through t.Late (forwarded names).
func (h *Handler) Serve(req []byte, t Transport, out []byte) []byte {
	if drops(req) {
		if h.Metrics != nil {
			h.Metrics.DNS.Dropped.WithLabelValues(h.Server, "malformed").Inc()
		}
		return nil
	}
	x := &exchange{req: new(dns.Msg), t: t, zone: ".", start: time.Now()}
	if err := x.req.Unpack(req); err != nil {
		h.observe(x, dns.RcodeFormatError)
		return append(out[:0], errorReply(req, dns.RcodeFormatError)...)
	}
	r := new(dns.Msg)
	switch {
	case x.req.Opcode != dns.OpcodeQuery:
		r.SetRcode(x.req, dns.RcodeNotImplemented)
		return h.pack(x, r, out)
	case len(x.req.Question) != 1:
		h.observe(x, dns.RcodeFormatError)
		return append(out[:0], errorReply(req, dns.RcodeFormatError)...)
	}
	x.opt = x.req.IsEdns0()
	if x.opt != nil && x.opt.Version() != 0 {
		r.SetRcode(x.req, dns.RcodeBadVers)
		return h.pack(x, r, out)
	}
	q := x.req.Question[0]
	r.SetReply(x.req)
	if q.Qclass != dns.ClassINET {
		r.Rcode = dns.RcodeRefused
		return h.pack(x, r, out)
	}
	name := lower(q.Name)
	route := h.Config.Domains.Route(name)
	resp := zone.Answer(h.Config, h.View, zone.Question{Name: name, Type: q.Qtype})
	if resp.External || (resp.Rcode == dns.RcodeNameError && h.Upstream.fallsThrough(name)) {
		return h.forward(x, r, name, out)
	}
	x.zone = route.Origin
	r.Authoritative = true
	r.Rcode = resp.Rcode
	r.Answer = resp.Answer
	r.Ns = resp.Ns
	r.Extra = resp.Extra
	if name != q.Name {
		r.Answer = withOwnerCase(r.Answer, name, q.Name)
	}
	return h.pack(x, r, out)
}

// drops reports requests that get no answer at all: shorter than a
// header, or a response (answering those invites reflection loops).
func drops(req []byte) bool { return len(req) < headerSize || req[2]&0x80 != 0 }

// Pending tells a listener, after Serve returned nil, that req will still
// be answered through Transport.Late (it was not dropped).
func Pending(req []byte) bool { return !drops(req) }

// pack sizes, truncates and packs r. The record slices of r are shared
// with snapshots: they are resliced or copied, never written.
func (h *Handler) pack(x *exchange, r *dns.Msg, out []byte) []byte {
	size := dns.MinMsgSize
	switch {
	case x.t.TCP:
		size = dns.MaxMsgSize
	case x.opt != nil:
		size = min(max(int(x.opt.UDPSize()), dns.MinMsgSize), MaxUDPSize)
	}
	if x.opt != nil {
		size -= optSize
	}
	r.Compress = true
	r.Truncate(size)
	r.Compress = true
	if x.opt != nil {
		reply := &dns.OPT{Hdr: dns.RR_Header{Name: ".", Rrtype: dns.TypeOPT}}
		reply.SetUDPSize(MaxUDPSize)
		r.Extra = append(slices.Clip(r.Extra), reply)
	}
	b, err := r.PackBuffer(out[:0])
	if err != nil {
		fail := new(dns.Msg)
		fail.SetRcode(x.req, dns.RcodeServerFailure)
		b, _ = fail.PackBuffer(out[:0])
		h.observe(x, dns.RcodeServerFailure)
		return b
	}
	h.observe(x, r.Rcode)
	return b
}

func (h *Handler) observe(x *exchange, rcode int) {
	if h.Metrics == nil {
		return
	}
	m := h.Metrics.DNS
	proto, family, qtype := "udp", "1", "other"
	if x.t.TCP {
		proto = "tcp"
	}
	if x.t.IPv6 {
		family = "2"
	}
	if len(x.req.Question) == 1 {
		qtype = typeLabel(x.req.Question[0].Qtype)
	}
	m.Requests.WithLabelValues(h.Server, x.zone, "", proto, family, qtype).Inc()
	m.Responses.WithLabelValues(h.Server, x.zone, "", rcodeLabel(rcode), "").Inc()
	m.Duration.WithLabelValues(h.Server, x.zone, "", qtype).Observe(time.Since(x.start).Seconds())
}

// typeLabel keeps the metric's cardinality bounded, as CoreDNS does: the
// common types by name, everything else as "other".
func typeLabel(t uint16) string {
	switch t {
	case dns.TypeA, dns.TypeAAAA, dns.TypeSRV, dns.TypePTR, dns.TypeTXT, dns.TypeCNAME,
		dns.TypeMX, dns.TypeNS, dns.TypeSOA, dns.TypeAXFR, dns.TypeIXFR, dns.TypeANY, dns.TypeHTTPS:
		return dns.TypeToString[t]
	}
	return "other"
}

func rcodeLabel(rc int) string {
	if s, ok := dns.RcodeToString[rc]; ok {
		return s
	}
	return "other"
}

// errorReply is a bare header answering req with rcode, for requests whose
// body cannot be trusted. req holds at least a header.
func errorReply(req []byte, rcode int) []byte {
	out := make([]byte, headerSize)
	if len(req) >= 4 {
		copy(out, req[:4])
	}
	out[2] = 0x80 | (out[2] & 0x79) // QR; keep opcode and RD
	out[3] = byte(rcode & 0xF)
	return out
}

// withOwnerCase returns rrs with owner lname written as the client spelled
// it, so answers echo the question's letter case as CoreDNS's do.
func withOwnerCase(rrs []dns.RR, lname, asked string) []dns.RR {
	out := make([]dns.RR, len(rrs))
	for i, rr := range rrs {
		if rr.Header().Name == lname {
			rr = dns.Copy(rr)
			rr.Header().Name = asked
		}
		out[i] = rr
	}
	return out
}

// lower lower-cases an ASCII name, allocating only when it has upper case.
func lower(name string) string {
	for i := 0; i < len(name); i++ {
		if c := name[i]; 'A' <= c && c <= 'Z' {
			return strings.ToLower(name)
		}
	}
	return name
}
