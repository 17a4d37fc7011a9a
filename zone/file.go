package zone

import (
	"fmt"
	"net/netip"
	"slices"
	"strings"

	"github.com/miekg/dns"
)

// File zones are authoritative zones read from RFC 1035 zone files. They
// shard like every other zone: the zone key is the origin, every replica
// knows the origins (the Directory carries them, see WithFiles), and only
// the owners hold the records. Answers follow RFC 1034 §4.3.2 with RFC
// 4592 wildcards, and CoreDNS's file plugin where the RFCs leave room.

// FileZone is the checked content of one zone file: what the zone file
// source sends and a file zone's snapshot is built from. It is immutable
// once built.
type FileZone struct {
	Origin string // lower-case and fully qualified: the zone key
	File   string // where it was read, for logs
	Serial uint32 // of its SOA
	// Records are the SOA first, then every other record in file order,
	// with owner names (and the targets of NS, CNAME, MX and SRV)
	// lower-cased and duplicates dropped.
	Records []dns.RR
	// TransferTo lists who may transfer the zone (AXFR and IXFR over
	// TCP); empty: nobody.
	TransferTo []netip.Prefix
}

// SOA returns the zone's SOA record.
func (f *FileZone) SOA() *dns.SOA { return f.Records[0].(*dns.SOA) }

// NewFileZone checks the records read from file for origin and returns
// the zone. An error names the file and the offending record.
func NewFileZone(origin, file string, records []dns.RR, transferTo []netip.Prefix) (*FileZone, error) {
	origin = Fqdn(origin)
	f := &FileZone{Origin: origin, File: file, TransferTo: transferTo}
	var soa *dns.SOA
	byName := map[string]map[uint16][]dns.RR{}
	var rest []dns.RR
	for _, rr := range records {
		h := rr.Header()
		h.Name = canonicalName(h.Name)
		lowerTarget(rr)
		what := fmt.Sprintf("%s: %s %s", file, h.Name, dns.TypeToString[h.Rrtype])
		if h.Class != dns.ClassINET {
			return nil, fmt.Errorf("%s: class %s; only IN records are served", what, dns.ClassToString[h.Class])
		}
		if !InZone(h.Name, origin) {
			return nil, fmt.Errorf("%s: outside the zone %s", what, origin)
		}
		sets := byName[h.Name]
		if sets == nil {
			sets = map[uint16][]dns.RR{}
			byName[h.Name] = sets
		}
		if slices.ContainsFunc(sets[h.Rrtype], func(o dns.RR) bool { return dns.IsDuplicate(o, rr) }) {
			continue // RFC 2181 §5: an RRset holds no duplicates
		}
		if err := checkRecord(rr, origin, sets, soa != nil); err != nil {
			return nil, fmt.Errorf("%s: %w", what, err)
		}
		sets[h.Rrtype] = append(sets[h.Rrtype], rr)
		if s, ok := rr.(*dns.SOA); ok {
			soa = s
			continue
		}
		rest = append(rest, rr)
	}
	if soa == nil {
		return nil, fmt.Errorf("%s: no SOA record at the origin %s", file, origin)
	}
	f.Serial = soa.Serial
	f.Records = append([]dns.RR{soa}, rest...)
	return f, nil
}

