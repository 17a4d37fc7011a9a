package membership

import (
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"io"
	"log"
	"net"
	"net/netip"
	"testing"
	"time"
)

// gatedTransport is a transport on 127.0.0.1 whose streams pass a gate
// with limits l, admitting the addresses admit admits (nil: every one).
func gatedTransport(t *testing.T, l StreamLimits, admit func(netip.Addr) bool) (*transport, *refusalLog) {
	t.Helper()
	refused := &refusalLog{}
	l.fill(DefaultStreamLimits(time.Minute))
	gate := newStreamGate(l, admit, refused.record)
	tr, err := listen(context.Background(), "127.0.0.1", 0, log.New(testWriter{t}, "", 0), nil, gate)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = tr.Shutdown() })
	return tr, refused
}

// dialFrom opens a stream to tr from the loopback address from.
func dialFrom(t *testing.T, tr *transport, from string) net.Conn {
	t.Helper()
	d := net.Dialer{LocalAddr: &net.TCPAddr{IP: net.ParseIP(from)}, Timeout: 10 * time.Second}
	c, err := d.Dial("tcp", tr.tcp.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return c
}

// accepted is the next stream the transport hands memberlist.
func accepted(t *testing.T, tr *transport) net.Conn {
	t.Helper()
	select {
	case c := <-tr.StreamCh():
		t.Cleanup(func() { c.Close() })
		return c
	case <-time.After(10 * time.Second):
		t.Fatal("no stream handed over in 10s")
		return nil
	}
}

// closedByServer reports whether c was closed by the other end without
// a byte.
func closedByServer(c net.Conn) error {
	_ = c.SetReadDeadline(time.Now().Add(10 * time.Second))
	n, err := c.Read(make([]byte, 1))
	if n == 0 && (errors.Is(err, io.EOF) || errors.Is(err, net.ErrClosed) || isReset(err)) {
		return nil
	}
	return errors.New("the stream was not closed by the transport")
}

func isReset(err error) bool {
	var op *net.OpError
	return errors.As(err, &op) && !op.Timeout()
}

// encryptedHeader is what memberlist writes before an encrypted
// payload of size bytes: the label header and the message header.
func encryptedHeader(label string, size uint32) []byte {
	h := []byte{labelHeaderByte, byte(len(label))}
	h = append(h, label...)
	h = append(h, encryptMsgByte)
	return binary.BigEndian.AppendUint32(h, size)
}

// A stream that declares what it may carry is read whole.
func TestStreamWithinItsBudgetIsReadWhole(t *testing.T) {
	tr, refused := gatedTransport(t, StreamLimits{Bytes: 64 << 10}, nil)
	c := dialFrom(t, tr, "127.0.0.1")
	head := encryptedHeader("shardns", 60<<10)
	body := bytes.Repeat([]byte{'x'}, 60<<10)
	go func() { c.Write(append(head, body...)); c.(*net.TCPConn).CloseWrite() }()
	got, err := io.ReadAll(accepted(t, tr))
	if err != nil || len(got) != len(head)+len(body) {
		t.Fatalf("read %d bytes, err %v; want %d and none", len(got), err, len(head)+len(body))
	}
	if len(refused.got) != 0 {
		t.Errorf("refused %q", refused.got)
	}
}

// A stream that sends more than its budget, whatever its header said,
// fails once it has delivered the budget, and is counted.
func TestStreamOverItsBudgetFails(t *testing.T) {
	const budget = 64 << 10
	tr, refused := gatedTransport(t, StreamLimits{Bytes: budget}, nil)
	c := dialFrom(t, tr, "127.0.0.1")
	go func() {
		c.Write(encryptedHeader("shardns", 1000))
		c.Write(bytes.Repeat([]byte{'x'}, 4*budget))
	}()
	n, err := io.Copy(io.Discard, accepted(t, tr))
	if !errors.Is(err, errStreamTooLong) || n != budget {
		t.Fatalf("read %d bytes and %v; want %d and %v", n, err, budget, errStreamTooLong)
	}
	if err := refused.has(" gossip-limit"); err != nil {
		t.Error(err)
	}
}

// A header declaring more than the budget fails the stream as soon as it
// is read: nothing waits for the payload.
func TestStreamDeclaringTooMuchFailsAtItsHeader(t *testing.T) {
	tr, refused := gatedTransport(t, StreamLimits{Bytes: MaxStreamBytes}, nil)
	c := dialFrom(t, tr, "127.0.0.1")
	head := encryptedHeader("shardns", 20<<20)
	if _, err := c.Write(head); err != nil {
		t.Fatal(err)
	}
	n, err := io.Copy(io.Discard, accepted(t, tr))
	if !errors.Is(err, errStreamTooLong) || n > int64(len(head)) {
		t.Fatalf("read %d bytes and %v; want at most the %d of the header and %v", n, err, len(head), errStreamTooLong)
	}
	if err := refused.has(" gossip-limit"); err != nil {
		t.Error(err)
	}
}

// Streams are read a few at a time from one address and in all: one
// more is closed unread and counted, and a slot freed is taken again.
func TestStreamsReadAtOnceAreBounded(t *testing.T) {
	tr, refused := gatedTransport(t, StreamLimits{PerSource: 2, Total: 3}, nil)
	dialFrom(t, tr, "127.0.0.1")
	first := accepted(t, tr)
	dialFrom(t, tr, "127.0.0.1")
	accepted(t, tr)
	if err := closedByServer(dialFrom(t, tr, "127.0.0.1")); err != nil {
		t.Errorf("a third stream from one address: %v", err)
	}
	other := dialFrom(t, tr, "127.0.0.2")
	if got := accepted(t, tr); got.RemoteAddr().String() != other.LocalAddr().String() {
		t.Errorf("handed over %s, want the stream from another address %s", got.RemoteAddr(), other.LocalAddr())
	}
	if err := closedByServer(dialFrom(t, tr, "127.0.0.3")); err != nil {
		t.Errorf("a fourth stream in all: %v", err)
	}
	if err := refused.has(" gossip-limit"); err != nil {
		t.Error(err)
	}
	first.Close() // memberlist is done with it: its slot is free
	again := dialFrom(t, tr, "127.0.0.1")
	if got := accepted(t, tr); got.RemoteAddr().String() != again.LocalAddr().String() {
		t.Errorf("handed over %s, want %s in the freed slot", got.RemoteAddr(), again.LocalAddr())
	}
}

// memberlist sets a stream's deadline itself, and moves it as the
// exchange goes on: a sender that holds its last byte still loses the
// stream at the gate's deadline, counted.
func TestStreamDeadlineCannotBeExtended(t *testing.T) {
	tr, refused := gatedTransport(t, StreamLimits{Timeout: 200 * time.Millisecond}, nil)
	c := dialFrom(t, tr, "127.0.0.1")
	if _, err := c.Write(encryptedHeader("shardns", 1000)); err != nil {
		t.Fatal(err)
	}
	s := accepted(t, tr)
	if err := s.SetDeadline(time.Now().Add(time.Hour)); err != nil {
		t.Fatal(err)
	}
	if _, err := io.Copy(io.Discard, s); !errors.Is(err, errStreamExpired) {
		t.Fatalf("a stream holding its last byte ended with %v, want %v", err, errStreamExpired)
	}
	if err := refused.has(" gossip-limit"); err != nil {
		t.Error(err)
	}
}

// A stream from an address the gate does not admit is closed unread.
func TestStreamsFromAddressesNotAdmittedAreClosed(t *testing.T) {
	peer := netip.MustParseAddr("127.0.0.1")
	tr, refused := gatedTransport(t, StreamLimits{}, func(a netip.Addr) bool { return a == peer })
	if err := closedByServer(dialFrom(t, tr, "127.0.0.2")); err != nil {
		t.Errorf("a stream from 127.0.0.2: %v", err)
	}
	if err := refused.has(" not-a-peer"); err != nil {
		t.Error(err)
	}
	c := dialFrom(t, tr, "127.0.0.1")
	if got := accepted(t, tr); got.RemoteAddr().String() != c.LocalAddr().String() {
		t.Errorf("handed over %s, want the peer's stream %s", got.RemoteAddr(), c.LocalAddr())
	}
}

// The header is read as memberlist reads it, however the bytes arrive.
func TestPreambleDeclares(t *testing.T) {
	for _, tc := range []struct {
		name     string
		stream   []byte
		declared int64 // -1: none
	}{
		{"labelled", encryptedHeader("shardns", 1000), 2 + 7 + 5 + 1000},
		{"longest label", encryptedHeader(string(bytes.Repeat([]byte{'l'}, 255)), 1<<20), 2 + 255 + 5 + 1<<20},
		{"no label", binary.BigEndian.AppendUint32([]byte{encryptMsgByte}, 20<<20), 5 + 20<<20},
		{"plain push/pull", []byte{6, 0x83, 1, 2, 3, 4, 5}, -1},
		{"labelled plain", []byte{labelHeaderByte, 1, 'x', 6, 10, 0, 0, 0, 9}, -1},
		{"empty label", []byte{labelHeaderByte, 0, encryptMsgByte, 0, 0, 0, 9}, -1},
		{"cut short", encryptedHeader("shardns", 1000)[:12], -1},
	} {
		for _, step := range []int{1, 3, len(tc.stream)} {
			var p preamble
			got := int64(-1)
			for b := tc.stream; len(b) > 0; b = b[min(step, len(b)):] {
				if d, ok := p.feed(b[:min(step, len(b))]); ok {
					got = d
				}
			}
			if got != tc.declared {
				t.Errorf("%s in pieces of %d: declared %d, want %d", tc.name, step, got, tc.declared)
			}
		}
	}
}

// FuzzPreamble: any bytes, in any pieces, declare what they declare whole,
// at most once.
func FuzzPreamble(f *testing.F) {
	f.Add(encryptedHeader("shardns", 20<<20), 3)
	f.Add([]byte{labelHeaderByte, 0}, 1)
	f.Add([]byte{6, 1, 2}, 2)
	f.Fuzz(func(t *testing.T, stream []byte, step int) {
		step = max(1, step%64)
		declares := func(step int) (n int, last int64) {
			var p preamble
			for b := stream; len(b) > 0; b = b[min(step, len(b)):] {
				if d, ok := p.feed(b[:min(step, len(b))]); ok {
					n, last = n+1, d
				}
			}
			return n, last
		}
		n, d := declares(step)
		wn, wd := declares(len(stream) + 1)
		if n > 1 || n != wn || d != wd {
			t.Fatalf("in pieces of %d: %d declarations, last %d; whole: %d, %d", step, n, d, wn, wd)
		}
	})
}
