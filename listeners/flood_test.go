package listeners

import (
	"bytes"
	"crypto/tls"
	"crypto/x509"
	"fmt"
	"math/rand/v2"
	"net"
	"net/http"
	"net/netip"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/miekg/dns"
	"github.com/prometheus/client_golang/prometheus"
)

// Floods over real loopback sockets, at a size that fits a shared CI
// machine. Every 127.x.y.z is a source address of its own on Linux, so
// the flooding and the legitimate clients are different prefixes.

// legitimateClient asks for web.ns.svc.cluster.local about once a
// millisecond from its own address until stop closes or n queries are
// asked, and returns how many were asked and answered right. Like a stub
// resolver it waits a second for an answer and asks up to twice more.
func legitimateClient(t *testing.T, ip string, server *net.UDPAddr, n int, stop <-chan struct{}) (asked, right int) {
	c := clientSocket(t, ip)
	query := packedQuery(t)
	tick := time.NewTicker(time.Millisecond)
	defer tick.Stop()
	for asked = 0; asked < n; asked++ {
		select {
		case <-stop:
			return asked, right
		case <-tick.C:
		}
		for try := 0; try < 3; try++ {
			if exchangeFromWithin(c, server, query, time.Second) == nil {
				right++
				break
			}
		}
	}
	return asked, right
}

// exchangeFromWithin is exchangeFrom waiting at most wait, and skipping
// answers to earlier queries that came late.
func exchangeFromWithin(c *net.UDPConn, server *net.UDPAddr, query []byte, wait time.Duration) error {
	id := uint16(rand.Uint32())
	query[0], query[1] = byte(id>>8), byte(id)
	if _, err := c.WriteTo(query, server); err != nil {
		return err
	}
	c.SetReadDeadline(time.Now().Add(wait))
	buf := make([]byte, 512)
	for {
		n, err := c.Read(buf)
		if err != nil {
			return err
		}
		r := new(dns.Msg)
		if r.Unpack(buf[:n]) != nil || r.Id != id {
			continue
		}
		if r.Rcode != dns.RcodeSuccess || len(r.Answer) != 1 || r.Answer[0].(*dns.A).A.String() != "10.0.0.1" {
			return fmt.Errorf("answer %v", r)
		}
		return nil
	}
}

// One source sends random names under the cluster zone as fast as it
// can (the water torture flood) while another client asks at about 1,000
// a second: at least 99.9 % of the other client's queries are answered
// right, and RRL sends the flooding prefix no more full NXDOMAIN answers
// than its allowance (the clock is held, so the allowance is one
// second's worth).
func TestWaterTortureLeavesOtherClientsAnswered(t *testing.T) {
	const allowance, legitimate = 100, 1000
	var rates [NumRRLClasses]int
	rates[RRLNXDomain] = allowance
	rrl, _ := newTestRRL(RRLConfig{PerSecond: rates, Slip: 2})
	counters := rrlTestCounters()
	limiter := NewRateLimiter(time.Now)
	limiter.Configure(2000, 2000)
	addr := startListenerWith(t, Config{MaxConnections: 4, IdleTimeout: time.Second, RRL: rrl, RRLCounters: counters,
		RateLimit: limiter})
	server := net.UDPAddrFromAddrPort(netip.MustParseAddrPort(addr))
	flooder := clientSocket(t, "127.0.10.1")

	stop := make(chan struct{})
	var sent atomic.Int64
	var full, slips atomic.Int64
	var wg sync.WaitGroup
	wg.Go(func() { floodRandomNames(flooder, server, stop, &sent) })
	wg.Go(func() { countAnswers(flooder, stop, &full, &slips) })
	start := time.Now()
	asked, right := legitimateClient(t, "127.0.20.1", server, legitimate, nil)
	elapsed := time.Since(start)
	close(stop)
	wg.Wait()

	t.Logf("flood: %d queries in %v (%.0f/s); legitimate: %d of %d right; flooder got %d full answers, %d slipped",
		sent.Load(), elapsed, float64(sent.Load())/elapsed.Seconds(), right, asked, full.Load(), slips.Load())
	if right*1000 < asked*999 {
		t.Errorf("legitimate client: %d of %d answered right, want at least 99.9%%", right, asked)
	}
	if full.Load() > allowance {
		t.Errorf("the flooding prefix got %d full NXDOMAIN answers, want at most its allowance of %d", full.Load(), allowance)
	}
	if sent.Load() > 2*allowance && counterValue(t, counters[RRLNXDomain][RRLDrop]) == 0 {
		t.Errorf("no NXDOMAIN answer counted as dropped after %d flood queries", sent.Load())
	}
}

