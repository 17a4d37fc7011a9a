package listeners

import (
	"net"
	"net/netip"
	"sync"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"
)

// Connection bounds for TCP, DNS over TLS and DNS over HTTPS. A listener
// holds at most MaxConnections, and one client address at most
// MaxConnectionsPerSource of them. A new connection is never refused for
// either: it closes the idlest connection of its own address when that
// address is at its bound, else the idlest of the listener when the
// listener is full. So thousands of idle connections from a few sources
// cannot lock a new client out; they only close each other, and a
// client that keeps asking is the last to be closed.

// connBounds are a listener's connection bounds and their counters.
type connBounds struct {
	limit, perSource int
	evicted          prometheus.Counter // the listener was full; may be nil
	evictedSource    prometheus.Counter // the source was at its bound; may be nil
}

// trackedConnState is one open connection: its client's address and
// when it last read anything, in nanoseconds from the set's epoch.
type trackedConnState struct {
	conn   net.Conn
	source netip.Addr
	last   atomic.Int64
}

// connSet tracks open connections so that stop can close them and a new
// connection can close the idlest.
type connSet struct {
	mu       sync.Mutex
	conns    map[*trackedConnState]struct{} // nil once closed
	bySource map[netip.Addr]int
	epoch    time.Time
}

func newConnSet() *connSet {
	return &connSet{conns: map[*trackedConnState]struct{}{}, bySource: map[netip.Addr]int{}, epoch: time.Now()}
}

// touch records that s read something now.
func (set *connSet) touch(s *trackedConnState) { s.last.Store(int64(time.Since(set.epoch))) }

// add registers c, closing the connection it displaces; nil once the set
// is closed.
func (set *connSet) add(c net.Conn, b connBounds) *trackedConnState {
	s := &trackedConnState{conn: c, source: addrPort(c.RemoteAddr()).Addr().Unmap()}
	set.touch(s)
	set.mu.Lock()
	defer set.mu.Unlock()
	if set.conns == nil {
		return nil
	}
	victim, reason := set.victim(s.source, b)
	if victim != nil {
		victim.conn.Close()
		set.removeLocked(victim)
		if reason != nil {
			reason.Inc()
		}
	}
	set.conns[s] = struct{}{}
	set.bySource[s.source]++
	return s
}

// victim is the connection a new one from source displaces, if any, and
// the counter of why.
func (set *connSet) victim(source netip.Addr, b connBounds) (*trackedConnState, prometheus.Counter) {
	switch {
	case b.perSource > 0 && set.bySource[source] >= b.perSource:
		return set.idlest(func(s *trackedConnState) bool { return s.source == source }), b.evictedSource
	case len(set.conns) >= b.limit:
		return set.idlest(func(*trackedConnState) bool { return true }), b.evicted
	}
	return nil, nil
}

// idlest is the connection matching match that read least recently.
func (set *connSet) idlest(match func(*trackedConnState) bool) *trackedConnState {
	var best *trackedConnState
	for s := range set.conns {
		if match(s) && (best == nil || s.last.Load() < best.last.Load()) {
			best = s
		}
	}
	return best
}

func (set *connSet) remove(s *trackedConnState) {
	set.mu.Lock()
	defer set.mu.Unlock()
	set.removeLocked(s)
}

func (set *connSet) removeLocked(s *trackedConnState) {
	if _, ok := set.conns[s]; !ok {
		return
	}
	delete(set.conns, s)
	if set.bySource[s.source]--; set.bySource[s.source] <= 0 {
		delete(set.bySource, s.source)
	}
}

// len is the number of connections open.
func (set *connSet) len() int {
	set.mu.Lock()
	defer set.mu.Unlock()
	return len(set.conns)
}

// closeAll closes every connection and refuses new ones.
func (set *connSet) closeAll() {
	set.mu.Lock()
	defer set.mu.Unlock()
	for s := range set.conns {
		s.conn.Close()
	}
	set.conns = nil
}

// bounds are the connection bounds of c.
func (c *Config) bounds() connBounds {
	return connBounds{limit: max(c.MaxConnections, 1), perSource: c.MaxConnectionsPerSource,
		evicted: c.Evicted, evictedSource: c.EvictedSource}
}
