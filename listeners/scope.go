package listeners

import (
	"bytes"
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
	zone    string // the zone matched, the map's own key
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
	// late is the longest a block's own handler waits for a late answer.
	late time.Duration
	path string
}

// NewScope returns the scope of a listener serving blocks; path is the DNS
// over HTTPS path ("" for DefaultHTTPSPath).
func NewScope(blocks []Block, path string) *Scope {
	if path == "" {
		path = DefaultHTTPSPath
	}
	s := &Scope{path: path}
	for _, b := range blocks {
		if b.Handler != nil {
			s.late = max(s.late, b.Handler.LateBound())
		}
	}
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
			z = dns.CanonicalName(z)
			s.zones[z] = scopeBlock{zone: z, whoami: b.Whoami, handler: b.Handler}
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

// LateBound is how long a request through h, the listener's handler,
// or through a block's own chain may wait for a late answer.
func (s *Scope) LateBound(h *query.Handler) time.Duration {
	var d time.Duration
	if h != nil {
		d = h.LateBound()
	}
	if s != nil {
		d = max(d, s.late)
	}
	return d
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
	zone, b, ok, read := s.matchQuestion(req)
	if !read {
		return h, nil, false
	}
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

// matchQuestion is match for the name of req's only question; read is
// false when req is not one question. A name of letters, digits, hyphens
// and underscores (nearly every query) is matched from the wire without
// allocating: routing is on the fast path of every listener of several
// blocks, whose answers allocate nothing either.
func (s *Scope) matchQuestion(req []byte) (zone string, b scopeBlock, ok, read bool) {
	var buf [maxNameWire]byte
	if key, plain := questionKey(req, buf[:0]); plain {
		zone, b, ok = s.matchKey(key)
		return zone, b, ok, true
	}
	name, read := questionName(req)
	if !read {
		return "", scopeBlock{}, false, false
	}
	zone, b, ok = s.match(name)
	return zone, b, ok, true
}

// matchKey is match for a name that questionKey read: lower case, fully
// qualified, with no escape in it, so a dot always ends a label.
func (s *Scope) matchKey(key []byte) (zone string, b scopeBlock, ok bool) {
	for off := 0; off < len(key)-1; {
		if b, found := s.zones[string(key[off:])]; found { // no allocation: only a lookup
			return b.zone, b, true
		}
		off += bytes.IndexByte(key[off:], '.') + 1
	}
	if b, found := s.zones["."]; found {
		return ".", b, true
	}
	return "", scopeBlock{}, false
}

// maxNameWire is the longest name on the wire (RFC 1035 section 2.3.4);
// a name of plain labels is no longer in presentation form.
const maxNameWire = 255

// questionKey appends to buf the lower-case name of req's only question
// as the scope keys zones, when every label of it is plain (letters,
// digits, '-' and '_') and uncompressed; plain is false otherwise,
// including for anything that is not one question, and questionName then
// reads it as miekg/dns does, escapes and all.
func questionKey(req []byte, buf []byte) (key []byte, plain bool) {
	const header = 12
	if len(req) < header || req[2]&0x80 != 0 || binary.BigEndian.Uint16(req[4:]) != 1 {
		return nil, false
	}
	for i, wire := header, 0; i < len(req); {
		l := int(req[i])
		if wire += l + 1; l > 63 || wire >= maxNameWire || i+1+l > len(req) {
			return nil, false // a pointer, a reserved label type, too long or cut
		}
		if l == 0 {
			if len(buf) == 0 {
				buf = append(buf, '.')
			}
			return buf, true
		}
		for _, c := range req[i+1 : i+1+l] {
			switch {
			case 'A' <= c && c <= 'Z':
				c += 'a' - 'A'
			case 'a' <= c && c <= 'z', '0' <= c && c <= '9', c == '-', c == '_':
			default:
				return nil, false
			}
			buf = append(buf, c)
		}
		buf = append(buf, '.')
		i += 1 + l
	}
	return nil, false
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