// checkRecord rejects what a zone cannot hold, or what shardns would
// answer wrongly: a second SOA or one below the apex, CNAME beside other
// data (RFC 1034 §3.6.2), wildcard delegations and DNAME, which is not
// synthesised.
func checkRecord(rr dns.RR, origin string, sets map[uint16][]dns.RR, haveSOA bool) error {
	h := rr.Header()
	others := 0 // records beside which a CNAME cannot stand
	for t, set := range sets {
		if t != dns.TypeCNAME && t != dns.TypeRRSIG && t != dns.TypeNSEC {
			others += len(set)
		}
	}
	cnames := len(sets[dns.TypeCNAME])
	switch h.Rrtype {
	case dns.TypeRRSIG, dns.TypeNSEC:
		return nil
	case dns.TypeSOA:
		if h.Name != origin {
			return fmt.Errorf("an SOA record belongs at the origin %s", origin)
		}
		if haveSOA {
			return fmt.Errorf("a second SOA record")
		}
	case dns.TypeCNAME:
		switch {
		case h.Name == origin:
			return fmt.Errorf("CNAME at the origin, which holds the SOA")
		case cnames > 0:
			return fmt.Errorf("a second CNAME at the same name")
		case others > 0:
			return fmt.Errorf("CNAME and other data at the same name")
		}
		return nil
	case dns.TypeNS:
		if strings.HasPrefix(h.Name, "*.") {
			return fmt.Errorf("NS records at a wildcard name are not served")
		}
	case dns.TypeDNAME:
		return fmt.Errorf("DNAME records are not served")
	}
	if cnames > 0 {
		return fmt.Errorf("CNAME and other data at the same name")
	}
	return nil
}

// canonicalName lower-cases a name and writes escapes as a name unpacked
// from the wire does (\046 and \. are the same byte), so records match
// the questions asked.
func canonicalName(name string) string {
	name = Fqdn(name)
	if !strings.ContainsRune(name, '\\') {
		return name
	}
	buf := make([]byte, len(name)+1)
	off, err := dns.PackDomainName(name, buf, 0, nil, false)
	if err != nil {
		return name
	}
	out, _, err := dns.UnpackDomainName(buf[:off], 0)
	if err != nil {
		return name
	}
	return LowerASCII(out)
}

// lowerTarget lower-cases the names records point at, as CoreDNS does, so
// in-zone targets are found.
func lowerTarget(rr dns.RR) {
	switch r := rr.(type) {
	case *dns.NS:
		r.Ns = canonicalName(r.Ns)
	case *dns.CNAME:
		r.Target = canonicalName(r.Target)
	case *dns.MX:
		r.Mx = canonicalName(r.Mx)
	case *dns.SRV:
		r.Target = canonicalName(r.Target)
	case *dns.SOA:
		r.Ns, r.Mbox = canonicalName(r.Ns), canonicalName(r.Mbox)
	}
}

// fileIndex is the prebuilt lookup structure of a file zone's snapshot.
type fileIndex struct {
	origin string
	names  map[string]*fileNode // every owner name and every empty non-terminal
	apexNS []dns.RR
	negSOA []dns.RR // the SOA for negative answers, TTL min(TTL, minimum) (RFC 2308 §3)
	cuts   bool     // the zone delegates some names
}

// fileNode is one name of a file zone.
type fileNode struct {
	sets map[uint16][]dns.RR
	// extra holds the additional records of an answer of that type: A
	// and AAAA of in-zone MX and SRV targets, glue of NS records.
	extra map[uint16][]dns.RR
	cname *dns.CNAME
	cut   bool      // NS below the apex: the name is delegated
	wild  *fileNode // the wildcard "*.<name>", the source of synthesis below
}

// BuildFileZone builds the snapshot of a file zone.
func BuildFileZone(f *FileZone) *Snapshot {
	ix := &fileIndex{origin: f.Origin, names: map[string]*fileNode{}}
	node := func(name string) *fileNode {
		n := ix.names[name]
		if n == nil {
			n = &fileNode{sets: map[uint16][]dns.RR{}}
			ix.names[name] = n
		}
		return n
	}
	for _, rr := range f.Records {
		h := rr.Header()
		n := node(h.Name)
		n.sets[h.Rrtype] = append(n.sets[h.Rrtype], rr)
		// Empty non-terminals exist (RFC 4592 §2.2.2): they answer NODATA
		// and stop wildcards.
		for p := up(h.Name); len(p) > len(f.Origin) && ix.names[p] == nil; p = up(p) {
			node(p)
		}
	}
	node(f.Origin)
	for name, n := range ix.names {
		if c := n.sets[dns.TypeCNAME]; len(c) > 0 {
			n.cname = c[0].(*dns.CNAME)
		}
		if name != f.Origin && len(n.sets[dns.TypeNS]) > 0 {
			n.cut, ix.cuts = true, true
		}
		if base, ok := strings.CutPrefix(name, "*."); ok && ix.names[base] != nil {
			ix.names[base].wild = n
		}
		n.extra = ix.additional(n)
	}
	ix.apexNS = ix.names[f.Origin].sets[dns.TypeNS]
	soa := dns.Copy(f.SOA()).(*dns.SOA)
	soa.Hdr.Ttl = min(soa.Hdr.Ttl, soa.Minttl)
	ix.negSOA = []dns.RR{soa}
	return &Snapshot{Key: f.Origin, Origin: f.Origin, Serial: f.Serial, File: f, file: ix, soa: ix.negSOA}
}

