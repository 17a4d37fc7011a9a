package listeners

import (
	"errors"
	"fmt"
	"net"
	"net/netip"
	"os"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/miekg/dns"
	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"
)

// fakeClock is a clock the test moves by hand; safe for the UDP readers.
type fakeClock struct{ ns atomic.Int64 }

func (c *fakeClock) now() time.Time          { return time.Unix(0, c.ns.Load()) }
func (c *fakeClock) advance(d time.Duration) { c.ns.Add(int64(d)) }

func newTestLimiter(perSecond, burst int) (*RateLimiter, *fakeClock) {
	clock := &fakeClock{}
	clock.ns.Store(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC).UnixNano())
	l := NewRateLimiter(clock.now)
	l.Configure(perSecond, burst)
	return l, clock
}

// allowed counts how many of n queries from addr pass now.
func allowed(l *RateLimiter, addr string, n int) int {
	a := netip.MustParseAddr(addr)
	passed := 0
	for range n {
		if l.Allow(a) {
			passed++
		}
	}
	return passed
}

func TestRateLimitBucket(t *testing.T) {
	l, clock := newTestLimiter(10, 5)
	if got := allowed(l, "10.0.0.1", 20); got != 5 {
		t.Fatalf("a burst from a new client: %d of 20 passed, want the burst of 5", got)
	}
	clock.advance(100 * time.Millisecond) // one interval at 10/s
	if got := allowed(l, "10.0.0.1", 20); got != 1 {
		t.Fatalf("after 100ms: %d passed, want 1", got)
	}
	clock.advance(99 * time.Millisecond)
	if got := allowed(l, "10.0.0.1", 1); got != 0 {
		t.Fatalf("after 99ms more: %d passed, want 0 (the next token is 1ms away)", got)
	}
	clock.advance(time.Millisecond)
	if got := allowed(l, "10.0.0.1", 1); got != 1 {
		t.Fatalf("after 100ms: %d passed, want 1", got)
	}
	clock.advance(10 * time.Second) // idle: the bucket fills up to the burst, no further
	if got := allowed(l, "10.0.0.1", 20); got != 5 {
		t.Fatalf("after a long pause: %d passed, want the burst of 5", got)
	}
	if got := allowed(l, "10.0.0.2", 20); got != 5 {
		t.Fatalf("another client: %d passed, want its own burst of 5", got)
	}
}

// A steady client at the rate is never limited; dropped queries do not
// count against it.
func TestRateLimitSteadyClient(t *testing.T) {
	l, clock := newTestLimiter(100, 1)
	for i := range 1000 {
		if got := allowed(l, "fd00::1", 3); got != 1 {
			t.Fatalf("interval %d: %d of 3 passed, want 1", i, got)
		}
		clock.advance(10 * time.Millisecond)
	}
}

func TestRateLimitBurstDefaultsToRate(t *testing.T) {
	l, _ := newTestLimiter(7, 0)
	if got := allowed(l, "10.0.0.1", 20); got != 7 {
		t.Fatalf("burst 0: %d passed, want perSecond (7)", got)
	}
}

// An IPv4 client is one client whether the socket shows it as IPv4 or as
// an IPv4-mapped IPv6 address.
func TestRateLimitMappedIPv4(t *testing.T) {
	l, _ := newTestLimiter(1, 2)
	if got := allowed(l, "10.0.0.1", 1) + allowed(l, "::ffff:10.0.0.1", 5); got != 2 {
		t.Fatalf("%d passed, want 2 for one client under two spellings", got)
	}
}

func TestRateLimitOffAndReconfigured(t *testing.T) {
	var none *RateLimiter
	if got := allowed(none, "10.0.0.1", 100); got != 100 {
		t.Fatalf("nil limiter: %d of 100 passed", got)
	}
	l, _ := newTestLimiter(0, 0)
	if got := allowed(l, "10.0.0.1", 100); got != 100 {
		t.Fatalf("perSecond 0: %d of 100 passed", got)
	}
	l.Configure(1, 3)
	if got := allowed(l, "10.0.0.1", 10); got != 3 {
		t.Fatalf("turned on: %d passed, want 3", got)
	}
	l.Configure(1, 3) // unchanged: the client keeps its state
	if got := allowed(l, "10.0.0.1", 10); got != 0 {
		t.Fatalf("same configuration again: %d passed, want 0", got)
	}
	l.Configure(1, 6) // a larger burst applies to the state kept
	if got := allowed(l, "10.0.0.1", 10); got != 3 {
		t.Fatalf("burst raised to 6: %d passed, want 3", got)
	}
	l.Configure(0, 0)
	if got := allowed(l, "10.0.0.1", 10); got != 10 {
		t.Fatalf("turned off: %d of 10 passed", got)
	}
}

// A flood from more addresses than the table holds keeps memory fixed, and
// a client being limited keeps its entry through it: spoofing new sources
// does not reset a limited client's bucket.
func TestRateLimitTableIsBounded(t *testing.T) {
	l, clock := newTestLimiter(1, 2)
	flooder := netip.MustParseAddr("192.0.2.1")
	for range 10 {
		l.Allow(flooder)
	}
	for i := range 4 * rateLimitSets * rateLimitWays {
		clock.advance(time.Microsecond)
		var b [16]byte
		b[0], b[1] = 0xfd, 0x00
		b[12], b[13], b[14], b[15] = byte(i>>24), byte(i>>16), byte(i>>8), byte(i)
		if !l.Allow(netip.AddrFrom16(b)) {
			t.Fatalf("spoofed source %d was limited on its first query", i)
		}
	}
	if l.Allow(flooder) {
		t.Fatal("the flooding client passed again after a spoofed flood evicted it")
	}
}

