package listeners

import (
	"errors"
	"io"
	"sync"

	"github.com/miekg/dns"
)

// A DNS message over TCP, TLS or HTTPS may be 65,535 bytes but is almost
// always under 512. A message is read into a pooled buffer of the
// smallest class that holds what has arrived, moving up a class as more
// comes, so a peer that declares 64 KiB and trickles costs about what it
// sent, never what it declared.

// bufferClasses are the sizes a message buffer grows through.
var bufferClasses = [...]int{512, 4 << 10, 16 << 10, dns.MaxMsgSize}

// bufferPools hold free buffers of each class, as *[]byte so that
// putting one back does not allocate.
var bufferPools [len(bufferClasses)]sync.Pool

// errMessageTooLarge is a message longer than the largest DNS message.
var errMessageTooLarge = errors.New("larger than a DNS message")

// msgBuffer is a message being read.
type msgBuffer struct {
	class int
	buf   *[]byte
	n     int // bytes read
	// outgrow, if set, is asked before the message outgrows the smallest
	// class; its error stops the reading.
	outgrow func() error
}

// newMsgBuffer takes a buffer of class from its pool.
func newMsgBuffer(class int) *msgBuffer {
	m := &msgBuffer{class: class}
	m.buf = takeBuffer(class)
	return m
}

func takeBuffer(class int) *[]byte {
	if b, ok := bufferPools[class].Get().(*[]byte); ok {
		return b
	}
	b := make([]byte, bufferClasses[class])
	return &b
}

// bytes is what has been read.
func (m *msgBuffer) bytes() []byte { return (*m.buf)[:m.n] }

// release puts the buffer back in its pool (nil: nothing to put); m
// is not used after.
func (m *msgBuffer) release() {
	if m != nil && m.buf != nil {
		bufferPools[m.class].Put(m.buf)
		m.buf = nil
	}
}

// grow moves what was read into a buffer of the next class.
func (m *msgBuffer) grow() error {
	if m.class == len(bufferClasses)-1 {
		return errMessageTooLarge
	}
	if m.class == 0 && m.outgrow != nil {
		if err := m.outgrow(); err != nil {
			return err
		}
	}
	next := takeBuffer(m.class + 1)
	copy(*next, m.bytes())
	m.release()
	m.class, m.buf = m.class+1, next
	return nil
}

// readFrom reads from r until it has want bytes, r ends (io.EOF) or
// fails; errMessageTooLarge when want is beyond the largest class and
// more than that arrives.
func (m *msgBuffer) readFrom(r io.Reader, want int) error {
	for m.n < want {
		if m.n == len(*m.buf) {
			if err := m.grow(); err != nil {
				return err
			}
		}
		k, err := r.Read((*m.buf)[m.n:min(want, len(*m.buf))])
		m.n += k
		if err != nil {
			return err
		}
	}
	return nil
}