// additional prebuilds the additional section of n's MX, SRV and NS
// answers: the addresses of their targets that the zone holds, glue below
// a delegation included (RFC 9471 asks for in-domain and sibling glue).
func (ix *fileIndex) additional(n *fileNode) map[uint16][]dns.RR {
	var out map[uint16][]dns.RR
	for _, t := range []uint16{dns.TypeMX, dns.TypeSRV, dns.TypeNS} {
		var extra []dns.RR
		seen := map[string]bool{}
		for _, rr := range n.sets[t] {
			var target string
			switch r := rr.(type) {
			case *dns.MX:
				target = r.Mx
			case *dns.SRV:
				target = r.Target
			case *dns.NS:
				target = r.Ns
			}
			tn := ix.names[target]
			if tn == nil || seen[target] || !InZone(target, ix.origin) {
				continue
			}
			seen[target] = true
			extra = append(extra, tn.sets[dns.TypeA]...)
			extra = append(extra, tn.sets[dns.TypeAAAA]...)
		}
		if len(extra) > 0 {
			if out == nil {
				out = map[uint16][]dns.RR{}
			}
			out[t] = extra
		}
	}
	return out
}

// up drops the first label of a name, escapes respected; "" past the last.
func up(name string) string {
	off, end := dns.NextLabel(name, 0)
	if end {
		return ""
	}
	return name[off:]
}

// FileOrigin returns the origin of the file zone that name lies in (the
// longest), or "". It allocates nothing.
func (d *Directory) FileOrigin(name string) string {
	if len(d.files) == 0 {
		return ""
	}
	for s := name; s != ""; s = up(s) {
		if origin, ok := d.files[s]; ok {
			// The directory's own string, never a part of name: the fast
			// path's name aliases the request buffer, and the origin
			// outlives it as a metrics label.
			return origin
		}
	}
	// up stops past a name's last label, short of the root: a root zone
	// file (a Corefile's `. { file db.root }`) holds every other name.
	if origin, ok := d.files["."]; ok {
		return origin
	}
	return ""
}

// WithFiles sets the file zone origins of a directory that is not
// published yet, and returns it.
func (d *Directory) WithFiles(origins map[string]struct{}) *Directory {
	d.files = make(map[string]string, len(origins))
	for o := range origins {
		d.files[o] = o
	}
	return d
}

// answerFile answers a name of file zone key, or says which replicas hold
// it. Zone transfers are the query layer's (they need several messages
// on one TCP connection); a question of that type reaching here is
// refused.
func answerFile(v Reader, key string, q Question) Response {
	if q.Type == dns.TypeAXFR || q.Type == dns.TypeIXFR {
		return Response{Rcode: dns.RcodeRefused}
	}
	s := v.Zone(key)
	if s == nil || s.file == nil {
		if order := v.Remote(key); len(order) > 0 {
			return Response{Remote: order, Zone: key}
		}
		// Known but not loaded yet, or no owner reachable: never an
		// answer that could be wrong.
		return Response{Rcode: dns.RcodeServerFailure}
	}
	return s.file.answer(q)
}

