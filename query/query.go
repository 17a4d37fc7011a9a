// Package query turns one DNS request in wire format into one response in
// wire format: header checks, EDNS0, the answer from the zone core (or the
// resolver plane behind it), autopath, load balancing, case preservation,
// truncation and packing. Listeners call it in place, on their own
// goroutine; it keeps no state between requests.
package query

import (
	"log/slog"
	"net/netip"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/miekg/dns"

	"github.com/shardns/shardns/acl"
	"github.com/shardns/shardns/hosts"
	"github.com/shardns/shardns/metrics"
	"github.com/shardns/shardns/rewrite"
	"github.com/shardns/shardns/template"
	"github.com/shardns/shardns/zone"
)

const (
	headerSize = 12
	// MaxUDPSize caps the EDNS0 buffer a client may ask for; larger
	// answers go over TCP. 4096 is what the DNS flag day still allows.
	MaxUDPSize = 4096
)

// Handler answers requests from what Zones holds, or asks its owners.
type Handler struct {
	Config  *zone.Config
	Zones   zone.Reader  // the zones and directory questions are answered from
	Metrics *metrics.All // may be nil in tests
	Server  string       // the server label of metrics, e.g. dns://127.0.0.1:53
	// ViewName is the view label of metrics: the name of the view this
	// handler answers for, "" outside views (CoreDNS's metrics.WithView).
	ViewName string
	// Upstream answers names outside the cluster zones, and NXDOMAIN in the
	// fallthrough zones; nil refuses them.
	Upstream *Upstream
	// Autopath, when set, walks the client pod's search path on the server.
	Autopath ClientNamespaces
	// MeshClients, when set (a node-local process), tells the namespace
	// of a client pod, whose mesh hosts exported to it alone are then
	// answered to it (meshclients.go).
	MeshClients ClientNamespaces
	// IPv4Clients, when set, answers AAAA questions from the clients it
	// reports IPv4-only with NODATA, asking no one: they cannot use the
	// answer (a node-local process's nodeLocal.aaaa: nodata).
	IPv4Clients interface{ IPv4Only(netip.Addr) bool }
	// LoadBalance shuffles the order of A and AAAA records in each answer.
	LoadBalance bool
	// QueryLog logs every query; ErrorLog logs failures (SERVFAIL causes).
	QueryLog, ErrorLog *slog.Logger
	// QueryLogRule narrows the query log to some names and classes of
	// response, and formats its lines; nil: every query, shardns's fields.
	QueryLogRule *QueryLogRule
	// TransferLog logs zone transfers sent and refused; may be nil.
	TransferLog *slog.Logger
	// Cluster asks other replicas for zones held there; nil when this
	// replica holds every zone.
	Cluster *Cluster
	// Chaos answers version.bind and friends; nil refuses CHAOS questions.
	Chaos *Chaos
	// Rewrite changes questions before anything below answers them; nil:
	// no rules.
	Rewrite *rewrite.Rules
	// Hosts answers names from hosts entries before the cluster zones; nil:
	// no entries.
	Hosts *hosts.Hosts
	// Federation answers the names of cluster federations; nil: none.
	Federation *Federation
	// ACL refuses, filters or drops questions by source and type before
	// anything answers them; nil: every question is answered.
	ACL *acl.Lists
	// Template answers questions from record templates, after Rewrite and
	// before Hosts; nil: no templates.
	Template *template.Templates
	// Modify changes requests and responses (bufsize, nsid, header,
	// dns64); nil: nothing.
	Modify *Modifiers
	// Views answer the queries their conditions hold for, the first that
	// holds; the rest are answered here. Nil: nothing is evaluated.
	Views []View

	answers answerCache // the fast path's packed answers
	owned   answerCache // the fast path's packed answers of owners (serveOwner)
	metered meterCache  // the fast path's metric children
	// templateMatches are the fast path's template match counters, by
	// template.Match.
	templateMatches sync.Map
	timed           atomic.Uint64 // fast-path answers, for sampling their duration
}

// Transport is how a request arrived.
type Transport struct {
	TCP  bool // 64 KiB answers; otherwise the EDNS0 buffer size applies
	IPv6 bool // the client's address family, for metrics
	// Late writes responses that are ready only after Serve returned
	// (forwarded answers) to Client. Nil answers them with SERVFAIL.
	Late   LateWriter
	Client netip.AddrPort
	// Server is the listener's address the request came to (the
	// socket's own, an unspecified address when it listens on all), for
	// view expressions.
	Server netip.AddrPort
	// Stream, on a connection that can carry several messages for one
	// question (TCP), sends the leading messages of a zone transfer. Nil
	// refuses transfers.
	Stream StreamWriter
	// chaseDepth counts the lookups of CNAME targets of templated
	// answers that led to this request; 0 for a client's request.
	chaseDepth uint8
	// internal marks a question shardns asks itself (DNS64's): it is
	// answered as the client's, and not synthesised again.
	internal bool
}

