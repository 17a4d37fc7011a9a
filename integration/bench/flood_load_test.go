package bench

import (
	"cmp"
	"context"
	"fmt"
	"math/rand/v2"
	"net"
	"net/netip"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/miekg/dns"
)

// The flood generators and the legitimate client of the flood tests.
// Every 127.x.y.z is a source address of its own on Linux, so flooding
// and legitimate clients are different addresses and /24 prefixes, as
// RRL and the per-client rate limit count them.

// floodStats counts what one flood sent and what came back to its
// sources, read from the answers' headers only, so that counting costs
// the test process little beside the flood.
type floodStats struct {
	sent, bytesIn     atomic.Int64 // queries sent and their bytes
	answers, bytesOut atomic.Int64 // answers received and their bytes
	slipped           atomic.Int64 // limited answers sent empty with TC
	bare              atomic.Int64 // answers with no records and no TC: a limited answer without its TC
}

func (s *floodStats) String() string {
	return fmt.Sprintf("%d queries (%d bytes), %d answers (%d bytes, %.2f× the bytes in), %d slipped with TC",
		s.sent.Load(), s.bytesIn.Load(), s.answers.Load(), s.bytesOut.Load(),
		float64(s.bytesOut.Load())/float64(max(s.bytesIn.Load(), 1)), s.slipped.Load())
}

// udpFrom is a UDP socket bound to the loopback address ip, closed at
// test end.
func udpFrom(t testing.TB, ip string) *net.UDPConn {
	t.Helper()
	c, err := net.ListenUDP("udp", &net.UDPAddr{IP: net.ParseIP(ip)})
	if err != nil {
		t.Fatal(err)
	}
	c.SetReadBuffer(4 << 20)
	t.Cleanup(func() { c.Close() })
	return c
}

// readAnswers counts the answers arriving on c until ctx ends. A
// header with TC and no answer or authority records is a slipped
// answer; one without TC and without records is counted as bare (the
// flood tests' answers always carry records: an NXDOMAIN its SOA).
func readAnswers(ctx context.Context, c *net.UDPConn, st *floodStats) {
	buf := make([]byte, 65535)
	for ctx.Err() == nil {
		c.SetReadDeadline(time.Now().Add(100 * time.Millisecond))
		n, err := c.Read(buf)
		if err != nil || n < 12 {
			continue
		}
		st.answers.Add(1)
		st.bytesOut.Add(int64(n))
		records := int(buf[6])<<8 | int(buf[7]) + int(buf[8])<<8 | int(buf[9])
		switch tc := buf[2]&0x02 != 0; {
		case tc && records == 0:
			st.slipped.Add(1)
		case records == 0:
			st.bare.Add(1)
		}
	}
}

// paced calls send(n) about every millisecond with the number of
// queries due at rate per second since the start, until ctx ends; a
// generator that falls behind catches up by at most 10 ms of queries.
func paced(ctx context.Context, rate int, send func(n int)) {
	tick := time.NewTicker(time.Millisecond)
	defer tick.Stop()
	start, done := time.Now(), 0
	for {
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
		}
		due := int(time.Since(start).Seconds() * float64(rate))
		n := min(due-done, max(rate/100, 1))
		send(n)
		done = max(done+n, due-rate/100)
	}
}

// waterTorture sends rate queries a second for random names under
// zone from the address ip (the water torture flood) until ctx ends.
func waterTorture(ctx context.Context, t testing.TB, ip, server, zone string, rate int, st *floodStats) *sync.WaitGroup {
	c := udpFrom(t, ip)
	to := net.UDPAddrFromAddrPort(mustAddrPort(t, server))
	m := new(dns.Msg)
	m.SetQuestion("0000000000000000."+zone, dns.TypeA)
	query, err := m.Pack()
	if err != nil {
		t.Fatal(err)
	}
	const hex = "0123456789abcdef"
	var wg sync.WaitGroup
	wg.Go(func() { readAnswers(ctx, c, st) })
	wg.Go(func() {
		paced(ctx, rate, func(n int) {
			for range n {
				r := rand.Uint64()
				query[0], query[1] = byte(r), byte(r>>8)
				for i := range 16 { // the first label, after the header and its length byte
					query[13+i] = hex[(r>>(4*i))&15]
				}
				if _, err := c.WriteToUDP(query, to); err == nil {
					st.sent.Add(1)
					st.bytesIn.Add(int64(len(query)))
				}
			}
		})
	})
	return &wg
}