// floodRandomNames sends queries for random names under ns.svc.cluster.local
// from c until stop closes.
func floodRandomNames(c *net.UDPConn, server *net.UDPAddr, stop <-chan struct{}, sent *atomic.Int64) {
	m := new(dns.Msg)
	for {
		select {
		case <-stop:
			return
		default:
		}
		m.SetQuestion(fmt.Sprintf("%x.ns.svc.cluster.local.", rand.Uint64()), dns.TypeA)
		b, _ := m.Pack()
		if _, err := c.WriteTo(b, server); err == nil {
			sent.Add(1)
		}
	}
}

// countAnswers reads answers on c until stop closes, counting the full
// ones and the slipped ones (TC, no records).
func countAnswers(c *net.UDPConn, stop <-chan struct{}, full, slips *atomic.Int64) (bytes int64) {
	buf := make([]byte, 4096)
	for {
		select {
		case <-stop:
			return bytes
		default:
		}
		c.SetReadDeadline(time.Now().Add(50 * time.Millisecond))
		n, err := c.Read(buf)
		if err != nil {
			continue
		}
		bytes += int64(n)
		r := new(dns.Msg)
		if r.Unpack(buf[:n]) != nil {
			continue
		}
		if r.Truncated && len(r.Answer)+len(r.Ns) == 0 {
			slips.Add(1)
		} else {
			full.Add(1)
		}
	}
}

func rrlTestCounters() *RRLCounters {
	var c RRLCounters
	for class := range NumRRLClasses {
		for action := RRLSlip; action < NumRRLActions; action++ {
			c[class][action] = prometheus.NewCounter(prometheus.CounterOpts{Name: "rrl"})
		}
	}
	return &c
}

// ANY queries from 32 sources in 8 prefixes, whose answers are far
// larger than the queries (the amplification a spoofed flood wants):
// with RRL on, the bytes sent back to the flooding prefixes stay within
// the bytes they sent, every limited answer that goes out is an empty
// truncated one, and a client of another prefix is answered in full.
func TestANYFloodAmplificationIsBounded(t *testing.T) {
	const perSource = 200
	var rates [NumRRLClasses]int
	for c := range rates {
		rates[c] = 5
	}
	rrl, _ := newTestRRL(RRLConfig{PerSecond: rates, Slip: 2})
	addr := startListenerWith(t, Config{MaxConnections: 4, IdleTimeout: time.Second, UDPReaders: 1, RRL: rrl})
	server := net.UDPAddrFromAddrPort(netip.MustParseAddrPort(addr))
	m := new(dns.Msg)
	m.SetQuestion("web.ns.svc.cluster.local.", dns.TypeANY)
	query, _ := m.Pack()

	var in, out, full, slips atomic.Int64
	var wg sync.WaitGroup
	for p := range 8 {
		for s := range 4 {
			c := clientSocket(t, fmt.Sprintf("127.0.%d.%d", 100+p, 1+s))
			stop := make(chan struct{})
			var got int64
			wg.Go(func() { got = countAnswers(c, stop, &full, &slips) })
			for range perSource {
				if n, err := c.WriteTo(query, server); err == nil {
					in.Add(int64(n))
				}
			}
			// The other client's answer comes after every flood datagram:
			// one reader answers in arrival order.
			if err := exchangeFromWithin(clientSocket(t, fmt.Sprintf("127.0.%d.1", 200+p*4+s)), server, packedQuery(t), 5*time.Second); err != nil {
				t.Fatalf("the other client: %v", err)
			}
			close(stop)
			wg.Wait()
			out.Add(got)
		}
	}
	t.Logf("flooding prefixes sent %d bytes, got %d back (%.2fx); %d full answers, %d slipped",
		in.Load(), out.Load(), float64(out.Load())/float64(in.Load()), full.Load(), slips.Load())
	if out.Load() > in.Load() {
		t.Errorf("amplification: %d bytes out for %d in", out.Load(), in.Load())
	}
	if full.Load() > 8*5 {
		t.Errorf("%d full answers to 8 prefixes of an allowance of 5", full.Load())
	}
	if slips.Load() == 0 {
		t.Error("no limited answer slipped")
	}
}

