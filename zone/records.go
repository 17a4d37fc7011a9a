package zone

import (
	"net/netip"
	"unsafe"
)

// builder encodes the records of a service zone's parts (service.go).
// While a part is built its names are made in blocks that hold many of
// them, instead of one allocation each; finishPart copies the ones the
// part keeps into one allocation of the part's own, so a part's names
// live and die together: when its service changes, or its zone moves to
// another replica, they are freed whole, where a name each would leave
// holes in memory shared with the parts that stay.
type builder struct {
	encoder
	text blocks[byte] // the bytes of owner names and targets
	part []builtName  // the names of the service part being built

	// Scratch space of addNode, reused from node to node.
	scratch struct {
		v4, v6    []netip.Addr
		srvs      []entry
		extras    []entry
		seenAddr  map[netip.Addr]bool
		seenSRV   map[entry]bool    // by target and port
		seenExtra map[entry]bool    // by target and address
		moved     map[string]uint32 // finishPart's: where a name's text is in its part
	}
}

func newBuilder() *builder {
	b := &builder{}
	b.scratch.seenAddr = map[netip.Addr]bool{}
	b.scratch.seenSRV = map[entry]bool{}
	b.scratch.seenExtra = map[entry]bool{}
	b.scratch.moved = map[string]uint32{}
	b.text.next = 1 << 10 // a part's names are some hundred bytes
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

// builtName is a name of the part being built, whole until finishPart
// makes it relative, and where its records start.
type builtName struct {
	name string
	at   uint32
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
