package listeners

import (
	"io"
	"net"
	"sync"
	"sync/atomic"
	"testing"
)

// The sockets of an address are counted while other sockets of the
// host come and go by the thousand (a DNS client opens one per query):
// the count must see every socket bound at the address each time, the
// caller's own and the other process's, or a survivor takes the address
// back from a process still serving it, or gives up taking it back.
// Read from /proc/net/udp, a count missed one within a few hundred.
func TestAloneUnderSocketChurn(t *testing.T) {
	old, err := BindShared("127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer old.Close()
	survivor, err := BindShared(old.Addr())
	if err != nil {
		t.Fatal(err)
	}
	defer survivor.Close()
	stop := churnSockets()
	defer stop()
	for i := range 2000 {
		if alone, err := survivor.alone(); alone || err != nil {
			t.Fatalf("count %d of the sockets at %s: alone %v, err %v; want another process's sockets seen", i, old.Addr(), alone, err)
		}
	}
	old.Close()
	if alone, err := survivor.alone(); !alone || err != nil {
		t.Fatalf("after the other sockets closed: alone %v, err %v", alone, err)
	}
}

// churnSockets keeps replacing 200 UDP sockets and 200 TCP listeners
// on other ports, the oldest closed as a new one opens, until the
// returned func is called.
func churnSockets() func() {
	var stop atomic.Bool
	var wg sync.WaitGroup
	for range 4 {
		wg.Go(func() {
			var open []io.Closer
			for i := 0; !stop.Load(); i++ {
				if len(open) >= 100 {
					open[0].Close()
					open = open[1:]
				}
				var c io.Closer
				var err error
				if i%2 == 0 {
					c, err = net.ListenPacket("udp", "127.0.0.1:0")
				} else {
					c, err = net.Listen("tcp", "127.0.0.1:0")
				}
				if err == nil {
					open = append(open, c)
				}
			}
			for _, c := range open {
				c.Close()
			}
		})
	}
	return func() { stop.Store(true); wg.Wait() }
}