// answer answers q, following CNAMEs inside the zone.
func (ix *fileIndex) answer(q Question) Response {
	r, target := ix.lookup(q.Name, q.Type)
	if target == "" {
		return r
	}
	chain := slices.Clone(r.Answer)
	for range maxCNAMEDepth {
		if !InZone(target, ix.origin) {
			break // another zone's name: the client's resolver follows it
		}
		next, nextTarget := ix.lookup(target, q.Type)
		if next.Referral {
			break // delegated: not ours to answer
		}
		if nextTarget != "" && slices.Contains(chain, next.Answer[0]) {
			break // a loop
		}
		chain = append(chain, next.Answer...)
		if nextTarget == "" {
			// RFC 6604 §3: the rcode and authority of the last name.
			next.Answer = chain
			return next
		}
		target = nextTarget
	}
	return Response{Answer: chain, Ns: ix.apexNS}
}

// lookup answers one name without following a CNAME: a CNAME found (for
// another type than CNAME) comes back as the answer, with its target.
func (ix *fileIndex) lookup(name string, qtype uint16) (Response, string) {
	if cut, at := ix.delegation(name); cut != nil && (qtype != dns.TypeDS || at != name) {
		// A referral; DS at the cut itself is the parent's to answer.
		return Response{Ns: cut.sets[dns.TypeNS], Extra: cut.extra[dns.TypeNS], Referral: true}, ""
	}
	n, owner := ix.names[name], ""
	if n == nil {
		if n = ix.closestEncloser(name).wild; n == nil {
			return Response{Rcode: dns.RcodeNameError, Ns: ix.negSOA}, ""
		}
		owner = name // synthesised from the wildcard (RFC 4592 §3.3.1)
	}
	if n.cname != nil && qtype != dns.TypeCNAME {
		return Response{Answer: named(n.sets[dns.TypeCNAME], owner)}, n.cname.Target
	}
	rrs := n.sets[qtype]
	if len(rrs) == 0 {
		return Response{Ns: ix.negSOA}, "" // NODATA, empty non-terminals included
	}
	r := Response{Answer: named(rrs, owner), Extra: n.extra[qtype]}
	if qtype != dns.TypeNS {
		r.Ns = ix.apexNS // as CoreDNS's file plugin
	}
	return r, ""
}

// named returns rrs, or copies of them owned by owner when set.
func named(rrs []dns.RR, owner string) []dns.RR {
	if owner == "" {
		return rrs
	}
	return withOwner(rrs, owner)
}

// delegation returns the highest delegation at or above name, below the
// apex, and its name. Names below a delegation (glue included) are not
// answered with authority.
func (ix *fileIndex) delegation(name string) (*fileNode, string) {
	if !ix.cuts {
		return nil, ""
	}
	var cut *fileNode
	var at string
	for s := name; len(s) > len(ix.origin); s = up(s) {
		if n := ix.names[s]; n != nil && n.cut {
			cut, at = n, s
		}
	}
	return cut, at
}

// closestEncloser returns the longest existing ancestor of a name that
// does not exist (RFC 4592 §3.3.1); at worst the apex.
func (ix *fileIndex) closestEncloser(name string) *fileNode {
	for s := up(name); len(s) > len(ix.origin); s = up(s) {
		if n := ix.names[s]; n != nil {
			return n
		}
	}
	return ix.names[ix.origin]
}

// Transfer returns the records of a full zone transfer (RFC 5936 §2.2):
// the SOA, every other record, the SOA again; nil when s is not a file
// zone.
func (s *Snapshot) Transfer() []dns.RR {
	if s.File == nil {
		return nil
	}
	out := make([]dns.RR, 0, len(s.File.Records)+1)
	return append(append(out, s.File.Records...), s.File.Records[0])
}

// TransferAllowed reports whether a client at addr may transfer s.
func (s *Snapshot) TransferAllowed(addr netip.Addr) bool {
	if s.File == nil {
		return false
	}
	addr = addr.Unmap()
	for _, p := range s.File.TransferTo {
		if p.Contains(addr) {
			return true
		}
	}
	return false
}
