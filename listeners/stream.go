package listeners

import (
	"encoding/binary"
	"net"
	"sync"
	"time"
)

// A TCP or TLS connection is read through a small buffer of its own, so
// that the questions a client pipelines come in one read, and their
// answers are queued and written together (tcpWriter). The socket is
// touched only when the buffer holds no whole question: that is when the
// queued answers are written and the read deadline is set, before a read
// that may wait for the client. A busy connection so costs a read and a
// write per bufferful of questions, not two reads, a write and a
// deadline per question; a client that asks one question at a time is
// read, timed and answered as before.

// streamBuffer is the size of a connection's read buffer: a message up
// to smallMessage bytes and its length always fit, and so do about
// twenty typical questions. An idle connection holds it, so it is small.
const streamBuffer = 1 << 10

// smallMessage is the longest message read through the connection's
// buffer; a longer one is read into a buffer of its own, through the
// listener's gate for large messages (gate.go).
const smallMessage = 512

// streamBuffers hold the read buffers of closed connections, so that a
// connection per query does not allocate one each.
var streamBuffers = sync.Pool{New: func() any { return new([streamBuffer]byte) }}

// socketConn is an accepted TCP connection, under TLS for DNS over TLS,
// that writes the answers queued and sets its read deadline only when it
// reads the socket.
type socketConn struct {
	net.Conn
	// wait is how long the message awaited may take, from the first read
	// of the socket for it; armed once that read set the deadline.
	wait  time.Duration
	armed bool
	// beforeRead writes the queued answers; nil: none are queued.
	beforeRead func() error
}

// await starts waiting for a message: the next read of the socket sets
// the read deadline wait from then, and the reads after it for the same
// message keep that deadline, so a message trickled byte by byte must
// still come whole within wait.
func (c *socketConn) await(wait time.Duration) { c.wait, c.armed = wait, false }

func (c *socketConn) Read(p []byte) (int, error) {
	if c.beforeRead != nil {
		if err := c.beforeRead(); err != nil {
			return 0, err
		}
	}
	if !c.armed {
		c.Conn.SetReadDeadline(time.Now().Add(c.wait))
		c.armed = true
	}
	return c.Conn.Read(p)
}

// streamOf is the connection accepted as the serving loop reads it, and
// the socket beneath: a DNS over TLS connection comes with its socket
// (dotListener); a plain one is wrapped.
func streamOf(c net.Conn) (net.Conn, *socketConn) {
	if d, ok := c.(*dotConn); ok {
		return d, d.socket
	}
	s := &socketConn{Conn: c}
	return s, s
}

// frameReader reads the length-prefixed messages of a stream (RFC 1035
// section 4.2.2) through a buffer.
type frameReader struct {
	conn net.Conn
	buf  *[streamBuffer]byte
	r, w int // buf[r:w] has been read and not taken
}

func newFrameReader(conn net.Conn) *frameReader {
	return &frameReader{conn: conn, buf: streamBuffers.Get().(*[streamBuffer]byte)}
}

// release puts the buffer back; f is not used after.
func (f *frameReader) release() {
	streamBuffers.Put(f.buf)
	f.buf = nil
}

// fill reads until n bytes are buffered, n at most streamBuffer; an
// error only when they did not all come.
func (f *frameReader) fill(n int) error {
	if f.w-f.r >= n {
		return nil
	}
	if f.r == f.w || f.r+n > len(f.buf) {
		f.w = copy(f.buf[:], f.buf[f.r:f.w])
		f.r = 0
	}
	for f.w-f.r < n {
		k, err := f.conn.Read(f.buf[f.w:])
		f.w += k
		if err != nil && f.w-f.r < n {
			return err
		}
	}
	return nil
}

// length reads the length of the next message.
func (f *frameReader) length() (int, error) {
	if err := f.fill(2); err != nil {
		return 0, err
	}
	n := int(binary.BigEndian.Uint16(f.buf[f.r:]))
	f.r += 2
	return n, nil
}

// message reads the next n bytes, n at most smallMessage; they are the
// reader's until the next call.
func (f *frameReader) message(n int) ([]byte, error) {
	if err := f.fill(n); err != nil {
		return nil, err
	}
	m := f.buf[f.r : f.r+n : f.r+n]
	f.r += n
	return m, nil
}

// Read reads what is buffered, or else from the connection straight into
// p: a large message is read into its own buffer as it arrives, and no
// further.
func (f *frameReader) Read(p []byte) (int, error) {
	if f.r < f.w {
		k := copy(p, f.buf[f.r:f.w])
		f.r += k
		return k, nil
	}
	return f.conn.Read(p)
}
