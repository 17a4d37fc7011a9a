package testutil

import (
	"errors"
	"fmt"
	"math/rand/v2"
	"net"
	"os"
	"sync"
)

// FreePort returns a loopback port that was free for both TCP and UDP a
// moment ago, for a server the test starts later in another process.
//
// A port the kernel picks (binding port 0) lies in its ephemeral range,
// where every outgoing connection of the machine also takes its source
// port: one may take it before the server binds it ("address already in
// use", seen in CI). So the port is drawn from below that range, where
// the kernel gives no port out by itself, and never twice in one test
// binary.
func FreePort() (int, error) {
	low, _ := ephemeralRange()
	const first = 10000
	if low-first < 1000 {
		return 0, fmt.Errorf("the ephemeral range starts at %d: no room below it", low)
	}
	for range 200 {
		port := first + rand.IntN(low-first)
		if !claim(port) {
			continue
		}
		if portFree(port) {
			return port, nil
		}
	}
	return 0, errors.New("no loopback port below the ephemeral range is free for both TCP and UDP")
}

// handedOut are the ports FreePort returned in this process.
var handedOut sync.Map

func claim(port int) bool {
	_, taken := handedOut.LoadOrStore(port, true)
	return !taken
}

func portFree(port int) bool {
	addr := fmt.Sprintf("127.0.0.1:%d", port)
	l, err := net.Listen("tcp", addr)
	if err != nil {
		return false
	}
	defer l.Close()
	u, err := net.ListenPacket("udp", addr)
	if err != nil {
		return false
	}
	return u.Close() == nil
}

// ephemeralRange reads the kernel's range of source ports; Linux's
// default when it cannot.
func ephemeralRange() (low, high int) {
	low, high = 32768, 60999
	if b, err := os.ReadFile("/proc/sys/net/ipv4/ip_local_port_range"); err == nil {
		var l, h int
		if n, _ := fmt.Sscan(string(b), &l, &h); n == 2 && l > 0 && h >= l {
			low, high = l, h
		}
	}
	return low, high
}
