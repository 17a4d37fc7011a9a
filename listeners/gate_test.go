package listeners

import (
	"bytes"
	"io"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
)

// A full gate lets a newcomer in by cutting the message arriving the
// longest; a message that has arrived is never cut; when every place is
// answering, the newcomer is refused; a cut message's place is the
// newcomer's, so giving it back frees nothing more.
func TestGateCutsTheOldestArriving(t *testing.T) {
	cuts := prometheus.NewCounter(prometheus.CounterOpts{Name: "cuts"})
	g := newGate(2, cuts)
	var cut []string
	enter := func(name string) *place { return g.enter(func() { cut = append(cut, name) }) }
	a, b := enter("a"), enter("b")
	if !g.arrived(a) {
		t.Fatal("a was cut before any newcomer")
	}
	c := enter("c") // a is answering: b is the oldest arriving
	if len(cut) != 1 || cut[0] != "b" || g.arrived(b) {
		t.Fatalf("cut %v, want b alone", cut)
	}
	if !g.arrived(c) {
		t.Fatal("c was cut")
	}
	if d := enter("d"); d != nil {
		t.Fatal("a newcomer got in while every place was answering")
	}
	g.leave(b) // its place is c's already
	if g.inUse() != 2 {
		t.Fatalf("%d places in use, want 2", g.inUse())
	}
	g.leave(a)
	g.leave(c)
	if g.inUse() != 0 || counterValue(t, cuts) != 1 {
		t.Fatalf("%d places in use and %v cuts, want 0 and 1", g.inUse(), counterValue(t, cuts))
	}
}

// trickle returns one byte per Read, as a peer that sends slowly.
type trickle struct{ r io.Reader }

func (t trickle) Read(p []byte) (int, error) { return t.r.Read(p[:min(1, len(p))]) }

// A message buffer holds about what arrived, not what was declared: a
// body of 600 bytes of a declared 65,535 sits in a 4 KiB buffer, asking
// before it outgrows the smallest class; the buffers go back to their pools.
func TestMsgBufferGrowsAsBytesArrive(t *testing.T) {
	body := bytes.Repeat([]byte{7}, 600)
	m := newMsgBuffer(0)
	asked := 0
	m.outgrow = func() error { asked++; return nil }
	if err := m.readFrom(trickle{bytes.NewReader(body)}, 65535); err != io.EOF {
		t.Fatalf("read: %v, want EOF", err)
	}
	if !bytes.Equal(m.bytes(), body) || len(*m.buf) != 4<<10 || asked != 1 {
		t.Fatalf("%d bytes in a buffer of %d, outgrow asked %d times", m.n, len(*m.buf), asked)
	}
	m.release()

	m = newMsgBuffer(0)
	m.outgrow = func() error { return errBusy }
	if err := m.readFrom(bytes.NewReader(body), 65535); err != errBusy || m.n != 512 {
		t.Fatalf("refused growth: %v after %d bytes, want errBusy after 512", err, m.n)
	}
	m.release()

	m = newMsgBuffer(0)
	if err := m.readFrom(bytes.NewReader(make([]byte, 70000)), 70000); err != errMessageTooLarge {
		t.Fatalf("beyond a DNS message: %v", err)
	}
	m.release()
}
