package trust

import (
	"errors"
	"net"
	"net/netip"
	"sync"
	"time"

	"golang.org/x/time/rate"
)

// Limits bound what the remote port holds for its peers, so that a
// process allowed to connect (a member, or anything on an admitted
// address) cannot exhaust a replica's memory, file descriptors or
// handshake capacity. A connection beyond a limit is closed before its
// handshake and counted as a remote-limit refusal.
type Limits struct {
	// ConnectionsPerPeer bounds the open connections from one address.
	// A replica keeps one to each other replica, plus the moments a
	// reconnection overlaps the old one; on loopback every local process
	// shares the address.
	ConnectionsPerPeer int
	// Connections bounds the open connections from everyone.
	Connections int
	// HandshakesPerPeer bounds the handshakes in progress from one
	// address, so that one peer cannot hold every slot of Handshakes.
	HandshakesPerPeer int
	// Handshakes bounds the handshakes in progress (each costs a TLS key
	// exchange and is held for at most the handshake timeout).
	Handshakes int
	// HandshakeRate bounds the handshakes one address may start a
	// second, with bursts of twice as many: a peer that reconnects in a
	// loop (every refused message ends its stream) costs a key exchange
	// each time. Replicas reconnect a few times a minute at most.
	HandshakeRate float64
	// StreamsPerConnection bounds the concurrent streams of one
	// connection: protoactor opens one, for the connection's life.
	StreamsPerConnection uint32
	// MessageBytes bounds one message of the stream (a batch of
	// envelopes) a replica sends, decoded before it is checked: the
	// largest batch of handoff pages must fit (dispatch.MaxMessageBytes).
	MessageBytes int
	// QuestionBytes bounds one message a node-local process sends: a
	// batch of questions (ZoneQuery, RingRequest), which its own remote
	// sends a few at a time. Enforced from the message's header, before
	// gRPC allocates the length the header declares.
	QuestionBytes int
	// Idle closes a connection that has had no stream for this long, and
	// pings one that has been silent for this long.
	Idle time.Duration
}

// DefaultQuestionBytes is the largest message a node-local process may
// send: a batch of questions. The largest ZoneQuery is about 2 KiB (a
// name of 255 bytes on the wire, every byte written as \DDD, twice, as
// its zone key and its name, and a topology zone label of 63 bytes); a
// node-local process batches at most NodeLocalBatch of them, with its
// actors' names and addresses once: under 10 KiB. A RingRequest is 20
// bytes.
const DefaultQuestionBytes = 16 << 10

// NodeLocalBatch is how many messages a node-local process's remote puts
// in one batch (protoactor's EndpointWriterBatchSize, 1000 by default),
// so that its batches of questions stay under QuestionBytes.
const NodeLocalBatch = 4

// DefaultLimits are the limits of a remote port.
func DefaultLimits() Limits {
	return Limits{ConnectionsPerPeer: 64, Connections: 4096, HandshakesPerPeer: 8, Handshakes: 128, HandshakeRate: 20,
		StreamsPerConnection: 4, MessageBytes: 4 << 20, QuestionBytes: DefaultQuestionBytes, Idle: 2 * time.Minute}
}

func (l Limits) withDefaults() Limits {
	d := DefaultLimits()
	if l.ConnectionsPerPeer <= 0 {
		l.ConnectionsPerPeer = d.ConnectionsPerPeer
	}
	if l.Connections <= 0 {
		l.Connections = d.Connections
	}
	if l.HandshakesPerPeer <= 0 {
		l.HandshakesPerPeer = d.HandshakesPerPeer
	}
	if l.Handshakes <= 0 {
		l.Handshakes = d.Handshakes
	}
	if l.HandshakeRate <= 0 {
		l.HandshakeRate = d.HandshakeRate
	}
	if l.StreamsPerConnection == 0 {
		l.StreamsPerConnection = d.StreamsPerConnection
	}
	if l.MessageBytes <= 0 {
		l.MessageBytes = d.MessageBytes
	}
	if l.QuestionBytes <= 0 {
		l.QuestionBytes = d.QuestionBytes
	}
	if l.Idle <= 0 {
		l.Idle = d.Idle
	}
	return l
}

// messageBytes is the largest message a peer of role may send.
func (l Limits) messageBytes(role Role) int {
	if role == RoleNodeLocal {
		return l.QuestionBytes
	}
	return l.MessageBytes
}

var errLimit = errors.New("trust: connection limit reached")

// connLimits counts the connections and handshakes of a remote port.
type connLimits struct {
	limits Limits

	mu                sync.Mutex
	conns, handshakes int
	connsOf           map[netip.Addr]int
	handshakesOf      map[netip.Addr]int
	rateOf            map[netip.Addr]*rate.Limiter
	now               func() time.Time
}

// maxRated bounds the addresses whose handshake rate is remembered; only
// admitted addresses get that far, but their number is the cluster's.
const maxRated = 4096

func newConnLimits(l Limits) *connLimits {
	return &connLimits{limits: l.withDefaults(), connsOf: map[netip.Addr]int{}, handshakesOf: map[netip.Addr]int{},
		rateOf: map[netip.Addr]*rate.Limiter{}, now: time.Now}
}

// rateAllowsLocked reports whether peer may start a handshake now.
func (c *connLimits) rateAllowsLocked(peer netip.Addr) bool {
	r, ok := c.rateOf[peer]
	if !ok {
		if len(c.rateOf) >= maxRated {
			clear(c.rateOf) // every address starts again with a full burst
		}
		r = rate.NewLimiter(rate.Limit(c.limits.HandshakeRate), int(2*c.limits.HandshakeRate))
		c.rateOf[peer] = r
	}
	return r.AllowN(c.now(), 1)
}

// open takes a connection slot and a handshake slot for raw, from peer.
// It returns raw wrapped to give the connection slot back when closed,
// and a function giving the handshake slot back; or errLimit.
func (c *connLimits) open(peer netip.Addr, raw net.Conn) (net.Conn, func(), error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	l := c.limits
	if c.conns >= l.Connections || c.connsOf[peer] >= l.ConnectionsPerPeer ||
		c.handshakes >= l.Handshakes || c.handshakesOf[peer] >= l.HandshakesPerPeer || !c.rateAllowsLocked(peer) {
		return nil, nil, errLimit
	}
	c.conns++
	c.connsOf[peer]++
	c.handshakes++
	c.handshakesOf[peer]++
	var handshakeDone sync.Once
	release := func() {
		handshakeDone.Do(func() {
			c.mu.Lock()
			defer c.mu.Unlock()
			c.handshakes--
			decrement(c.handshakesOf, peer)
		})
	}
	return &limitedConn{Conn: raw, close: func() {
		c.mu.Lock()
		defer c.mu.Unlock()
		c.conns--
		decrement(c.connsOf, peer)
	}}, release, nil
}

func decrement(m map[netip.Addr]int, a netip.Addr) {
	if m[a] <= 1 {
		delete(m, a) // the map holds only peers with a connection
		return
	}
	m[a]--
}

// limitedConn gives its connection slot back when closed, once.
type limitedConn struct {
	net.Conn
	once  sync.Once
	close func()
}

func (c *limitedConn) Close() error {
	c.once.Do(c.close)
	return c.Conn.Close()
}
