package zone

import (
	"net/netip"
	"unsafe"
)

// builder encodes the records of one snapshot's names and keeps their
// names in blocks that hold many of them, instead of one allocation
// each. A snapshot's names live and die together: when a zone is rebuilt
// or moves to another replica, its blocks are freed whole and go back to
// the OS, where a name each would leave holes in memory shared with the
// zones that stay. Blocks also save the allocator's per-object rounding.
type builder struct {
	encoder
	text blocks[byte] // the bytes of owner names and targets

	// Scratch space of addNode, reused from node to node.
	scratch struct {
		v4, v6    []netip.Addr
		srvs      []entry
		extras    []entry
		seenAddr  map[netip.Addr]bool
		seenSRV   map[entry]bool // by target and port
		seenExtra map[entry]bool // by target and address
	}
}

func newBuilder() *builder {
	b := &builder{}
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
