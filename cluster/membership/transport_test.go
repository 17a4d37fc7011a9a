package membership

import (
	"bytes"
	"context"
	"log"
	"net"
	"testing"
	"time"
)

func startTransport(t testing.TB) (*transport, *net.UDPConn) {
	t.Helper()
	tr, err := listen(context.Background(), "127.0.0.1", 0, log.New(testWriter{t}, "", 0), nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = tr.Shutdown() })
	sender, err := net.DialUDP("udp", nil, &net.UDPAddr{IP: net.IPv4(127, 0, 0, 1), Port: tr.GetAutoBindPort()})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = sender.Close() })
	return tr, sender
}

type testWriter struct{ t testing.TB }

func (w testWriter) Write(p []byte) (int, error) { w.t.Log(string(p)); return len(p), nil }

// Each packet reaches memberlist whole, in a buffer of its own that the
// next packet read does not overwrite.
func TestTransportHandsOverEachPacketInItsOwnBuffer(t *testing.T) {
	tr, sender := startTransport(t)
	sent := [][]byte{bytes.Repeat([]byte{'a'}, 300), []byte("ping"), bytes.Repeat([]byte{'z'}, 1400)}
	for _, p := range sent {
		if _, err := sender.Write(p); err != nil {
			t.Fatal(err)
		}
	}
	var got [][]byte
	for range sent {
		select {
		case p := <-tr.PacketCh():
			if p.From.String() != sender.LocalAddr().String() {
				t.Errorf("packet from %s, sent from %s", p.From, sender.LocalAddr())
			}
			if cap(p.Buf) > 2*len(p.Buf) {
				t.Errorf("a %d-byte packet holds a %d-byte buffer", len(p.Buf), cap(p.Buf))
			}
			got = append(got, p.Buf)
		case <-time.After(10 * time.Second):
			t.Fatalf("received %d of %d packets", len(got), len(sent))
		}
	}
	for i := range sent {
		if !bytes.Equal(got[i], sent[i]) {
			t.Errorf("packet %d: got %d bytes %.10q…, sent %d bytes %.10q…", i, len(got[i]), got[i], len(sent[i]), sent[i])
		}
	}
}

// Shutdown returns while a packet waits for a reader that never comes,
// as when memberlist's Create failed after the transport was made.
func TestTransportShutdownWithNoReader(t *testing.T) {
	tr, sender := startTransport(t)
	if _, err := sender.Write([]byte("unread")); err != nil {
		t.Fatal(err)
	}
	done := make(chan struct{})
	go func() {
		_ = tr.Shutdown()
		close(done)
	}()
	select {
	case <-done:
	case <-time.After(10 * time.Second):
		t.Fatal("Shutdown still waits for its packet reader after 10s")
	}
}

// BenchmarkTransportPacket is one gossip-sized packet sent and received:
// its B/op is what a received packet costs the heap (memberlist's own
// transport reads each into a fresh 64 KiB buffer).
func BenchmarkTransportPacket(b *testing.B) {
	tr, sender := startTransport(b)
	packet := bytes.Repeat([]byte{'p'}, 200)
	b.ReportAllocs()
	for b.Loop() {
		if _, err := sender.Write(packet); err != nil {
			b.Fatal(err)
		}
		<-tr.PacketCh()
	}
}
