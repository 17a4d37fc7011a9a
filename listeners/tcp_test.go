package listeners

import (
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/miekg/dns"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/shardns/shardns/internal/testutil"
	"github.com/shardns/shardns/query"
)

// BenchmarkServeTCP is a query and its answer on one open TCP connection
// through a listener actor: the fast path of a client that keeps its
// connection. The client reuses its buffers, so the allocations counted
// are the server's.
func BenchmarkServeTCP(b *testing.B) {
	addr := startListener(b, 16, time.Minute)
	c, err := net.Dial("tcp", addr)
	if err != nil {
		b.Fatal(err)
	}
	defer c.Close()
	benchStream(b, c, 1)
}

// startTCPListener serves the test zone on a loopback port through a
// listener started in place, so that a test can see its gates.
func startTCPListener(t *testing.T, cfg Config) *listener {
	t.Helper()
	s, err := Bind("127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	var handler atomic.Pointer[query.Handler]
	handler.Store(testHandler())
	cfg.Handler = &handler
	cfg.Logger = slog.New(slog.NewTextHandler(io.Discard, nil))
	l := &listener{cfg: cfg, sockets: s}
	l.start()
	t.Cleanup(l.stop)
	return l
}

// trickleMessage opens a connection that declares a message of 65,535
// bytes and sends 100 of them.
func trickleMessage(t *testing.T, addr string) net.Conn {
	t.Helper()
	c, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	if _, err := c.Write(append([]byte{0xff, 0xff}, make([]byte, 100)...)); err != nil {
		t.Fatal(err)
	}
	return c
}

// closedByServer waits for the server to close c: EOF, or a reset when
// the server closed with the message unread.
func closedByServer(t *testing.T, c net.Conn, what string) {
	t.Helper()
	c.SetReadDeadline(time.Now().Add(5 * time.Second))
	_, err := c.Read(make([]byte, 1))
	if err != io.EOF && !errors.Is(err, syscall.ECONNRESET) {
		t.Fatalf("%s: read %v, want EOF or a reset: the server should have closed it", what, err)
	}
}

// Messages over 512 bytes held at once are bounded: a third that starts
// to arrive closes the connection of the one arriving the longest, and a
// large query that arrives whole is answered, as are small ones, the
// trickling messages costing what they sent.
func TestTCPLargeMessagesBounded(t *testing.T) {
	evicted := prometheus.NewCounter(prometheus.CounterOpts{Name: "evicted"})
	l := startTCPListener(t, Config{MaxConnections: 16, IdleTimeout: 5 * time.Second, MaxLargeMessages: 2,
		LargeEvicted: evicted})
	addr := l.sockets.Addr()
	inUse := func(n int) func() error {
		return func() error {
			if got := l.large.inUse(); got != n {
				return fmt.Errorf("%d large messages held, want %d", got, n)
			}
			return nil
		}
	}
	a := trickleMessage(t, addr)
	testutil.Eventually(t, 5*time.Second, inUse(1))
	b := trickleMessage(t, addr)
	testutil.Eventually(t, 5*time.Second, inUse(2))
	trickleMessage(t, addr)
	closedByServer(t, a, "the oldest trickling message")

	m := new(dns.Msg)
	m.SetQuestion("web.ns.svc.cluster.local.", dns.TypeA)
	m.SetEdns0(4096, false)
	m.IsEdns0().Option = append(m.IsEdns0().Option, &dns.EDNS0_PADDING{Padding: make([]byte, 700)})
	r, err := testutil.ExchangeMsg(addr, "tcp", m)
	if err != nil || len(r.Answer) != 1 {
		t.Fatalf("a large query arriving whole: %v %v", r, err)
	}
	closedByServer(t, b, "the next oldest, displaced by the large query")
	expectWeb(t, addr, "tcp")
	if got := counterValue(t, evicted); got != 2 {
		t.Fatalf("%v connections counted as closed for a buffer, want 2", got)
	}
}

// With every place for large messages being answered, a new large
// message is dropped and counted, and its connection closed.
func TestTCPLargeMessageDroppedWhenAllAnswering(t *testing.T) {
	dropped := prometheus.NewCounter(prometheus.CounterOpts{Name: "dropped"})
	l := startTCPListener(t, Config{MaxConnections: 16, IdleTimeout: 5 * time.Second, MaxLargeMessages: 1,
		LargeDropped: dropped})
	answering := l.large.enter(func() { t.Error("a message being answered was cut") })
	l.large.arrived(answering)
	closedByServer(t, trickleMessage(t, l.sockets.Addr()), "a large message with no place")
	if got := counterValue(t, dropped); got != 1 {
		t.Fatalf("dropped counted %v, want 1", got)
	}
	l.large.leave(answering)
	expectWeb(t, l.sockets.Addr(), "tcp")
}

// Connection workers are bounded: after a burst of more concurrent
// connections than may wait idle, every question was answered and
// maxIdleConnWorkers workers wait; connections one after another are
// answered and leave no more waiting; stopping the listener ends them
// all.
func TestTCPConnWorkersBounded(t *testing.T) {
	l := startTCPListener(t, Config{MaxConnections: 4 * maxIdleConnWorkers, IdleTimeout: 5 * time.Second})
	addr := l.sockets.Addr()
	burst := 2 * maxIdleConnWorkers
	conns := make([]*dns.Conn, burst)
	for i := range conns {
		c, err := dns.Dial("tcp", addr)
		if err != nil {
			t.Fatal(err)
		}
		conns[i] = c
	}
	for i, c := range conns {
		m := new(dns.Msg).SetQuestion("web.ns.svc.cluster.local.", dns.TypeA)
		c.SetDeadline(time.Now().Add(5 * time.Second))
		if err := c.WriteMsg(m); err != nil {
			t.Fatal(err)
		}
		r, err := c.ReadMsg()
		if err != nil || r.Rcode != dns.RcodeSuccess || len(r.Answer) != 1 {
			t.Fatalf("connection %d: %v %v", i, r, err)
		}
	}
	for _, c := range conns {
		c.Close()
	}
	testutil.Eventually(t, 5*time.Second, func() error {
		if n := l.idleWorkers.Load(); n != maxIdleConnWorkers {
			return fmt.Errorf("%d workers wait, want %d of the %d", n, maxIdleConnWorkers, burst)
		}
		return nil
	})
	for range 3 * maxIdleConnWorkers {
		expectWeb(t, addr, "tcp")
	}
	if n := l.idleWorkers.Load(); n > maxIdleConnWorkers {
		t.Fatalf("%d workers wait after sequential connections, want at most %d", n, maxIdleConnWorkers)
	}
	stopped := make(chan struct{})
	go func() { l.stop(); close(stopped) }()
	select {
	case <-stopped:
	case <-time.After(10 * time.Second):
		t.Fatal("stop did not return: idle connection workers kept it waiting")
	}
	if n := l.idleWorkers.Load(); n != 0 {
		t.Fatalf("%d workers still wait after stop", n)
	}
}
