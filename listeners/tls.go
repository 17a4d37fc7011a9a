package listeners

import (
	"crypto/tls"
	"net"
)

// DNS over TLS (RFC 7858) is DNS over TCP inside TLS: the same framing,
// the same connection bounds and the same serving loop as plain TCP. Only
// the accepted connections differ.

// dotListener hands out server-side TLS connections. The handshake runs
// on the connection's first read, in its own goroutine and under its
// read deadline, so a client that stalls mid-handshake holds only that.
type dotListener struct {
	net.Listener
	config *tls.Config
}

func (l *dotListener) Accept() (net.Conn, error) {
	c, err := l.Listener.Accept()
	if err != nil {
		return nil, err
	}
	s := &socketConn{Conn: c}
	return &dotConn{tls.Server(s, l.config), s}, nil
}

// dotConn is TLS over a socket that writes the queued answers and sets
// the read deadline only when TLS reads it (stream.go): a question
// already in TLS's buffer costs neither. It closes the TCP connection
// without a TLS close_notify: sending that alert waits behind a write
// that may be stalled on a slow client, and stopping a listener must not
// wait for clients.
type dotConn struct {
	*tls.Conn
	socket *socketConn
}

func (c *dotConn) Close() error { return c.socket.Close() }

// dotConfig is the TLS configuration of DNS over TLS: ALPN "dot" (RFC
// 7858 section 3.2 and the IANA registry).
func dotConfig(base *tls.Config) *tls.Config {
	c := base.Clone()
	c.NextProtos = []string{"dot"}
	return c
}