// Thousands of idle TCP connections and some idle DNS over TLS and HTTPS
// ones, from a few sources, lock out neither UDP clients nor a new TCP,
// TLS or HTTPS client: the listeners close the idlest to let it in.
func TestIdleConnectionsDoNotLockOutNewClients(t *testing.T) {
	const idle, sources = 5000, 8
	evicted := prometheus.NewCounter(prometheus.CounterOpts{Name: "evicted"})
	evictedSource := prometheus.NewCounter(prometheus.CounterOpts{Name: "source"})
	cfg := Config{MaxConnections: 1024, MaxConnectionsPerSource: 100, IdleTimeout: time.Minute,
		Evicted: evicted, EvictedSource: evictedSource}
	addr := startListenerWith(t, cfg)
	dot, pool := tlsListenerConfig(t, "tls", Config{MaxConnections: 64, MaxConnectionsPerSource: 16, IdleTimeout: time.Minute})
	doh, dohPool := tlsListenerConfig(t, "https", Config{MaxConnections: 64, MaxConnectionsPerSource: 16, IdleTimeout: time.Minute})

	held := make([]net.Conn, 0, idle+200)
	t.Cleanup(func() {
		for _, c := range held {
			c.Close()
		}
	})
	dial := func(target string, i int) net.Conn {
		d := net.Dialer{LocalAddr: &net.TCPAddr{IP: net.IPv4(127, 0, 50, byte(1+i%sources))}, Timeout: 5 * time.Second}
		c, err := d.Dial("tcp", target)
		if err != nil {
			t.Fatalf("idle connection %d: %v", i, err)
		}
		held = append(held, c)
		return c
	}
	for i := range idle {
		dial(addr, i)
	}
	for i := range 100 { // idle TLS sessions: the handshake done, then silence
		for target, pool := range map[string]*x509.CertPool{dot: pool, doh: dohPool} {
			c := tls.Client(dial(target, i), &tls.Config{RootCAs: pool, ServerName: "localhost"})
			if err := c.Handshake(); err != nil && target == dot {
				t.Fatalf("idle TLS connection %d: %v", i, err) // over the bounds, the HTTPS one may be closed first
			}
		}
	}

	expectWeb(t, addr, "udp")
	expectWeb(t, addr, "tcp")
	conn, err := tls.Dial("tcp", dot, &tls.Config{RootCAs: pool, ServerName: "localhost", NextProtos: []string{"dot"}})
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	dc := &dns.Conn{Conn: conn}
	m := new(dns.Msg)
	m.SetQuestion("web.ns.svc.cluster.local.", dns.TypeA)
	if err := dc.WriteMsg(m); err != nil {
		t.Fatal(err)
	}
	if r, err := dc.ReadMsg(); err != nil || len(r.Answer) != 1 {
		t.Fatalf("new DNS over TLS client: %v %v", r, err)
	}
	resp, err := dohClient(dohPool).Post("https://"+doh+"/dns-query", dohMediaType, bytesReader(dohPacked(t, "web.ns.svc.cluster.local.", dns.TypeA)))
	if err != nil || resp.StatusCode != http.StatusOK {
		t.Fatalf("new DNS over HTTPS client: %v %v", resp, err)
	}
	resp.Body.Close()
	// Each source was held to its bound: all but 8 × 100 were closed.
	if got := counterValue(t, evictedSource); got < idle-sources*100 {
		t.Errorf("%v connections closed for their source's bound, want at least %d", got, idle-sources*100)
	}
}

func bytesReader(b []byte) *bytes.Reader { return bytes.NewReader(b) }
