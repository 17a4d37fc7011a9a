package zone

import (
	"encoding/binary"
	"net"
	"net/netip"

	"github.com/miekg/dns"
)

// A snapshot holds each name's records encoded in one byte slice, not as
// dns.RR values. A prebuilt record costs some 200 bytes (its struct, the
// interface in a slice, the node listing it, its share of the name), its
// encoding a few, and a replica holds hundreds of thousands of records:
// prebuilt, they made one replica holding a cluster of 10k services need
// more memory than CoreDNS (docs/performance.md). An answer
// decodes the records it returns. The query fast path packs each answer
// once and reuses the packed bytes until the zone changes, so decoding is
// paid once per name and snapshot, not once per query.
//
// A name's records start at the offset the snapshot's nodes map gives, or
// in a service zone the offset its service's part gives (service.go):
//
//	kind (1 byte)
//	address names: the counts of A, AAAA, SRV and additional records
//	  (uvarints); the A addresses (4 bytes each); the AAAA addresses (16
//	  bytes each); when there are SRV records, their weight (2 bytes),
//	  then each one's port (2 bytes) and target (ref); then each
//	  additional record's owner (ref), address length (1 byte: 4 or 16)
//	  and address;
//	CNAME names: the target (ref).
//
// A ref is a uvarint numbering one of the snapshot's refs: the names that
// records point at, each held once. Reverse zones encode nothing: they
// answer from their sources' PTR lists (BuildReverseZone).

// nodeKind tells what a name's records are.
type nodeKind uint8

const (
	addressNode nodeKind = iota // A, AAAA, SRV and additional records
	cnameNode                   // an ExternalName service's CNAME
)

// Where an address name's counts are in records.count.
const (
	countA = iota
	countAAAA
	countSRV
	countExtra
)

// records is one name's records, read in place from its snapshot.
type records struct {
	refs []string // of the snapshot the records are in
	// In a service zone, the part the records are in, which holds the
	// refs, and its base.
	part  *servicePart
	base  string
	ttl   uint32
	kind  nodeKind
	count [4]int // address names: by countA…countExtra
	body  []byte // what follows the kind and the counts
}

// lookup returns the records of name, if the snapshot has it.
func (s *Snapshot) lookup(name string) (records, bool) {
	if s.parts != nil {
		if p, rel, base := s.partOf(name); p != nil {
			return p.find(rel, base, s.ttl)
		}
		return records{}, false
	}
	at, ok := s.nodes[name]
	if !ok {
		return records{}, false
	}
	return s.recordsAt(at), true
}

// wildcardRecords returns the records of "*.<Key>" in a mesh zone, if it
// has them.
func (s *Snapshot) wildcardRecords() (records, bool) {
	if !s.hasWildcard {
		return records{}, false
	}
	return s.recordsAt(s.wildcard), true
}

// has reports whether the snapshot has records for name.
func (s *Snapshot) has(name string) bool {
	_, ok := s.nodes[name]
	return ok
}

func (s *Snapshot) recordsAt(at uint32) records {
	return decodeRecords(s.data[at:], s.refs, s.ttl)
}

// decodeRecords reads the kind and counts of the records that start d.
func decodeRecords(d []byte, refs []string, ttl uint32) records {
	r := records{refs: refs, ttl: ttl, kind: nodeKind(d[0])}
	d = d[1:]
	counts := 0
	if r.kind == addressNode {
		counts = 4
	}
	for i := range counts {
		v, n := binary.Uvarint(d)
		r.count[i], d = int(v), d[n:]
	}
	r.body = d
	return r
}

// size is how many records the name holds, additional records included.
func (r records) size() int {
	if r.kind == addressNode {
		return r.count[countA] + r.count[countAAAA] + r.count[countSRV] + r.count[countExtra]
	}
	return 1
}

// targets returns the names the records' refs number: a service part's
// made whole, all in one allocation, once per answer that needs them.
func (r records) targets() []string {
	if r.part != nil {
		return r.part.targets(r.base)
	}
	return r.refs
}

// readRef reads a ref at the start of d and returns its name among
// targets and the rest.
func readRef(d []byte, targets []string) (string, []byte) {
	v, n := binary.Uvarint(d)
	return targets[v], d[n:]
}

// addresses returns the A records of owner, or its AAAA records when v6.
func (r records) addresses(owner string, v6 bool) []dns.RR {
	if r.kind != addressNode {
		return nil
	}
	if !v6 {
		n := r.count[countA]
		if n == 0 {
			return nil
		}
		out, recs := make([]dns.RR, n), make([]dns.A, n)
		for i := range recs {
			recs[i] = dns.A{Hdr: hdr(owner, dns.TypeA, r.ttl), A: address(r.body[4*i:], 4)}
			out[i] = &recs[i]
		}
		return out
	}
	n := r.count[countAAAA]
	if n == 0 {
		return nil
	}
	d := r.body[4*r.count[countA]:]
	out, recs := make([]dns.RR, n), make([]dns.AAAA, n)
	for i := range recs {
		recs[i] = dns.AAAA{Hdr: hdr(owner, dns.TypeAAAA, r.ttl), AAAA: address(d[16*i:], 16)}
		out[i] = &recs[i]
	}
	return out
}

