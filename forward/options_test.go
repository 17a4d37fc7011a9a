package forward

import (
	"context"
	"log/slog"
	"net"
	"sync/atomic"
	"testing"
	"time"

	"github.com/miekg/dns"
)

// plainServer is a plain DNS upstream on loopback: over UDP unless
// tcpOnly, and over TCP on the same port. It counts the questions by
// transport and the TCP connections it accepted.
type plainServer struct {
	addr               string
	udpAsked, tcpAsked atomic.Int32
	accepted           atomic.Int32
}

func startPlainServer(t *testing.T, tcpOnly bool, handler dns.HandlerFunc) *plainServer {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	s := &plainServer{addr: l.Addr().String()}
	counted := dns.HandlerFunc(func(w dns.ResponseWriter, r *dns.Msg) {
		if w.RemoteAddr().Network() == "udp" {
			s.udpAsked.Add(1)
		} else {
			s.tcpAsked.Add(1)
		}
		handler(w, r)
	})
	serve := func(srv *dns.Server) {
		started := make(chan struct{})
		srv.NotifyStartedFunc = func() { close(started) }
		srv.Handler = counted
		go func() { _ = srv.ActivateAndServe() }()
		<-started
		t.Cleanup(func() { _ = srv.Shutdown() })
	}
	serve(&dns.Server{Listener: countingListener{l, &s.accepted}, Net: "tcp"})
	if !tcpOnly {
		pc, err := net.ListenPacket("udp", s.addr)
		if err != nil {
			t.Fatal(err)
		}
		serve(&dns.Server{PacketConn: pc, Net: "udp"})
	}
	return s
}

// truncating answers over UDP with TC set and no records, and with the A
// record over TCP.
func truncating(w dns.ResponseWriter, r *dns.Msg) {
	if w.RemoteAddr().Network() == "udp" {
		m := new(dns.Msg)
		m.SetReply(r)
		m.Truncated = true
		_ = w.WriteMsg(m)
		return
	}
	answerA(w, r)
}

// rcodeHandler answers every question with rcode.
func rcodeHandler(rcode int) dns.HandlerFunc {
	return func(w dns.ResponseWriter, r *dns.Msg) {
		m := new(dns.Msg)
		m.SetRcode(r, rcode)
		_ = w.WriteMsg(m)
	}
}

func newPlainForwarder(t *testing.T, mod func(*Config), upstreams ...string) *Forwarder {
	t.Helper()
	cfg := Config{Upstreams: upstreams, Policy: "sequential", Timeout: 2 * time.Second, MaxConcurrent: 100,
		HealthCheck: time.Hour, MaxFails: 100, Logger: slog.New(slog.DiscardHandler), Expire: 10 * time.Second}
	if mod != nil {
		mod(&cfg)
	}
	f := New(cfg)
	t.Cleanup(f.Close)
	return f
}

// askOver asks name as a client over TCP (tcp) or UDP would, and wants
// the A record.
func askOver(t *testing.T, f *Forwarder, name string, tcp bool) {
	t.Helper()
	q := new(dns.Msg)
	q.SetQuestion(name, dns.TypeA)
	r, err := f.ExchangeFor(context.Background(), q, tcp)
	if err != nil {
		t.Fatalf("%s: %v", name, err)
	}
	if r.Truncated || len(r.Answer) != 1 || r.Answer[0].(*dns.A).A.String() != "192.0.2.1" {
		t.Fatalf("%s: %v, want the A record untruncated", name, r)
	}
}

// Which transport a plain upstream is asked over, by option and by the
// client's transport; a truncated UDP answer is always asked again over
// TCP, so the answer holds the records.
func TestPlainUpstreamTransport(t *testing.T) {
	for _, c := range []struct {
		name             string
		forceTCP, prefer bool
		clientTCP        bool
		wantUDP, wantTCP int32
	}{
		{"UDP client: UDP, truncated, then TCP", false, false, false, 1, 1},
		{"TCP client: TCP as the client", false, false, true, 0, 1},
		{"prefer_udp, TCP client: UDP first, then TCP", false, true, true, 1, 1},
		{"force_tcp, UDP client: TCP only", true, false, false, 0, 1},
		{"force_tcp wins over prefer_udp", true, true, true, 0, 1},
	} {
		t.Run(c.name, func(t *testing.T) {
			s := startPlainServer(t, false, truncating)
			f := newPlainForwarder(t, func(cfg *Config) { cfg.ForceTCP, cfg.PreferUDP = c.forceTCP, c.prefer }, s.addr)
			askOver(t, f, "example.org.", c.clientTCP)
			if s.udpAsked.Load() != c.wantUDP || s.tcpAsked.Load() != c.wantTCP {
				t.Fatalf("asked %d times over UDP and %d over TCP, want %d and %d",
					s.udpAsked.Load(), s.tcpAsked.Load(), c.wantUDP, c.wantTCP)
			}
		})
	}
}

