package listeners

import (
	"encoding/binary"
	"strings"
	"time"

	"github.com/miekg/dns"

	"github.com/shardns/shardns/query"
)

// DefaultHTTPSPath is where DNS over HTTPS is served unless configured.
const DefaultHTTPSPath = "/dns-query"

// Block is one server block sharing a listener: the zones it answers and
// how. Several blocks on one address split the names between them, as
// Corefile server blocks on one port do.
type Block struct {
	// Zones answered; empty or "." is every name.
	Zones []string
	// Whoami answers with the client's address, port and transport
	// instead of records.
	Whoami bool
	// Handler answers the block's names through the block's own chain;
	// nil: the listener's handler.
	Handler *query.Handler
}

// scopeBlock is what the scope knows of the block a zone belongs to.
type scopeBlock struct {
	whoami  bool
	handler *query.Handler // nil: the listener's
}

// Scope is what one listener answers: its server blocks and, for DNS over
// HTTPS, the URL path. It is immutable; a reload replaces it whole.
type Scope struct {
	// zones maps each zone (lower case, fully qualified) to its block.
	// Nil when one ordinary block answers every name, so such listeners
	// skip the scope altogether.
	zones map[string]scopeBlock
	// only is the handler of that one block, nil for the listener's.
	only *query.Handler
	path string
}

// NewScope returns the scope of a listener serving blocks; path is the DNS
// over HTTPS path ("" for DefaultHTTPSPath).
func NewScope(blocks []Block, path string) *Scope {
	if path == "" {
		path = DefaultHTTPSPath
	}
	s := &Scope{path: path}
	if len(blocks) == 1 && !blocks[0].Whoami && everyName(blocks[0].Zones) {
		s.only = blocks[0].Handler
		return s
	}
	s.zones = map[string]scopeBlock{}
	for _, b := range blocks {
		zones := b.Zones
		if len(zones) == 0 {
			zones = []string{"."}
		}
		for _, z := range zones {
			s.zones[dns.CanonicalName(z)] = scopeBlock{whoami: b.Whoami, handler: b.Handler}
		}
	}
	return s
}

func everyName(zones []string) bool {
	for _, z := range zones {
		if z == "." {
			return true
		}
	}
	return len(zones) == 0
}

// Path is the URL path DNS over HTTPS is served on.
func (s *Scope) Path() string {
	if s == nil {
		return DefaultHTTPSPath
	}
	return s.path
}

// Match returns the longest zone of the scope holding name (any letter
// case) and whether that zone answers as whoami; ok is false for names
// outside every zone.
func (s *Scope) Match(name string) (zone string, whoami, ok bool) {
	zone, b, ok := s.match(name)
	return zone, b.whoami, ok
}

// match is Match with the zone's block.
func (s *Scope) match(name string) (zone string, b scopeBlock, ok bool) {
	if s == nil || s.zones == nil {
		return ".", scopeBlock{}, true
	}
	name = dns.CanonicalName(name)
	for off := 0; ; {
		if b, found := s.zones[name[off:]]; found {
			return name[off:], b, true
		}
		next, end := dns.NextLabel(name, off)
		if end {
			break
		}
		off = next
	}
	if b, found := s.zones["."]; found {
		return ".", b, true
	}
	return "", scopeBlock{}, false
}

// refusedZone is the metrics zone label of names no block answers, as
// CoreDNS labels the queries no server block matches.
const refusedZone = "dropped"

// route picks the handler of req's block, h (the listener's) unless the
// block has a chain of its own, and answers req itself when the scope
// decides the answer: REFUSED for a name outside every zone, whoami for
// a whoami zone (done). Everything else, including requests it cannot
// read (which the handler answers FORMERR or drops), goes on to the
// handler returned.
func (s *Scope) route(h *query.Handler, req []byte, t query.Transport, out []byte) (*query.Handler, []byte, bool) {
	if s == nil {
		return h, nil, false
	}
	if s.zones == nil {
		if s.only != nil {
			return s.only, nil, false
		}
		return h, nil, false
	}
	name, ok := questionName(req)
	if !ok {
		return h, nil, false
	}
	zone, b, ok := s.match(name)
	if b.handler != nil {
		h = b.handler
	}
	if ok && !b.whoami {
		return h, nil, false
	}
	start := time.Now()
	m := new(dns.Msg)
	if m.Unpack(req) != nil || m.Opcode != dns.OpcodeQuery {
		return h, nil, false
	}
	var r *dns.Msg
	if ok {
		r = whoamiReply(m, t)
	} else {
		zone = refusedZone
		r = new(dns.Msg)
		r.SetRcode(m, dns.RcodeRefused)
	}
	if opt := m.IsEdns0(); opt != nil {
		r.SetEdns0(query.MaxUDPSize, false)
	}
	resp, err := r.PackBuffer(out[:0])
	if err != nil {
		return h, nil, false
	}
	h.Observe(m, len(req), t, zone, r.Rcode, len(resp), start)
	return h, resp, true
}

// questionName reads the name of the only question of a query without
// unpacking the message; ok is false for anything else.
func questionName(req []byte) (string, bool) {
	const header = 12
	if len(req) < header || req[2]&0x80 != 0 || binary.BigEndian.Uint16(req[4:]) != 1 {
		return "", false
	}
	name, _, err := dns.UnpackDomainName(req, header)
	return name, err == nil
}

// whoamiReply answers m as CoreDNS's whoami plugin does: an empty answer
// section, and in the additional section the client's address (A or
// AAAA) and an SRV record _udp or _tcp.qname with the client's port.
func whoamiReply(m *dns.Msg, t query.Transport) *dns.Msg {
	r := new(dns.Msg)
	r.SetReply(m)
	r.Authoritative = true
	q := m.Question[0]
	if ip := t.Client.Addr().Unmap(); ip.Is4() {
		r.Extra = append(r.Extra, &dns.A{Hdr: dns.RR_Header{Name: q.Name, Rrtype: dns.TypeA, Class: q.Qclass},
			A: ip.AsSlice()})
	} else if ip.Is6() {
		r.Extra = append(r.Extra, &dns.AAAA{Hdr: dns.RR_Header{Name: q.Name, Rrtype: dns.TypeAAAA, Class: q.Qclass},
			AAAA: ip.AsSlice()})
	}
	proto := "_udp."
	if t.TCP {
		proto = "_tcp."
	}
	owner := proto + strings.TrimPrefix(q.Name, ".")
	if _, ok := dns.IsDomainName(owner); ok {
		r.Extra = append(r.Extra, &dns.SRV{Hdr: dns.RR_Header{Name: owner, Rrtype: dns.TypeSRV, Class: q.Qclass},
			Port: t.Client.Port(), Target: "."})
	}
	return r
}
