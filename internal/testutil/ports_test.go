package testutil

import (
	"fmt"
	"net"
	"testing"
)

// FreePort gives ports below the kernel's ephemeral range, each once, that
// a server can bind for TCP and UDP.
func TestFreePortIsBelowTheEphemeralRange(t *testing.T) {
	low, _ := ephemeralRange()
	seen := map[int]bool{}
	for range 50 {
		port, err := FreePort()
		if err != nil {
			t.Fatal(err)
		}
		if port >= low || seen[port] {
			t.Fatalf("port %d: in the ephemeral range (from %d) or given twice", port, low)
		}
		seen[port] = true
	}
	for port := range seen {
		addr := fmt.Sprintf("127.0.0.1:%d", port)
		l, err := net.Listen("tcp", addr)
		if err != nil {
			t.Fatalf("TCP %s: %v", addr, err)
		}
		u, err := net.ListenPacket("udp", addr)
		if err != nil {
			t.Fatalf("UDP %s: %v", addr, err)
		}
		l.Close()
		u.Close()
		break
	}
}
