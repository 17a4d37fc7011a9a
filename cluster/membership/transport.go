package membership

import (
	"context"
	"errors"
	"fmt"
	"log"
	"net"
	"strings"
	"time"

	"github.com/hashicorp/memberlist"
)

// transport is memberlist's UDP+TCP transport with dials and dialed
// connections that Close can abort: memberlist dials without a context,
// so a join of a seed that drops packets, or accepts and never answers,
// would otherwise hold Close for TCPTimeout.
type transport struct {
	*memberlist.NetTransport
	ctx     context.Context
	blocked func(addr string) bool
	// local is the address streams are dialed from: the bind IP when one
	// is set, so that peers see the same address in gossip packets and
	// streams (admission and rejections go by it), as they do in a pod.
	local *net.TCPAddr
}

var errBlocked = errors.New("membership: address blocked by test partition")

// listen binds ip:port. With port 0 the kernel picks the TCP port and the
// UDP socket must get the same one, which can race with other sockets, so
// it retries as memberlist's own Create does.
func listen(ctx context.Context, ip string, port int, logger *log.Logger, blocked func(string) bool) (*transport, error) {
	cfg := &memberlist.NetTransportConfig{BindAddrs: []string{ip}, BindPort: port, Logger: logger}
	attempts := 1
	if port == 0 {
		attempts = 10
	}
	var err error
	for range attempts {
		var nt *memberlist.NetTransport
		if nt, err = memberlist.NewNetTransport(cfg); err == nil {
			tr := &transport{NetTransport: nt, ctx: ctx, blocked: blocked}
			if a := net.ParseIP(ip); a != nil && !a.IsUnspecified() {
				tr.local = &net.TCPAddr{IP: a}
			}
			return tr, nil
		}
		if !strings.Contains(err.Error(), "address already in use") {
			break
		}
	}
	return nil, fmt.Errorf("membership: bind %s: %w", net.JoinHostPort(ip, fmt.Sprint(port)), err)
}

// DialTimeout implements memberlist.Transport.
func (t *transport) DialTimeout(addr string, timeout time.Duration) (net.Conn, error) {
	return t.DialAddressTimeout(memberlist.Address{Addr: addr}, timeout)
}

// DialAddressTimeout implements memberlist.NodeAwareTransport.
func (t *transport) DialAddressTimeout(a memberlist.Address, timeout time.Duration) (net.Conn, error) {
	if t.blocked != nil && t.blocked(a.Addr) {
		return nil, errBlocked
	}
	d := net.Dialer{Timeout: timeout}
	if t.local != nil {
		d.LocalAddr = t.local
	}
	c, err := d.DialContext(t.ctx, "tcp", a.Addr)
	if err != nil {
		return nil, err
	}
	// A peer that accepts but never answers holds a push/pull for
	// TCPTimeout; closing the connection on Close ends it at once.
	stop := context.AfterFunc(t.ctx, func() { _ = c.Close() })
	return &conn{Conn: c, stop: stop}, nil
}

// conn is a dialed connection that Close of the Membership also closes.
type conn struct {
	net.Conn
	stop func() bool
}

func (c *conn) Close() error {
	c.stop()
	return c.Conn.Close()
}

// WriteTo implements memberlist.Transport.
func (t *transport) WriteTo(b []byte, addr string) (time.Time, error) {
	return t.WriteToAddress(b, memberlist.Address{Addr: addr})
}

// WriteToAddress implements memberlist.NodeAwareTransport.
func (t *transport) WriteToAddress(b []byte, a memberlist.Address) (time.Time, error) {
	if t.blocked != nil && t.blocked(a.Addr) {
		return time.Now(), nil // lost on the way, as UDP may be
	}
	return t.NetTransport.WriteToAddress(b, a)
}