// LateWriter sends a response produced after Serve returned. It must be
// safe to call from any goroutine.
type LateWriter interface {
	WriteLate(resp []byte, to netip.AddrPort)
}

// exchange is one request being answered.
type exchange struct {
	req     *dns.Msg
	reqSize int
	opt     *dns.OPT
	t       Transport
	zone    string // metrics label: the zone that answered
	start   time.Time
	rewrite *rewrite.Result // the rules that applied; asked is the question before them
	asked   dns.Question
	fed     *federated     // the question had a federation label, taken out
	meshNS  string         // the client's namespace, when it has mesh hosts of its own
	ede     *dns.EDNS0_EDE // an extended error for the OPT record of the answer
	resp    *dns.Msg       // the response packed, for the query log's classes and flags
}

// Serve answers req and returns the packed response appended to out[:0].
// It returns nil when the request is dropped (too short, or a response),
// when the answer comes later through t.Late (forwarded names), and when
// the connection of a zone transfer streamed through t.Stream broke.
func (h *Handler) Serve(req []byte, t Transport, out []byte) []byte {
	if drops(req) {
		if h.Metrics != nil {
			h.Metrics.DNS.Dropped.WithLabelValues(h.Server, "malformed").Inc()
		}
		return nil
	}
	if h.Views != nil {
		if v := h.pickView(req, t); v != nil {
			return v.Serve(req, t, out)
		}
	}
	if h.Modify != nil && h.Modify.DNS64 != nil {
		if b, ok := h.serveDNS64(req, t, out); ok {
			return b
		}
	}
	meshNS := h.meshNamespace(t)
	if meshNS == "" { // else no answer cached by name may be this client's
		if b, ok := h.serveFast(req, t, out); ok {
			if h.ACL != nil {
				h.countACL(acl.Allow, "")
			}
			return b
		}
	}
	x := &exchange{req: new(dns.Msg), reqSize: len(req), t: t, zone: ".", start: time.Now(), meshNS: meshNS}
	if err := x.req.Unpack(req); err != nil {
		b := AppendErrorReply(out, req, dns.RcodeFormatError)
		h.observe(x, dns.RcodeFormatError, len(b))
		return b
	}
	r := new(dns.Msg)
	switch {
	case x.req.Opcode != dns.OpcodeQuery:
		r.SetRcode(x.req, dns.RcodeNotImplemented)
		return h.pack(x, r, out)
	case len(x.req.Question) != 1:
		b := AppendErrorReply(out, req, dns.RcodeFormatError)
		h.observe(x, dns.RcodeFormatError, len(b))
		return b
	}
	x.opt = x.req.IsEdns0()
	if x.opt != nil && x.opt.Version() != 0 {
		r.SetRcode(x.req, dns.RcodeBadVers)
		return h.pack(x, r, out)
	}
	h.modifyRequest(x)
	q := x.req.Question[0]
	r.SetReply(x.req)
	if h.ACL != nil {
		if b, done := h.applyACL(x, r, out); done {
			return b
		}
	}
	if q.Qclass == dns.ClassCHAOS && h.Chaos != nil {
		return h.chaos(x, r, out)
	}
	name := lower(q.Name)
	if q.Qclass == dns.ClassINET && h.Rewrite != nil {
		var ok bool
		if name, ok = h.rewriteQuestion(x, name); !ok {
			r.Rcode = dns.RcodeServerFailure
			return h.pack(x, r, out)
		}
		q = x.req.Question[0]
	}
	if q.Qtype == dns.TypeAAAA && h.IPv4Clients != nil && x.t.Client.IsValid() && h.IPv4Clients.IPv4Only(x.t.Client.Addr()) {
		return h.pack(x, r, out) // NODATA: no records, NOERROR
	}
	if h.Template != nil {
		// Templates may answer any class (CoreDNS's .invalid example
		// answers CH too).
		if b, done := h.answerTemplate(x, r, name, out); done {
			return b
		}
	}
	if q.Qclass != dns.ClassINET {
		r.Rcode = dns.RcodeRefused
		return h.pack(x, r, out)
	}
	if q.Qtype == dns.TypeAXFR || q.Qtype == dns.TypeIXFR {
		return h.transfer(x, r, name, out)
	}
	if h.Hosts != nil {
		if b, done := h.answerHosts(x, r, name, out); done {
			return b
		}
	}
	if h.Autopath != nil {
		if b, done := h.autopath(x, r, name, out); done {
			return b
		}
	}
	if h.Federation != nil {
		name = h.federate(x, name)
	}
	resp := zone.Answer(h.Config, h.Zones, zone.Question{Name: name, Type: q.Qtype, Namespace: x.meshNS})
	if x.fed != nil && resp.Rcode == dns.RcodeNameError {
		return h.answerFederated(x, r, out)
	}
	if resp.External || (resp.Rcode == dns.RcodeNameError && h.fallsThrough(name)) {
		return h.forward(x, r, name, "", out)
	}
	if len(resp.Remote) > 0 || resp.Wait && h.Cluster != nil {
		if h.Cluster == nil {
			r.Rcode = dns.RcodeServerFailure
			return h.pack(x, r, out)
		}
		return h.remote(x, r, name, resp, out)
	}
	return h.answerHere(x, r, name, resp, out)
}

