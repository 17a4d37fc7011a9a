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

// dotPool keeps the connections to one DNS over TLS upstream open
// between queries: a handshake costs two round trips and the CPU of a
// key exchange, a connection used again costs neither. A connection
// carries one query at a time; the idle ones wait in the pool, newest
// last, at most maxIdle of them (0: no bound), each closed once it has
// been idle for expire (0: none is kept). Sessions are resumed through
// the tls.Config's ClientSessionCache when a new connection is needed.
type dotPool struct {
	addr    string
	tls     *tls.Config // with the ServerName the certificate is checked against
	expire  time.Duration
	maxIdle int
	// onConn observes every connection taken for a query: reused from
	// the pool, or newly opened.
	onConn func(reused bool)

	mu     sync.Mutex
	idle   []*dotConn  // ordered by idleSince, oldest first
	sweep  *time.Timer // armed while connections are idle, to close them once expired
	closed bool
}

type dotConn struct {
	conn      *dns.Conn
	idleSince time.Time
}

func newDoTPool(addr string, base *tls.Config, expire time.Duration, maxIdle int, onConn func(bool)) *dotPool {
	cfg := base.Clone()
	if cfg.ServerName == "" {
		// Without a tls server name the certificate must hold the
		// upstream's IP address, as CoreDNS checks it.
		if host, _, err := net.SplitHostPort(addr); err == nil {
			cfg.ServerName = host
		}
	}
	if onConn == nil {
		onConn = func(bool) {}
	}
	return &dotPool{addr: addr, tls: cfg, expire: expire, maxIdle: maxIdle, onConn: onConn}
}

// exchange sends q on an idle connection, or on a new one, and reads
// its reply within timeout (and ctx's deadline). An idle connection the
// upstream has closed meanwhile (its own idle timeout) is dropped and
// the question asked again on the next one.
func (p *dotPool) exchange(ctx context.Context, q *dns.Msg, timeout time.Duration) (*dns.Msg, error) {
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
func (p *dotPool) dial(ctx context.Context, timeout time.Duration) (*dotConn, error) {
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	d := tls.Dialer{Config: p.tls}
	nc, err := d.DialContext(ctx, "tcp", p.addr)
	if err != nil {
		return nil, err
	}
	return &dotConn{conn: &dns.Conn{Conn: nc}}, nil
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
func (p *dotPool) get() *dotConn {
	p.mu.Lock()
	defer p.mu.Unlock()
	now := time.Now()
	for len(p.idle) > 0 {
		c := p.idle[len(p.idle)-1]
		p.idle = p.idle[:len(p.idle)-1]
		if now.Sub(c.idleSince) < p.expire {
			return c
		}
		// The newest has expired, so have all older ones.
		for _, old := range append(p.idle, c) {
			old.conn.Close()
		}
		p.idle = p.idle[:0]
	}
	return nil
}

// put keeps c for the next query, unless the pool is full or closed.
func (p *dotPool) put(c *dotConn) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.closed || p.expire <= 0 || (p.maxIdle > 0 && len(p.idle) >= p.maxIdle) {
		c.conn.Close()
		return
	}
	c.idleSince = time.Now()
	p.idle = append(p.idle, c)
	if p.sweep == nil {
		p.sweep = time.AfterFunc(p.expire, p.closeExpired)
	}
}

// closeExpired closes the connections idle for expire, and waits for
// the next one to expire while any is left: an idle pool holds no timer
// and no socket the upstream already gave up on.
func (p *dotPool) closeExpired() {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.sweep = nil
	if p.closed {
		return
	}
	now := time.Now()
	n := 0
	for n < len(p.idle) && now.Sub(p.idle[n].idleSince) >= p.expire {
		p.idle[n].conn.Close()
		n++
	}
	p.idle = append(p.idle[:0], p.idle[n:]...)
	if len(p.idle) > 0 {
		p.sweep = time.AfterFunc(p.expire-now.Sub(p.idle[0].idleSince), p.closeExpired)
	}
}

// idleConns reports how many connections wait in the pool.
func (p *dotPool) idleConns() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return len(p.idle)
}

// close closes the idle connections; those in use are closed when
// their query ends.
func (p *dotPool) close() {
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
