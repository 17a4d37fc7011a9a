package membership

import (
	"errors"
	"net"
	"net/netip"
	"os"
	"sync"
	"time"
)

// memberlist v0.7 reads a stream it did not dial (a push/pull, a join, a
// TCP ping) in full before anything decides whether it belongs: the
// label header, then for an encrypted message a 4-byte length and that
// many bytes, buffered whole (up to its maxPushStateBytes, 20 MiB) before
// AES-GCM fails on a stranger's. So every accepted stream goes through a
// gate before memberlist sees it: only from an admitted address, only so
// many at once, no more bytes than the largest legitimate push/pull, and
// within a deadline memberlist cannot move.

// A push/pull lists every node memberlist knows (alive, suspect, and the
// dead it still remembers), each a msgpack map of seven fields: the field
// names and value headers (about 62 bytes), a name (memberlist bounds it
// only by the packet; 255 bytes is generous, a pod name is under 64), an
// IPv6 address (16), the metadata (memberlist.MetaMaxSize, 512; shardns
// sends about 25), port, incarnation, state and six version bytes (15):
// under 900 bytes, counted as maxNodeState.
const (
	maxNodeState = 1 << 10
	// maxRingNodes is a ring far larger than any deployment's: replicas
	// number a few dozen at most.
	maxRingNodes = 1000
	// MaxStreamBytes is what one stream may deliver: maxRingNodes nodes
	// (1,024,000 bytes) and 4 KiB for the rest: the label header (2 +
	// 255), the message type and length (5), the encryption's version,
	// nonce, padding and tag (45) and the push/pull header (under 40).
	MaxStreamBytes = maxRingNodes*maxNodeState + 4<<10
)

// StreamLimits bound the streams memberlist reads at once.
type StreamLimits struct {
	// PerSource bounds the streams read at once from one address. A
	// replica opens one at a time to a given member (a push/pull every
	// PushPullInterval, a join, a TCP ping when UDP fails); on loopback
	// every local process shares the address.
	PerSource int
	// Total bounds the streams read at once from everyone.
	Total int
	// Bytes bounds what one stream may deliver, headers included.
	Bytes int64
	// Timeout bounds a stream's life from its accept, whatever deadline
	// memberlist sets: a sender that holds its last byte frees its slot.
	Timeout time.Duration
}

// DefaultStreamLimits: at most 4 streams from one address and 16 in all
// (each holds at most about twice Bytes while memberlist buffers it, so
// 8 MiB from one address, 32 MiB from every address at once), within
// timeout (Timing.TCPTimeout, the bound memberlist gives one exchange).
func DefaultStreamLimits(timeout time.Duration) StreamLimits {
	return StreamLimits{PerSource: 4, Total: 16, Bytes: MaxStreamBytes, Timeout: timeout}
}

// fill replaces zero or negative fields with def's.
func (l *StreamLimits) fill(def StreamLimits) {
	if l.PerSource <= 0 {
		l.PerSource = def.PerSource
	}
	if l.Total <= 0 {
		l.Total = def.Total
	}
	if l.Bytes <= 0 {
		l.Bytes = def.Bytes
	}
	if l.Timeout <= 0 {
		l.Timeout = def.Timeout
	}
}

// Reasons a stream is refused, as Config.Rejected is told (the values of
// trust's reasons).
const (
	reasonNotPeer     = "not-a-peer"
	reasonGossipLimit = "gossip-limit"
)

// streamGate admits accepted streams and counts those being read.
type streamGate struct {
	limits  StreamLimits
	admit   func(netip.Addr) bool           // nil: every address
	refused func(addr, name, reason string) // nil: not told
	now     func() time.Time

	mu       sync.Mutex
	open     int
	openFrom map[netip.Addr]int
}

func newStreamGate(l StreamLimits, admit func(netip.Addr) bool, refused func(addr, name, reason string)) *streamGate {
	return &streamGate{limits: l, admit: admit, refused: refused, now: time.Now, openFrom: map[netip.Addr]int{}}
}

// take wraps c for memberlist, or closes it and reports why when c's
// address is not admitted or its slots are taken.
func (g *streamGate) take(c net.Conn) (net.Conn, bool) {
	from := remoteIP(c)
	reason := ""
	switch {
	case !from.IsValid():
		reason = reasonNotPeer
	case g.admit != nil && !g.admit(from):
		reason = reasonNotPeer
	case !g.reserve(from):
		reason = reasonGossipLimit
	}
	if reason != "" {
		_ = c.Close()
		g.refuse(c, reason)
		return nil, false
	}
	limit := g.now().Add(g.limits.Timeout)
	_ = c.SetDeadline(limit)
	return &gatedStream{Conn: c, gate: g, from: from, limit: limit, left: g.limits.Bytes}, true
}

func (g *streamGate) reserve(from netip.Addr) bool {
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.open >= g.limits.Total || g.openFrom[from] >= g.limits.PerSource {
		return false
	}
	g.open++
	g.openFrom[from]++
	return true
}

