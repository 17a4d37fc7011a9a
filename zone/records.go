package zone

import (
	"net/netip"
	"unsafe"

	"github.com/miekg/dns"
)

// builder hands out the records and names of one snapshot from blocks
// that hold many of them, instead of one allocation each. A snapshot's
// records live and die together: when a zone is rebuilt or moves to
// another replica, its blocks are freed whole and go back to the OS,
// where a record each would leave holes in memory shared with the zones
// that stay. Blocks also save the allocator's per-object rounding.
//
// An address record is built once per owner and address and shared by
// every node that answers with it (a name's A records and the additional
// records of the SRV answers pointing at it).
type builder struct {
	a    blocks[dns.A]
	aaaa blocks[dns.AAAA]
	srv  blocks[dns.SRV]
	ptr  blocks[dns.PTR]
	ip   blocks[byte]
	rr   blocks[dns.RR]
	node blocks[node]
	text blocks[byte] // the bytes of owner names and targets

	addrs map[ownedAddr]dns.RR // the address records built so far

	// Scratch space of addNode, reused from node to node.
	scratch struct {
		addrs     []netip.Addr
		srvs      []entry
		extras    []entry
		seenAddr  map[netip.Addr]bool
		seenSRV   map[entry]bool // by target and port
		seenExtra map[entry]bool // by target and address
	}
}

// ownedAddr is an address record's owner and address.
type ownedAddr struct {
	owner string
	addr  netip.Addr
}

func newBuilder() *builder {
	b := &builder{addrs: map[ownedAddr]dns.RR{}}
	b.scratch.seenAddr = map[netip.Addr]bool{}
	b.scratch.seenSRV = map[entry]bool{}
	b.scratch.seenExtra = map[entry]bool{}
	return b
}

// blocks allocates values of T in blocks that grow from a few values to
// about 64 KiB, so a small zone wastes little and a large one is a few
// allocations the runtime gives pages of their own.
type blocks[T any] struct {
	free []T
	next int
}

const (
	firstBlock    = 8
	maxBlockBytes = 64 << 10
)

// take returns n contiguous zero values that no later take overlaps.
func (b *blocks[T]) take(n int) []T {
	if len(b.free) < n {
		var zero T
		limit := max(firstBlock, maxBlockBytes/max(1, int(unsafe.Sizeof(zero))))
		size := max(b.next, firstBlock)
		b.next = min(2*size, limit)
		b.free = make([]T, max(size, n))
	}
	out := b.free[:n:n]
	b.free = b.free[n:]
	return out
}

// reserve makes the next takes of n values in all come from one block,
// when the caller knows how many it needs.
func (b *blocks[T]) reserve(n int) {
	if len(b.free) < n {
		b.free = make([]T, n)
	}
}

// one returns a pointer to one zero value.
func (b *blocks[T]) one() *T { return &b.take(1)[0] }

// addr returns the A or AAAA record of owner for a, building it on first
// use.
func (b *builder) addr(owner string, a netip.Addr, ttl uint32) dns.RR {
	a = a.Unmap()
	key := ownedAddr{owner, a}
	if rr, ok := b.addrs[key]; ok {
		return rr
	}
	var rr dns.RR
	if a.Is4() {
		ip := b.ip.take(4)
		v := a.As4()
		copy(ip, v[:])
		r := b.a.one()
		r.Hdr, r.A = hdr(owner, dns.TypeA, ttl), ip
		rr = r
	} else {
		ip := b.ip.take(16)
		v := a.As16()
		copy(ip, v[:])
		r := b.aaaa.one()
		r.Hdr, r.AAAA = hdr(owner, dns.TypeAAAA, ttl), ip
		rr = r
	}
	b.addrs[key] = rr
	return rr
}

// name returns parts joined, its bytes in the snapshot's text block.
// Nothing writes to a block's bytes once a name is made of them, so the
// string is as immutable as any other.
func (b *builder) name(parts ...string) string {
	n := 0
	for _, p := range parts {
		n += len(p)
	}
	if n == 0 {
		return ""
	}
	buf := b.text.take(n)
	at := 0
	for _, p := range parts {
		at += copy(buf[at:], p)
	}
	return unsafe.String(&buf[0], n)
}

// reverseName is ReverseName(a) in the snapshot's blocks, without
// garbage: the name of a reverse zone's every record.
func (b *builder) reverseName(a netip.Addr) string {
	var buf [maxReverseName]byte
	out := appendReverseName(buf[:0], a)
	return b.name(unsafe.String(&out[0], len(out)))
}