func TestRateLimitConcurrentReaders(t *testing.T) {
	l, _ := newTestLimiter(1, 100)
	var wg sync.WaitGroup
	var passed atomic.Int64
	for range 8 {
		wg.Go(func() { passed.Add(int64(allowed(l, "10.0.0.9", 100))) })
	}
	wg.Wait()
	if passed.Load() != 100 {
		t.Fatalf("8 readers × 100 queries from one client: %d passed, want the burst of 100", passed.Load())
	}
}

// Over a real socket, a client flooding past its burst is dropped and
// counted while another client is still answered. Both send from their
// own loopback address.
func TestRateLimitOverUDP(t *testing.T) {
	const burst, flood = 5, 40
	limiter, clock := newTestLimiter(1, burst)
	dropped := prometheus.NewCounter(prometheus.CounterOpts{Name: "dropped"})
	// One reader answers in arrival order, so once the other client has
	// its answer every flood datagram has been handled.
	addr := startListenerWith(t, Config{MaxConnections: 4, IdleTimeout: time.Second, UDPReaders: 1,
		RateLimit: limiter, RateLimited: dropped})
	flooder := clientSocket(t, "127.0.0.2")
	other := clientSocket(t, "127.0.0.3")
	server := net.UDPAddrFromAddrPort(netip.MustParseAddrPort(addr))

	query := packedQuery(t)
	for range flood {
		if _, err := flooder.WriteTo(query, server); err != nil {
			t.Fatal(err)
		}
	}
	if err := exchangeFrom(other, server, query); err != nil {
		t.Fatalf("the other client: %v", err)
	}
	if got := queuedAnswers(t, flooder); got != burst {
		t.Fatalf("the flooding client got %d answers to %d queries, want its burst of %d", got, flood, burst)
	}
	var m dto.Metric
	if err := dropped.Write(&m); err != nil {
		t.Fatal(err)
	}
	if got := m.GetCounter().GetValue(); got != flood-burst {
		t.Fatalf("dropped counter %v, want %d", got, flood-burst)
	}

	clock.advance(time.Second) // one token back
	if err := exchangeFrom(flooder, server, query); err != nil {
		t.Fatalf("the flooding client a second later: %v", err)
	}
}

func clientSocket(t *testing.T, ip string) *net.UDPConn {
	t.Helper()
	c, err := net.ListenUDP("udp", &net.UDPAddr{IP: net.ParseIP(ip)})
	if err != nil {
		t.Skipf("binding %s: %v", ip, err)
	}
	t.Cleanup(func() { c.Close() })
	return c
}

func packedQuery(t testing.TB) []byte {
	m := new(dns.Msg)
	m.SetQuestion("web.ns.svc.cluster.local.", dns.TypeA)
	b, err := m.Pack()
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// exchangeFrom sends query from c and waits for an answer with records.
func exchangeFrom(c *net.UDPConn, server *net.UDPAddr, query []byte) error {
	if _, err := c.WriteTo(query, server); err != nil {
		return err
	}
	c.SetReadDeadline(time.Now().Add(5 * time.Second))
	buf := make([]byte, 512)
	n, err := c.Read(buf)
	if err != nil {
		return err
	}
	r := new(dns.Msg)
	if err := r.Unpack(buf[:n]); err != nil {
		return err
	}
	if r.Rcode != dns.RcodeSuccess || len(r.Answer) != 1 {
		return fmt.Errorf("answer %v", r)
	}
	return nil
}

// queuedAnswers reads every datagram already waiting on c. (A deadline
// of now would fail before reading: Go checks it first.)
func queuedAnswers(t *testing.T, c *net.UDPConn) int {
	t.Helper()
	buf := make([]byte, 512)
	for n := 0; ; n++ {
		c.SetReadDeadline(time.Now().Add(100 * time.Millisecond))
		if _, err := c.Read(buf); err != nil {
			if !errors.Is(err, os.ErrDeadlineExceeded) {
				t.Fatal(err)
			}
			return n
		}
	}
}

// BenchmarkRateLimitAllow is the cost the limit adds to each datagram, with
// readers on every core and clients spread over the table.
func BenchmarkRateLimitAllow(b *testing.B) {
	l := NewRateLimiter(time.Now)
	l.Configure(1000, 1000)
	var next atomic.Uint32
	b.ReportAllocs()
	b.RunParallel(func(pb *testing.PB) {
		base := next.Add(1) << 16
		i := uint32(0)
		for pb.Next() {
			i++
			n := base | i&0x3ff
			l.Allow(netip.AddrFrom4([4]byte{10, byte(n >> 16), byte(n >> 8), byte(n)}))
		}
	})
}

// BenchmarkServeUDPRateLimited is BenchmarkServeUDP with the limit on (and
// never reached): the UDP path stays free of allocations.
func BenchmarkServeUDPRateLimited(b *testing.B) {
	l := NewRateLimiter(time.Now)
	l.Configure(1<<30, 1<<30)
	addr := startListenerWith(b, Config{MaxConnections: 4, IdleTimeout: time.Second, RateLimit: l,
		RateLimited: prometheus.NewCounter(prometheus.CounterOpts{Name: "dropped"})})
	benchUDPExchanges(b, addr)
}

// benchUDPExchanges asks addr one query after another over UDP, each
// waiting for its answer, for the benchmark's loop.
func benchUDPExchanges(b *testing.B, addr string) {
	conn, err := net.Dial("udp", addr)
	if err != nil {
		b.Fatal(err)
	}
	defer conn.Close()
	req, buf := packedQuery(b), make([]byte, 512)
	b.ReportAllocs()
	for b.Loop() {
		if _, err := conn.Write(req); err != nil {
			b.Fatal(err)
		}
		if _, err := conn.Read(buf); err != nil {
			b.Fatal(err)
		}
	}
}