// address is the first n bytes of d as an address that shares d's memory:
// nothing writes to a snapshot's data once it is built.
func address(d []byte, n int) net.IP { return net.IP(d[:n:n]) }

// srv returns the SRV records of owner and the additional records of their
// answer: the addresses of the names they point at.
func (r records) srv(owner string) (answer, extra []dns.RR) {
	if r.kind != addressNode || r.count[countSRV] == 0 {
		return nil, nil
	}
	d := r.body[4*r.count[countA]+16*r.count[countAAAA]:]
	weight := binary.BigEndian.Uint16(d)
	d = d[2:]
	targets := r.targets()
	answer = make([]dns.RR, r.count[countSRV])
	srvs := make([]dns.SRV, r.count[countSRV])
	for i := range srvs {
		port := binary.BigEndian.Uint16(d)
		var target string
		target, d = readRef(d[2:], targets)
		srvs[i] = dns.SRV{Hdr: hdr(owner, dns.TypeSRV, r.ttl), Weight: weight, Port: port, Target: target}
		answer[i] = &srvs[i]
	}
	if r.count[countExtra] == 0 {
		return answer, nil
	}
	extra = make([]dns.RR, r.count[countExtra])
	for i := range extra {
		var name string
		name, d = readRef(d, targets)
		n := int(d[0])
		if n == 4 {
			extra[i] = &dns.A{Hdr: hdr(name, dns.TypeA, r.ttl), A: address(d[1:], 4)}
		} else {
			extra[i] = &dns.AAAA{Hdr: hdr(name, dns.TypeAAAA, r.ttl), AAAA: address(d[1:], 16)}
		}
		d = d[1+n:]
	}
	return answer, extra
}

// cname returns the CNAME record of owner, an ExternalName service's
// name, or nil.
func (r records) cname(owner string) *dns.CNAME {
	if r.kind != cnameNode {
		return nil
	}
	target, _ := readRef(r.body, r.targets())
	return &dns.CNAME{Hdr: hdr(owner, dns.TypeCNAME, r.ttl), Target: target}
}

// encoder writes the records of a snapshot's names.
type encoder struct {
	data    []byte
	refs    []string
	refNums map[string]uint64
}

// begin starts the records of a name of kind and returns where they start.
func (e *encoder) begin(kind nodeKind) uint32 {
	at := uint32(len(e.data))
	e.data = append(e.data, byte(kind))
	return at
}

func (e *encoder) uvarint(v int) { e.data = binary.AppendUvarint(e.data, uint64(v)) }

func (e *encoder) uint16(v uint16) { e.data = binary.BigEndian.AppendUint16(e.data, v) }

// ref writes the number of s, numbering it on first use.
func (e *encoder) ref(s string) {
	n, ok := e.refNums[s]
	if !ok {
		if e.refNums == nil {
			e.refNums = map[string]uint64{}
		}
		n = uint64(len(e.refs))
		e.refNums[s] = n
		e.refs = append(e.refs, s)
	}
	e.data = binary.AppendUvarint(e.data, n)
}

// addAddresses begins an address name with its A records v4 and its AAAA
// records v6, and returns where it starts; the caller writes the srvs SRV
// records and extras additional records it counts, if any, next.
func (e *encoder) addAddresses(v4, v6 []netip.Addr, srvs, extras int) uint32 {
	at := e.begin(addressNode)
	e.uvarint(len(v4))
	e.uvarint(len(v6))
	e.uvarint(srvs)
	e.uvarint(extras)
	for _, a := range v4 {
		e.data = appendAddr(e.data, a)
	}
	for _, a := range v6 {
		e.data = appendAddr(e.data, a)
	}
	return at
}

// appendAddr appends the 4 bytes of an IPv4 address, the 16 of an IPv6 one.
func appendAddr(d []byte, a netip.Addr) []byte {
	if a.Is4() {
		v := a.As4()
		return append(d, v[:]...)
	}
	v := a.As16()
	return append(d, v[:]...)
}

// finish hands the records to s, copied to their exact size: the
// snapshot may live for hours, its encoder's spare capacity with it.
func (e *encoder) finish(s *Snapshot, ttl uint32) {
	s.data = append([]byte(nil), e.data...)
	s.refs = append([]string(nil), e.refs...)
	s.ttl = ttl
}