// amplifiers are the questions of the ANY flood: ANY, and SRV of a
// headless Service whose answer holds its endpoints' records, both with
// a 4096-byte EDNS0 buffer, as an amplification flood asks them.
var amplifiers = []struct {
	name  string
	qtype uint16
}{
	{"redis.data.svc.cluster.local.", dns.TypeANY},
	{"_pg._tcp.postgres.data.svc.cluster.local.", dns.TypeSRV},
}

// anyFlood sends rate queries a second, spread over sources addresses
// in prefixes /24 prefixes (127.0.100.1 on), as a flood with spoofed
// sources would arrive, until ctx ends. The sockets stand for the
// spoofed victims: what they receive is what the server would send
// them.
func anyFlood(ctx context.Context, t testing.TB, server string, prefixes, sources, rate int, st *floodStats) *sync.WaitGroup {
	to := net.UDPAddrFromAddrPort(mustAddrPort(t, server))
	var queries [][]byte
	for _, a := range amplifiers {
		m := new(dns.Msg)
		m.SetQuestion(a.name, a.qtype)
		m.SetEdns0(4096, false)
		q, err := m.Pack()
		if err != nil {
			t.Fatal(err)
		}
		queries = append(queries, q)
	}
	var wg sync.WaitGroup
	conns := make([]*net.UDPConn, sources)
	for i := range conns {
		conns[i] = udpFrom(t, fmt.Sprintf("127.0.%d.%d", 100+i%prefixes, 1+i/prefixes))
		wg.Go(func() { readAnswers(ctx, conns[i], st) })
	}
	wg.Go(func() {
		i := 0
		paced(ctx, rate, func(n int) {
			for range n {
				q := queries[i%len(queries)]
				r := rand.Uint32()
				q[0], q[1] = byte(r), byte(r>>8)
				if _, err := conns[i%sources].WriteToUDP(q, to); err == nil {
					st.sent.Add(1)
					st.bytesIn.Add(int64(len(q)))
				}
				i++
			}
		})
	})
	return &wg
}

// legitimateNames are what the legitimate client asks, in turn, and the
// address each must answer.
var legitimateNames = []struct{ name, ip string }{
	{"redis.data.svc.cluster.local.", "10.96.20.10"},
	{"kubernetes.default.svc.cluster.local.", "10.96.0.1"},
	{"frontend.shop.svc.cluster.local.", "10.96.10.10"},
	{"cart.shop.svc.cluster.local.", "10.96.10.11"},
}

// legitResult is what the legitimate client saw.
type legitResult struct {
	asked, right, overTCP int
	latencies             []time.Duration // of the right answers, first query to answer
	last                  error
}

func (r legitResult) quantile(q float64) time.Duration {
	if len(r.latencies) == 0 {
		return 0
	}
	s := slices.Clone(r.latencies)
	slices.Sort(s)
	return s[min(int(q*float64(len(s))), len(s)-1)]
}

func (r legitResult) String() string {
	return fmt.Sprintf("%d of %d answered right (%.2f%%), %d over TCP after TC; latency p50 %v p99 %v",
		r.right, r.asked, 100*float64(r.right)/float64(max(r.asked, 1)), r.overTCP,
		r.quantile(0.5).Round(time.Microsecond), r.quantile(0.99).Round(time.Microsecond))
}