// force_tcp reaches an upstream that listens on TCP only, over one
// connection kept open for the queries that follow, counted as a miss
// then hits under proto "tcp".
func TestForceTCPKeepsOneConnection(t *testing.T) {
	s := startPlainServer(t, true, answerA)
	var opened, reused atomic.Int32
	f := newPlainForwarder(t, func(cfg *Config) {
		cfg.ForceTCP = true
		cfg.OnConn = func(_, proto string, r bool) {
			if proto != "tcp" {
				t.Errorf("connection counted as %q, want tcp", proto)
			}
			if r {
				reused.Add(1)
			} else {
				opened.Add(1)
			}
		}
	}, s.addr)
	for range 3 {
		askOver(t, f, "example.org.", false)
	}
	if s.accepted.Load() != 1 || opened.Load() != 1 || reused.Load() != 2 {
		t.Fatalf("%d connections accepted, %d opened and %d reused: want 1, 1, 2", s.accepted.Load(), opened.Load(), reused.Load())
	}
	if s.udpAsked.Load() != 0 {
		t.Fatalf("%d questions over UDP, want none", s.udpAsked.Load())
	}

	// Without force_tcp the same upstream is asked over UDP, where
	// nothing listens.
	g := newPlainForwarder(t, func(cfg *Config) { cfg.Timeout = 200 * time.Millisecond }, s.addr)
	if _, err := askA(g, "example.org."); err == nil {
		t.Fatal("a TCP-only upstream answered over UDP")
	}
}

// A connection open for max_age is replaced at its next use, however
// recently it was used; without max_age it is used again.
func TestMaxAgeReplacesConnections(t *testing.T) {
	for _, c := range []struct {
		maxAge       time.Duration
		wantAccepted int32
	}{{0, 1}, {time.Minute, 2}} {
		s := startPlainServer(t, true, answerA)
		f := newPlainForwarder(t, func(cfg *Config) { cfg.ForceTCP, cfg.MaxAge = true, c.maxAge }, s.addr)
		askOver(t, f, "one.example.org.", false)
		// The connection was opened an hour ago, and has just been used.
		pool := f.upstreams[0].conns
		pool.mu.Lock()
		if len(pool.idle) != 1 {
			t.Fatalf("%d idle connections after a query, want 1", len(pool.idle))
		}
		pool.idle[0].opened = time.Now().Add(-time.Hour)
		pool.mu.Unlock()
		askOver(t, f, "two.example.org.", false)
		if n := s.accepted.Load(); n != c.wantAccepted {
			t.Errorf("max_age %s: %d connections accepted, want %d", c.maxAge, n, c.wantAccepted)
		}
	}
}

// failover asks the next upstream on the rcodes it names, without
// marking the first down; when every upstream answers one, the last
// answer is the answer. Other rcodes are answers at once.
func TestFailover(t *testing.T) {
	servfail := startPlainServer(t, false, rcodeHandler(dns.RcodeServerFailure))
	refused := startPlainServer(t, false, rcodeHandler(dns.RcodeRefused))
	good := startPlainServer(t, false, answerA)
	for _, c := range []struct {
		name      string
		failover  []int
		upstreams []string
		want      int
	}{
		{"SERVFAIL, then an answer", []int{dns.RcodeServerFailure}, []string{servfail.addr, good.addr}, dns.RcodeSuccess},
		{"two rcodes", []int{dns.RcodeServerFailure, dns.RcodeRefused}, []string{refused.addr, servfail.addr, good.addr}, dns.RcodeSuccess},
		{"no failover: the first answer", nil, []string{servfail.addr, good.addr}, dns.RcodeServerFailure},
		{"another rcode is the answer", []int{dns.RcodeServerFailure}, []string{refused.addr, good.addr}, dns.RcodeRefused},
		{"all fail over: the last answer", []int{dns.RcodeServerFailure, dns.RcodeRefused}, []string{servfail.addr, refused.addr}, dns.RcodeRefused},
	} {
		t.Run(c.name, func(t *testing.T) {
			f := newPlainForwarder(t, func(cfg *Config) { cfg.Failover, cfg.MaxFails = c.failover, 1 }, c.upstreams...)
			r, err := askA(f, "example.org.")
			if err != nil {
				t.Fatal(err)
			}
			if r.Rcode != c.want {
				t.Fatalf("rcode %s, want %s", dns.RcodeToString[r.Rcode], dns.RcodeToString[c.want])
			}
			if f.Healthy() != len(c.upstreams) {
				t.Fatalf("%d of %d upstreams healthy: an rcode is no failure", f.Healthy(), len(c.upstreams))
			}
		})
	}
}
