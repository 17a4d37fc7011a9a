package listeners

import (
	"encoding/binary"
	"errors"
	"io"
	"net"
	"net/netip"
	"sync"
	"time"

	"github.com/shardns/shardns/query"
)

func isClosed(err error) bool { return errors.Is(err, net.ErrClosed) }

// serveTCP accepts connections until the listener closes. A connection
// over the bounds closes the idlest one (conns.go), so a flood cannot
// starve memory nor lock new clients out.
func (l *listener) serveTCP() {
	for {
		c, err := l.sockets.TCP.Accept()
		if err != nil {
			if isClosed(err) {
				return
			}
			l.cfg.Logger.Warn("tcp accept", "err", err)
			time.Sleep(10 * time.Millisecond) // back off on EMFILE and the like
			continue
		}
		s := l.conns.add(c, l.cfg.bounds())
		if s == nil {
			c.Close()
			continue
		}
		l.wg.Go(func() {
			defer l.conns.remove(s)
			defer c.Close()
			l.serveConn(c, s)
		})
	}
}

// serveConn answers length-prefixed queries in order until the client
// closes, goes idle past the timeout, or sends something malformed. A
// client that sends one byte and stalls holds only its own goroutine.
func (l *listener) serveConn(c net.Conn, s *trackedConnState) {
	w := &tcpWriter{conn: c, timeout: l.cfg.writeTimeout()}
	t := query.Transport{TCP: true, IPv6: isIPv6(c.RemoteAddr()), Late: w, Stream: w}
	t.Client, t.Server = addrPort(c.RemoteAddr()), addrPort(c.LocalAddr())
	var lenBuf [2]byte
	buf := make([]byte, 0, 512)
	out := make([]byte, 0, 512)
	// The first query must come within the read timeout, each next one
	// within the idle timeout, as CoreDNS (miekg/dns) reads.
	wait := l.cfg.readTimeout()
	for served := 0; l.cfg.MaxQueries <= 0 || served < l.cfg.MaxQueries; served++ {
		c.SetReadDeadline(time.Now().Add(wait))
		wait = l.cfg.IdleTimeout
		if _, err := io.ReadFull(c, lenBuf[:]); err != nil {
			return
		}
		n := int(binary.BigEndian.Uint16(lenBuf[:]))
		var resp []byte
		var ok bool
		if n <= cap(buf) {
			resp, ok = l.serveSmall(c, s, t, buf[:n], out[:0])
		} else {
			resp, ok = l.serveLarge(c, s, t, n, out[:0])
		}
		if !ok {
			return
		}
		if resp == nil {
			continue // answered later through w
		}
		if err := w.write(resp); err != nil {
			return
		}
		if cap(resp) <= keptBuffer {
			out = resp[:0]
		}
	}
}

// keptBuffer is the largest answer or frame buffer a connection keeps
// between queries: one that answered a large question is dropped, so
// that a thousand connections that each asked one cost little idle.
const keptBuffer = 4 << 10

// serveSmall reads a message that fits the connection's own buffer and
// answers it: the fast path, which allocates nothing. resp is nil when
// the answer comes later; ok is false when the connection must close.
func (l *listener) serveSmall(c net.Conn, s *trackedConnState, t query.Transport, buf, out []byte) (resp []byte, ok bool) {
	if _, err := io.ReadFull(c, buf); err != nil {
		return nil, false
	}
	l.conns.touch(s)
	return l.answerTCP(buf, t, out)
}

// serveLarge reads a message longer than the connection's own buffer
// into a pooled buffer that grows as its bytes arrive, holding a place
// in the listener's gate for large messages (gate.go) from its first
// byte until it is answered: their number is bounded, and the one that
// has been arriving the longest has its connection closed for a newer
// one. When every place is being answered, the connection closes.
func (l *listener) serveLarge(c net.Conn, s *trackedConnState, t query.Transport, n int, out []byte) (resp []byte, ok bool) {
	p := l.large.enter(func() { c.Close() })
	if p == nil {
		if l.cfg.LargeDropped != nil {
			l.cfg.LargeDropped.Inc()
		}
		return nil, false
	}
	defer l.large.leave(p)
	msg := newMsgBuffer(1)
	defer msg.release()
	if err := msg.readFrom(c, n); err != nil || !l.large.arrived(p) {
		return nil, false
	}
	l.conns.touch(s)
	return l.answerTCP(msg.bytes(), t, out)
}

// answerTCP answers one message read from a connection.
func (l *listener) answerTCP(req []byte, t query.Transport, out []byte) (resp []byte, ok bool) {
	resp = l.serve(req, t, out)
	if resp == nil && !query.Pending(req) {
		return nil, false // dropped: the client is not speaking DNS
	}
	return resp, true
}

// readTimeout is how long a new connection may take to send its first
// query.
func (c *Config) readTimeout() time.Duration {
	if c.ReadTimeout > 0 {
		return c.ReadTimeout
	}
	return c.IdleTimeout
}

// writeTimeout bounds writing one response.
func (c *Config) writeTimeout() time.Duration {
	if c.WriteTimeout > 0 {
		return c.WriteTimeout
	}
	return c.IdleTimeout
}

// tcpWriter frames responses onto one connection; answers ready now and
// forwarded answers ready later may interleave (RFC 7766 allows any
// order), so writes are serialised.
type tcpWriter struct {
	mu      sync.Mutex
	conn    net.Conn
	timeout time.Duration
	frame   []byte
}

func (w *tcpWriter) write(resp []byte) error {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.frame = binary.BigEndian.AppendUint16(w.frame[:0], uint16(len(resp)))
	w.frame = append(w.frame, resp...)
	w.conn.SetWriteDeadline(time.Now().Add(w.timeout))
	_, err := w.conn.Write(w.frame)
	if cap(w.frame) > keptBuffer {
		w.frame = nil
	}
	return err
}

// WriteLate implements query.LateWriter.
func (w *tcpWriter) WriteLate(resp []byte, _ netip.AddrPort) { w.write(resp) }

// WriteStream implements query.StreamWriter: the messages of a zone
// transfer but the last, written in order before it.
func (w *tcpWriter) WriteStream(msg []byte) error { return w.write(msg) }