// legitimateClient asks each of legitimateNames every 4 ms, about 1,000
// queries a second in all, from ip until ctx ends, as the stub
// resolvers of a pod's processes do: each waits a second for an answer
// and asks up to twice more, and asks again over TCP when the answer is
// truncated.
func legitimateClient(ctx context.Context, t testing.TB, ip, server string) legitResult {
	results := make([]legitResult, len(legitimateNames))
	var wg sync.WaitGroup
	for i, want := range legitimateNames {
		c := udpFrom(t, ip)
		wg.Go(func() { results[i] = stubResolver(ctx, c, server, want.name, want.ip, 4*time.Millisecond) })
	}
	wg.Wait()
	var all legitResult
	for _, r := range results {
		all.asked, all.right, all.overTCP = all.asked+r.asked, all.right+r.right, all.overTCP+r.overTCP
		all.latencies = append(all.latencies, r.latencies...)
		all.last = cmp.Or(all.last, r.last)
	}
	return all
}

// stubResolver asks name on c every interval until ctx ends and checks
// the answer is the address ip.
func stubResolver(ctx context.Context, c *net.UDPConn, server, name, ip string, interval time.Duration) legitResult {
	to := net.UDPAddrFromAddrPort(netip.MustParseAddrPort(server))
	local := c.LocalAddr().(*net.UDPAddr).IP
	tcp := &dns.Client{Net: "tcp", Timeout: time.Second,
		Dialer: &net.Dialer{LocalAddr: &net.TCPAddr{IP: local}, Timeout: time.Second}}
	var res legitResult
	tick := time.NewTicker(interval)
	defer tick.Stop()
	buf := make([]byte, 4096)
	m := new(dns.Msg)
	m.SetQuestion(name, dns.TypeA)
	for ; ; res.asked++ {
		select {
		case <-ctx.Done():
			return res
		case <-tick.C:
		}
		start := time.Now()
		for try := 0; try < 3; try++ {
			r, err := exchangeUDP(c, to, m, buf)
			if err == nil && r.Truncated {
				res.overTCP++
				r, _, err = tcp.Exchange(m, server)
			}
			if err == nil {
				err = isAddress(r, ip)
			}
			if err == nil {
				res.right++
				res.latencies = append(res.latencies, time.Since(start))
				break
			}
			res.last = err
		}
	}
}

// exchangeUDP sends m on c and waits a second for its answer, skipping
// late answers to earlier queries.
func exchangeUDP(c *net.UDPConn, to *net.UDPAddr, m *dns.Msg, buf []byte) (*dns.Msg, error) {
	m.Id = dns.Id()
	q, err := m.Pack()
	if err != nil {
		return nil, err
	}
	if _, err := c.WriteToUDP(q, to); err != nil {
		return nil, err
	}
	c.SetReadDeadline(time.Now().Add(time.Second))
	for {
		n, err := c.Read(buf)
		if err != nil {
			return nil, err
		}
		r := new(dns.Msg)
		if r.Unpack(buf[:n]) == nil && r.Id == m.Id {
			return r, nil
		}
	}
}

func mustAddrPort(t testing.TB, addr string) netip.AddrPort {
	t.Helper()
	ap, err := netip.ParseAddrPort(addr)
	if err != nil {
		t.Fatal(err)
	}
	return ap
}

// isAddress checks that r answers NOERROR with the one A record ip.
func isAddress(r *dns.Msg, ip string) error {
	if r.Rcode != dns.RcodeSuccess || len(r.Answer) != 1 {
		return fmt.Errorf("%s: %s with %d answers", r.Question[0].Name, dns.RcodeToString[r.Rcode], len(r.Answer))
	}
	if a, ok := r.Answer[0].(*dns.A); !ok || a.A.String() != ip {
		return fmt.Errorf("%s: %v, want %s", r.Question[0].Name, r.Answer[0], ip)
	}
	return nil
}