// answerHere answers x from resp, an answer from this replica's own zones.
func (h *Handler) answerHere(x *exchange, r *dns.Msg, name string, resp zone.Response, out []byte) []byte {
	if x.fed != nil && resp.Rcode == dns.RcodeNameError {
		return h.answerFederated(x, r, out)
	}
	q := x.req.Question[0]
	h.setAnswer(x, r, name, q.Name, resp)
	if b, done := h.chaseExternal(x, r, name, out); done {
		return b
	}
	if q.Qtype == dns.TypeANY && r.Rcode == dns.RcodeSuccess && !resp.Referral {
		// RFC 8482: a minimal answer to ANY for a name that exists.
		r.Answer = []dns.RR{&dns.HINFO{Hdr: dns.RR_Header{Name: q.Name, Rrtype: dns.TypeHINFO,
			Class: dns.ClassINET, Ttl: h.Config.TTL}, Cpu: "RFC8482"}}
		r.Ns, r.Extra = nil, nil
	}
	return h.pack(x, r, out)
}

// Observe records the metrics and the query log line of a request a
// listener answered itself (a name outside its server blocks, whoami), so
// those count as every other answer does; zone is the metrics label.
func (h *Handler) Observe(req *dns.Msg, reqSize int, t Transport, zone string, rcode, respSize int, start time.Time) {
	h.observe(&exchange{req: req, reqSize: reqSize, t: t, zone: zone, start: start}, rcode, respSize)
}

// setAnswer copies the authoritative answer for name into r, with the
// owner name spelled as asked.
func (h *Handler) setAnswer(x *exchange, r *dns.Msg, name, asked string, resp zone.Response) {
	// The metrics label: a cluster zone's domain, or the origin of the
	// file zone name is in, whether it was answered here or by an owner.
	route := h.Config.Domains.Route(name)
	x.zone = route.Origin
	if route.Kind == zone.RouteExternal {
		x.zone = h.Config.FileOrigin(h.Zones.Directory(), name)
	}
	r.Authoritative = !resp.Referral
	r.Rcode = resp.Rcode
	r.Answer = resp.Answer
	r.Ns = resp.Ns
	r.Extra = resp.Extra
	if name != asked {
		r.Answer = withOwnerCase(r.Answer, name, asked)
	}
	if h.LoadBalance {
		r.Answer = shuffledRuns(r.Answer, resp.Preferred)
	}
}

// pack sizes, truncates and packs r. The record slices of r are shared
// with snapshots: they are resliced or copied, never written.
func (h *Handler) pack(x *exchange, r *dns.Msg, out []byte) []byte {
	x.unfederate(r)
	x.unrewrite(r)
	h.modifyResponse(r)
	b, err := h.packMsg(x, r, out)
	if err != nil {
		h.logError(x, "packing the response", err)
		fail := new(dns.Msg)
		fail.SetRcode(x.req, dns.RcodeServerFailure)
		b, _ = fail.PackBuffer(out[:0])
		h.observe(x, dns.RcodeServerFailure, len(b))
		return b
	}
	x.resp = r
	h.observe(x, r.Rcode, len(b))
	return b
}

// packMsg sizes, truncates and packs r for the client of x.
func (h *Handler) packMsg(x *exchange, r *dns.Msg, out []byte) ([]byte, error) {
	size := dns.MinMsgSize
	switch {
	case x.t.TCP:
		size = dns.MaxMsgSize
	case x.opt != nil:
		size = min(max(int(x.opt.UDPSize()), dns.MinMsgSize), MaxUDPSize)
	}
	if x.opt != nil {
		// Truncate keeps room for the OPT record and puts it back last.
		// Clip first: the record slices belong to a snapshot.
		r.Extra = append(slices.Clip(r.Extra), h.replyOPT(x))
	}
	r.Truncate(size)
	r.Compress = true
	return r.PackBuffer(out[:0])
}

// drops reports requests that get no answer at all: shorter than a
// header, or a response (answering those invites reflection loops).
func drops(req []byte) bool { return len(req) < headerSize || req[2]&0x80 != 0 }

// Pending tells a listener, after Serve returned nil, that req will still
// be answered through Transport.Late (it was not dropped).
func Pending(req []byte) bool { return !drops(req) }

// AppendErrorReply appends to out[:0] a bare header answering req with
// rcode, for requests whose body cannot be trusted: the ID, opcode and
// RD of req, QR set, no sections. req holds at least a header.
func AppendErrorReply(out, req []byte, rcode int) []byte {
	out = append(out[:0], make([]byte, headerSize)...)
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

// lower lower-cases the ASCII letters of a name, allocating only when it
// has upper case.
func lower(name string) string { return zone.LowerASCII(name) }
