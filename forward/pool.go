package forward

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"net"
	"sync"
	"time"

	"github.com/miekg/dns"
)

// connPool keeps the stream connections to one upstream open between
// queries: DNS over TLS ones, whose handshake costs two round trips and
// the CPU of a key exchange, and plain TCP ones (force_tcp, and the
// retries of truncated answers), whose handshake costs a round trip. A
// connection used again costs neither. A connection carries one query
// at a time; the idle ones wait in the pool, newest last, at most
// maxIdle of them (0: no bound), each closed once it has been idle for
// expire (0: none is kept) or open for maxAge (0: no bound, CoreDNS's
// max_age). TLS sessions are resumed through the tls.Config's
// ClientSessionCache when a new connection is needed.
type connPool struct {
	addr string
	// tls, for a DNS over TLS upstream, holds the ServerName the
	// certificate is checked against; nil: plain TCP.
	tls    *tls.Config
	limits poolLimits
	// onConn observes every connection taken for a query: reused from
	// the pool, or newly opened.
	onConn func(reused bool)

	mu     sync.Mutex
	idle   []*poolConn // ordered by idleSince, oldest first
	sweep  *time.Timer // armed while connections are idle, to close them once expired
	closed bool
}

// poolLimits bound how long connections are kept: Config's Expire,
// MaxAge and MaxIdleConns.
type poolLimits struct {
	expire, maxAge time.Duration
	maxIdle        int
}

type poolConn struct {
	conn      *dns.Conn
	opened    time.Time
	idleSince time.Time
}

// newPool returns the pool of one upstream: over TLS (a copy of base,
// named for the upstream) when base is set, else over plain TCP.
func newPool(addr string, base *tls.Config, l poolLimits, onConn func(bool)) *connPool {
	var cfg *tls.Config
	if base != nil {
		cfg = base.Clone()
		if cfg.ServerName == "" {
			// Without a tls server name the certificate must hold the
			// upstream's IP address, as CoreDNS checks it.
			if host, _, err := net.SplitHostPort(addr); err == nil {
				cfg.ServerName = host
			}
		}
	}
	if onConn == nil {
		onConn = func(bool) {}
	}
	return &connPool{addr: addr, tls: cfg, limits: l, onConn: onConn}
}

// exchange sends q on an idle connection, or on a new one, and reads
// its reply within timeout (and ctx's deadline). An idle connection the
// upstream has closed meanwhile (its own idle timeout) is dropped and
// the question asked again on the next one.
func (p *connPool) exchange(ctx context.Context, q *dns.Msg, timeout time.Duration) (*dns.Msg, error) {
	for {
		c, reused := p.get(), true
		if c == nil {
			var err error
			if c, err = p.dial(ctx, timeout); err != nil {
				return nil, err
			}
			reused = false
		}
		p.onConn(reused)
		r, err := roundTrip(ctx, c.conn, q, timeout)
		if err == nil {
			p.put(c)
			return r, nil
		}
		// A connection that failed mid-exchange may still carry a late
		// reply: it is never used again.
		c.conn.Close()
		var ne net.Error
		if !reused || ctx.Err() != nil || (errors.As(err, &ne) && ne.Timeout()) {
			return nil, err
		}
	}
}

// dial opens a connection and completes its handshake within timeout.
func (p *connPool) dial(ctx context.Context, timeout time.Duration) (*poolConn, error) {
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	var nc net.Conn
	var err error
	if p.tls != nil {
		d := tls.Dialer{Config: p.tls}
		nc, err = d.DialContext(ctx, "tcp", p.addr)
	} else {
		var d net.Dialer
		nc, err = d.DialContext(ctx, "tcp", p.addr)
	}
	if err != nil {
		return nil, err
	}
	return &poolConn{conn: &dns.Conn{Conn: nc}, opened: time.Now()}, nil
}

// roundTrip writes q and reads the reply to it.
func roundTrip(ctx context.Context, c *dns.Conn, q *dns.Msg, timeout time.Duration) (*dns.Msg, error) {
	deadline := time.Now().Add(timeout)
	if d, ok := ctx.Deadline(); ok && d.Before(deadline) {
		deadline = d
	}
	if err := c.SetDeadline(deadline); err != nil {
		return nil, err
	}
	if err := c.WriteMsg(q); err != nil {
		return nil, err
	}
	r, err := c.ReadMsg()
	if err != nil {
		return nil, err
	}
	if r.Id != q.Id {
		// One query at a time per connection: another ID is a broken
		// upstream, not a reply that came late.
		return nil, fmt.Errorf("reply with ID %d to query %d", r.Id, q.Id)
	}
	return r, nil
}

// get takes the newest idle connection that has not expired; it closes
// the expired ones it meets.
func (p *connPool) get() *poolConn {
	p.mu.Lock()
	defer p.mu.Unlock()
	now := time.Now()
	for len(p.idle) > 0 {
		c := p.idle[len(p.idle)-1]
		p.idle = p.idle[:len(p.idle)-1]
		if now.Sub(c.idleSince) >= p.limits.expire {
			// The newest has expired, so have all older ones.
			for _, old := range append(p.idle, c) {
				old.conn.Close()
			}
			p.idle = p.idle[:0]
			return nil
		}
		if !p.tooOld(c, now) {
			return c
		}
		c.conn.Close()
	}
	return nil
}

// tooOld reports whether c has been open for maxAge: it is replaced
// rather than used again, so a connection never outlives the upstream's
// view of it (a load balancer's rebalancing, a rotated certificate).
func (p *connPool) tooOld(c *poolConn, now time.Time) bool {
	return p.limits.maxAge > 0 && now.Sub(c.opened) >= p.limits.maxAge
}

// put keeps c for the next query, unless the pool is full or closed, or
// c is too old.
func (p *connPool) put(c *poolConn) {
	p.mu.Lock()
	defer p.mu.Unlock()
	l, now := p.limits, time.Now()
	if p.closed || l.expire <= 0 || (l.maxIdle > 0 && len(p.idle) >= l.maxIdle) || p.tooOld(c, now) {
		c.conn.Close()
		return
	}
	c.idleSince = now
	p.idle = append(p.idle, c)
	if p.sweep == nil {
		p.sweep = time.AfterFunc(l.expire, p.closeExpired)
	}
}

// closeExpired closes the connections idle for expire, and waits for
// the next one to expire while any is left: an idle pool holds no timer
// and no socket the upstream already gave up on.
func (p *connPool) closeExpired() {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.sweep = nil
	if p.closed {
		return
	}
	now := time.Now()
	n := 0
	for n < len(p.idle) && now.Sub(p.idle[n].idleSince) >= p.limits.expire {
		p.idle[n].conn.Close()
		n++
	}
	p.idle = append(p.idle[:0], p.idle[n:]...)
	if len(p.idle) > 0 {
		p.sweep = time.AfterFunc(p.limits.expire-now.Sub(p.idle[0].idleSince), p.closeExpired)
	}
}

// idleConns reports how many connections wait in the pool.
func (p *connPool) idleConns() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return len(p.idle)
}

// close closes the idle connections; those in use are closed when
// their query ends.
func (p *connPool) close() {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.closed = true
	if p.sweep != nil {
		p.sweep.Stop()
		p.sweep = nil
	}
	for _, c := range p.idle {
		c.conn.Close()
	}
	p.idle = nil
}
