package listeners

import (
	"encoding/binary"
	"errors"
	"net"
	"net/netip"
	"sync"
	"time"

	"github.com/shardns/shardns/query"
)

func isClosed(err error) bool { return errors.Is(err, net.ErrClosed) }

// serveTCP accepts connections until the listener closes. A connection
// over the bounds closes the idlest one (conns.go), so a flood cannot
// starve memory nor lock new clients out. Once it returns, the workers
// waiting for a connection leave.
func (l *listener) serveTCP() {
	defer close(l.handoff)
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
		c, sock := streamOf(c)
		s := l.conns.add(c, l.cfg.bounds())
		if s == nil {
			c.Close()
			continue
		}
		job := acceptedConn{c: c, sock: sock, state: s}
		select {
		case l.handoff <- job:
		default:
			l.wg.Go(func() { l.connWorker(job) })
		}
	}
}

// acceptedConn is a connection accepted and counted, for a worker.
type acceptedConn struct {
	c     net.Conn
	sock  *socketConn
	state *trackedConnState
}

// maxIdleConnWorkers bounds the workers that wait for a connection once
// theirs closed; one more leaves. Each holds the stack it grew until
// collections shrink it; 16 clients each dialling, asking and closing
// were answered at the same cost with 16 or 64 waiting.
const maxIdleConnWorkers = 32

// connWorker serves job, then waits for the next connection serveTCP
// hands over, until serveTCP has returned. A goroutine starts on a small stack, and answering
// a question grows it: twice a connection, copying and unwinding the
// stack each time, which was 6% of the CPU of a server asked one
// question per connection (perf record, 16 clients). A worker keeps the
// stack it grew.
func (l *listener) connWorker(job acceptedConn) {
	for {
		l.serveAccepted(job)
		if l.idleWorkers.Add(1) > maxIdleConnWorkers {
			l.idleWorkers.Add(-1)
			return
		}
		next, ok := <-l.handoff
		l.idleWorkers.Add(-1)
		if !ok {
			return
		}
		job = next
	}
}

func (l *listener) serveAccepted(job acceptedConn) {
	defer l.conns.remove(job.state)
	defer job.c.Close()
	l.serveConn(job.c, job.sock, job.state)
}

// serveConn answers length-prefixed queries in order until the client
// closes, goes idle past the timeout, or sends something malformed. A
// client that sends one byte and stalls holds only its own goroutine.
// Questions are read through a buffer and their answers queued, written
// before the next read of the socket (stream.go).
func (l *listener) serveConn(c net.Conn, sock *socketConn, s *trackedConnState) {
	w := &tcpWriter{conn: c, timeout: l.cfg.writeTimeout()}
	defer w.flush()
	sock.beforeRead = w.flush
	t := query.Transport{TCP: true, IPv6: isIPv6(c.RemoteAddr()), Late: w, Stream: w}
	t.Client, t.Server = addrPort(c.RemoteAddr()), addrPort(c.LocalAddr())
	in := newFrameReader(c)
	defer in.release()
	out := make([]byte, 0, 512)
	// The first query must come within the read timeout, each next one
	// within the idle timeout, as CoreDNS (miekg/dns) reads.
	wait := l.cfg.readTimeout()
	for served := 0; l.cfg.MaxQueries <= 0 || served < l.cfg.MaxQueries; served++ {
		sock.await(wait)
		wait = l.cfg.IdleTimeout
		n, err := in.length()
		if err != nil {
			return
		}
		var resp []byte
		var ok bool
		if n <= smallMessage {
			resp, ok = l.serveSmall(in, s, t, n, out[:0])
		} else {
			resp, ok = l.serveLarge(c, in, s, t, n, out[:0])
		}
		if !ok {
			return
		}
		if resp == nil {
			continue // answered later through w
		}
		if err := w.queue(resp); err != nil {
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

// serveSmall reads a message that fits the connection's read buffer and
// answers it: the fast path, which allocates nothing. resp is nil when
// the answer comes later; ok is false when the connection must close.
func (l *listener) serveSmall(in *frameReader, s *trackedConnState, t query.Transport, n int, out []byte) (resp []byte, ok bool) {
	req, err := in.message(n)
	if err != nil {
		return nil, false
	}
	l.conns.touch(s)
	return l.answerTCP(req, t, out)
}

// serveLarge reads a message longer than smallMessage into a pooled
// buffer that grows as its bytes arrive, holding a place in the
// listener's gate for large messages (gate.go) from its first byte
// until it is answered: their number is bounded, and the one that has
// been arriving the longest has its connection closed for a newer one.
// When every place is being answered, the connection closes.
func (l *listener) serveLarge(c net.Conn, in *frameReader, s *trackedConnState, t query.Transport, n int, out []byte) (resp []byte, ok bool) {
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
	if err := msg.readFrom(in, n); err != nil || !l.large.arrived(p) {
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
// order), so writes are serialised. The serving loop queues its answers
// and flushes them before it reads the socket; any other write carries
// the queue before its own message, so every answer goes out in the
// order it was ready, as when each was written at once.
type tcpWriter struct {
	mu      sync.Mutex
	conn    net.Conn
	timeout time.Duration
	frames  *[]byte // framed messages not yet written; nil when none
	// err is why a write that carried queued answers failed: the
	// serving loop closes the connection, as when it wrote each itself.
	err error
}

// frameBuffers hold the buffers of written frames, so that an idle
// connection holds none.
var frameBuffers = sync.Pool{New: func() any { return new([]byte) }}

// queue frames resp to be written by the next flush or write. What is
// queued is written first when resp would take it past keptBuffer.
func (w *tcpWriter) queue(resp []byte) error {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.err != nil {
		return w.err
	}
	if w.frames != nil && len(*w.frames)+2+len(resp) > keptBuffer {
		if err := w.writeLocked(true); err != nil {
			return err
		}
	}
	w.appendLocked(resp)
	return nil
}

// flush writes what is queued.
func (w *tcpWriter) flush() error {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.err != nil || w.frames == nil {
		return w.err
	}
	return w.writeLocked(true)
}

// write writes resp at once, after what is queued.
func (w *tcpWriter) write(resp []byte) error {
	w.mu.Lock()
	defer w.mu.Unlock()
	queued := w.frames != nil
	w.appendLocked(resp)
	return w.writeLocked(queued)
}

func (w *tcpWriter) appendLocked(resp []byte) {
	if w.frames == nil {
		w.frames = frameBuffers.Get().(*[]byte)
	}
	*w.frames = binary.BigEndian.AppendUint16(*w.frames, uint16(len(resp)))
	*w.frames = append(*w.frames, resp...)
}

// writeLocked writes the frames and gives their buffer back; a failure
// is kept when they carried queued answers.
func (w *tcpWriter) writeLocked(carriesQueued bool) error {
	w.conn.SetWriteDeadline(time.Now().Add(w.timeout))
	_, err := w.conn.Write(*w.frames)
	if cap(*w.frames) <= keptBuffer {
		*w.frames = (*w.frames)[:0]
		frameBuffers.Put(w.frames)
	}
	w.frames = nil
	if err != nil && carriesQueued {
		w.err = err
	}
	return err
}

// WriteLate implements query.LateWriter.
func (w *tcpWriter) WriteLate(resp []byte, _ netip.AddrPort) { w.write(resp) }

// WriteStream implements query.StreamWriter: the messages of a zone
// transfer but the last, written in order before it.
func (w *tcpWriter) WriteStream(msg []byte) error { return w.write(msg) }
