package listeners

import (
	"os"
	"strconv"
	"strings"
	"testing"

	"golang.org/x/sys/unix"
)

// The UDP socket asks for a receive buffer that absorbs bursts, as far
// as the system allows; Linux reports twice what it granted.
func TestUDPSocketReceiveBuffer(t *testing.T) {
	raw, err := os.ReadFile("/proc/sys/net/core/rmem_max")
	if err != nil {
		t.Skip(err)
	}
	rmemMax, err := strconv.Atoi(strings.TrimSpace(string(raw)))
	if err != nil {
		t.Fatal(err)
	}
	s, err := Bind("127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	got, err := unix.GetsockoptInt(s.UDP.fd, unix.SOL_SOCKET, unix.SO_RCVBUF)
	if err != nil {
		t.Fatal(err)
	}
	if want := 2 * min(udpReceiveBuffer, rmemMax); got != want {
		t.Fatalf("receive buffer %d bytes, want %d (rmem_max %d)", got, want, rmemMax)
	}
}
