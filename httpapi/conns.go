package httpapi

import (
	"errors"
	"net"
	"net/http"
	"net/netip"
	"os"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
)

// Connection bounds. Each open HTTP connection holds a goroutine and
// two 4 KiB buffers (about 11 KiB of RSS each, measured), so the server
// holds at most Limits.MaxConnections of them, and one client address
// at most Limits.MaxConnectionsPerSource. A new connection is never
// refused: the kubelet's probes and Prometheus's scrapes open fresh
// ones, and must get through a flood. It closes instead the connection
// that has waited longest without a request being served (a request
// still arriving, or a keep-alive between requests) — of its own address
// when that address is at its bound, else of the whole server. A
// request being served is closed only when every connection is serving
// one. The attacker's unfinished requests are thus the first to go,
// and a probe's, finished within milliseconds, is served.

// connState is where a connection is in its life, as http.Server reports
// it through ConnState.
type connState uint8

const (
	waiting connState = iota // accepted, or idle between requests: a request may be arriving
	serving                  // a request was read and is being answered
)

// boundedConn is one open connection of a boundedListener.
type boundedConn struct {
	net.Conn
	set    *connSet
	source netip.Addr

	// Guarded by set.mu.
	state     connState
	since     time.Time // when it entered state
	readSince int       // bytes read since it entered state
	requests  int       // requests read
	counted   bool      // a timeout of it was counted
}

// Read counts a read deadline passing on a request whose headers had
// begun (or on a new connection that sent nothing within
// ReadHeaderTimeout): a keep-alive connection closing after IdleTimeout
// is no timeout.
func (c *boundedConn) Read(b []byte) (int, error) {
	n, err := c.Conn.Read(b)
	c.set.read(c, n, err)
	return n, err
}

// Write counts a write deadline passing: a client that does not take its
// answer.
func (c *boundedConn) Write(b []byte) (int, error) {
	n, err := c.Conn.Write(b)
	if err != nil && errors.Is(err, os.ErrDeadlineExceeded) {
		c.set.timedOut(c, c.set.counters.writeTimeouts)
	}
	return n, err
}

// Close closes the connection and takes it out of its set.
func (c *boundedConn) Close() error {
	c.set.remove(c)
	return c.Conn.Close()
}

// serverCounters are one server's children of the httpapi counters.
type serverCounters struct {
	evictedFull, evictedSource  prometheus.Counter
	readTimeouts, writeTimeouts prometheus.Counter
}

// connSet is the open connections of one server.
type connSet struct {
	limits   Limits
	counters serverCounters
	now      func() time.Time

	mu       sync.Mutex
	conns    map[*boundedConn]struct{}
	bySource map[netip.Addr]int
}

func newConnSet(limits Limits, counters serverCounters, now func() time.Time) *connSet {
	return &connSet{limits: limits, counters: counters, now: now,
		conns: map[*boundedConn]struct{}{}, bySource: map[netip.Addr]int{}}
}

// add registers a new connection, closing the one it displaces.
func (set *connSet) add(c net.Conn) *boundedConn {
	bc := &boundedConn{Conn: c, set: set, source: sourceOf(c), since: set.now()}
	set.mu.Lock()
	victim, counter := set.victim(bc.source)
	if victim != nil {
		set.removeLocked(victim)
	}
	set.conns[bc] = struct{}{}
	set.bySource[bc.source]++
	set.mu.Unlock()
	if victim != nil {
		victim.Conn.Close()
		counter.Inc()
	}
	return bc
}

// victim is the connection a new one from source displaces, if any, and
// the counter of why.
func (set *connSet) victim(source netip.Addr) (*boundedConn, prometheus.Counter) {
	switch {
	case set.bySource[source] >= set.limits.MaxConnectionsPerSource:
		return set.longestWaiting(func(c *boundedConn) bool { return c.source == source }), set.counters.evictedSource
	case len(set.conns) >= set.limits.MaxConnections:
		return set.longestWaiting(func(*boundedConn) bool { return true }), set.counters.evictedFull
	}
	return nil, nil
}

// longestWaiting is the connection among those match holds that has
// waited longest for a request; failing one, the longest serving.
func (set *connSet) longestWaiting(match func(*boundedConn) bool) *boundedConn {
	var best *boundedConn
	for c := range set.conns {
		if !match(c) {
			continue
		}
		if best == nil || c.state < best.state || c.state == best.state && c.since.Before(best.since) {
			best = c
		}
	}
	return best
}

// changed follows http.Server's ConnState.
func (set *connSet) changed(nc net.Conn, state http.ConnState) {
	c, ok := nc.(*boundedConn)
	if !ok {
		return
	}
	switch state {
	case http.StateActive:
		set.enter(c, serving)
	case http.StateIdle:
		set.enter(c, waiting)
	case http.StateClosed, http.StateHijacked:
		set.remove(c)
	}
}

func (set *connSet) enter(c *boundedConn, s connState) {
	set.mu.Lock()
	defer set.mu.Unlock()
	c.state, c.since, c.readSince = s, set.now(), 0
	if s == serving {
		c.requests++
	}
}

// read notes n bytes read on c, and a timeout if err is one and a
// request's line and headers had begun: on a connection that has had
// requests, a deadline passing with nothing read since is the
// keep-alive's end. While a request is served, the server reads only to
// notice the client leaving, and ends that read with a deadline past.
func (set *connSet) read(c *boundedConn, n int, err error) {
	set.mu.Lock()
	c.readSince += n
	begun := c.state == waiting && (c.readSince > 0 || c.requests == 0)
	set.mu.Unlock()
	if err != nil && begun && errors.Is(err, os.ErrDeadlineExceeded) {
		set.timedOut(c, set.counters.readTimeouts)
	}
}

func (set *connSet) timedOut(c *boundedConn, counter prometheus.Counter) {
	set.mu.Lock()
	first := !c.counted
	c.counted = true
	set.mu.Unlock()
	if first {
		counter.Inc()
	}
}

func (set *connSet) remove(c *boundedConn) {
	set.mu.Lock()
	defer set.mu.Unlock()
	set.removeLocked(c)
}

func (set *connSet) removeLocked(c *boundedConn) {
	if _, ok := set.conns[c]; !ok {
		return
	}
	delete(set.conns, c)
	if set.bySource[c.source]--; set.bySource[c.source] <= 0 {
		delete(set.bySource, c.source)
	}
}

// len is the number of connections open.
func (set *connSet) len() int {
	set.mu.Lock()
	defer set.mu.Unlock()
	return len(set.conns)
}

// boundedListener hands out the connections of its listener, each
// registered in its set.
type boundedListener struct {
	net.Listener
	set *connSet
}

func (l *boundedListener) Accept() (net.Conn, error) {
	c, err := l.Listener.Accept()
	if err != nil {
		return nil, err
	}
	return l.set.add(c), nil
}

// sourceOf is the client's address of c, IPv4 unmapped.
func sourceOf(c net.Conn) netip.Addr {
	if a, ok := c.RemoteAddr().(*net.TCPAddr); ok {
		return a.AddrPort().Addr().Unmap()
	}
	return netip.Addr{}
}