func (g *streamGate) release(from netip.Addr) {
	g.mu.Lock()
	defer g.mu.Unlock()
	g.open--
	if g.openFrom[from] <= 1 {
		delete(g.openFrom, from) // the map holds only addresses being read
		return
	}
	g.openFrom[from]--
}

func (g *streamGate) refuse(c net.Conn, reason string) {
	if g.refused != nil {
		g.refused(c.RemoteAddr().String(), "", reason)
	}
}

// remoteIP is c's peer address, the zero Addr when it has none.
func remoteIP(c net.Conn) netip.Addr {
	if a, ok := c.RemoteAddr().(*net.TCPAddr); ok {
		ip, _ := netip.AddrFromSlice(a.IP)
		return ip.Unmap()
	}
	return netip.Addr{}
}

var (
	errStreamTooLong = errors.New("membership: gossip stream longer than a push/pull of the largest ring")
	errStreamExpired = errors.New("membership: gossip stream past its deadline")
)

// gatedStream is an admitted stream: reads fail once it has delivered
// its byte budget, or declared more in its header, and no deadline may
// pass limit. Closing it frees its slot.
type gatedStream struct {
	net.Conn
	gate  *streamGate
	from  netip.Addr
	limit time.Time
	left  int64 // bytes it may still deliver
	head  preamble

	mu      sync.Mutex
	refused bool
	closed  bool
}

func (s *gatedStream) Read(p []byte) (int, error) {
	if s.left <= 0 {
		return 0, s.fail(errStreamTooLong)
	}
	if int64(len(p)) > s.left {
		p = p[:s.left]
	}
	n, err := s.Conn.Read(p)
	s.left -= int64(n)
	if declared, ok := s.head.feed(p[:n]); ok && declared > s.gate.limits.Bytes {
		return 0, s.fail(errStreamTooLong)
	}
	if errors.Is(err, os.ErrDeadlineExceeded) && !s.gate.now().Before(s.limit) {
		return n, s.fail(errStreamExpired)
	}
	return n, err
}

// fail counts the stream as refused, once, and returns err.
func (s *gatedStream) fail(err error) error {
	s.mu.Lock()
	first := !s.refused
	s.refused = true
	s.mu.Unlock()
	if first {
		s.gate.refuse(s.Conn, reasonGossipLimit)
	}
	return err
}

func (s *gatedStream) SetDeadline(t time.Time) error      { return s.Conn.SetDeadline(s.clamp(t)) }
func (s *gatedStream) SetReadDeadline(t time.Time) error  { return s.Conn.SetReadDeadline(s.clamp(t)) }
func (s *gatedStream) SetWriteDeadline(t time.Time) error { return s.Conn.SetWriteDeadline(s.clamp(t)) }

// clamp is t, or limit when t is later or none.
func (s *gatedStream) clamp(t time.Time) time.Time {
	if t.IsZero() || t.After(s.limit) {
		return s.limit
	}
	return t
}

// Close closes the connection and frees its slot, once.
func (s *gatedStream) Close() error {
	s.mu.Lock()
	first := !s.closed
	s.closed = true
	s.mu.Unlock()
	if first {
		s.gate.release(s.from)
	}
	return s.Conn.Close()
}

// preamble follows, as bytes pass, the start of a stream memberlist v0.7
// reads (label.go, net.go readStream): an optional label header (the
// byte 244, a length, the label), the message type, and for an encrypted
// message (type 10) the big-endian length of what follows, which it is
// about to buffer whole.
type preamble struct {
	state int    // what the next byte is
	skip  int    // label bytes still to pass
	got   int    // length bytes seen
	size  uint32 // the declared length so far
}

const (
	atStart = iota
	atLabelLength
	inLabel
	atType
	inLength
	pastHeader
)

const (
	labelHeaderByte = 244 // memberlist's hasLabelMsg
	encryptMsgByte  = 10  // memberlist's encryptMsg
	// headerBytes is what precedes an encrypted payload but its label.
	headerBytes = 5
)

// feed passes b; once the header of an encrypted message is complete it
// reports the bytes the stream declares: label header, header and
// payload.
func (h *preamble) feed(b []byte) (declared int64, complete bool) {
	for _, c := range b {
		if h.state == pastHeader {
			return 0, false
		}
		if h.step(c) {
			return int64(h.skip) + headerBytes + int64(h.size), true
		}
	}
	return 0, false
}

// step passes one byte and reports whether it completed a length.
func (h *preamble) step(c byte) bool {
	switch h.state {
	case atStart, atType:
		switch {
		case h.state == atStart && c == labelHeaderByte:
			h.state = atLabelLength
		case c == encryptMsgByte:
			h.state = inLength
		default:
			h.state = pastHeader // plain text: refused by the key, or read as memberlist reads it
		}
	case atLabelLength:
		h.skip, h.state = int(c), inLabel
		if c == 0 {
			h.state = pastHeader // memberlist refuses an empty label
		}
	case inLabel:
		h.got++
		if h.got == h.skip {
			h.got, h.state = 0, atType
			h.skip += 2 // the label header, counted in what is declared
		}
	case inLength:
		h.size = h.size<<8 | uint32(c)
		h.got++
		if h.got == 4 {
			h.state = pastHeader
			return true
		}
	}
	return false
}
