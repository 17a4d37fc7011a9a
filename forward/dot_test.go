package forward

import (
	"context"
	"crypto/tls"
	"fmt"
	"log/slog"
	"net"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/miekg/dns"

	"github.com/shardns/shardns/internal/testutil"
)

// dotServer is a DNS over TLS upstream on loopback, with a certificate
// for 127.0.0.1 and localhost that caFile trusts.
type dotServer struct {
	addr     string
	caFile   string
	accepted atomic.Int32 // TCP connections
	resumed  atomic.Int32 // handshakes that resumed a session
}

type countingListener struct {
	net.Listener
	n *atomic.Int32
}

func (l countingListener) Accept() (net.Conn, error) {
	c, err := l.Listener.Accept()
	if err == nil {
		l.n.Add(1)
	}
	return c, err
}

// answerA answers every question with an A record.
func answerA(w dns.ResponseWriter, r *dns.Msg) { _ = w.WriteMsg(replyA(r)) }

// replyA is the reply to q with an A record, what the test upstreams of
// every transport answer.
func replyA(q *dns.Msg) *dns.Msg {
	m := new(dns.Msg)
	m.SetReply(q)
	rr, _ := dns.NewRR(q.Question[0].Name + " 300 IN A 192.0.2.1")
	m.Answer = append(m.Answer, rr)
	return m
}

// upstreamCert writes a certificate for 127.0.0.1 and localhost and
// returns the file that trusts it and the pair a test upstream serves.
func upstreamCert(t *testing.T) (caFile string, pair tls.Certificate) {
	t.Helper()
	certFile, keyFile, _ := testutil.WriteCert(t, t.TempDir(), "upstream", "upstream")
	pair, err := tls.LoadX509KeyPair(certFile, keyFile)
	if err != nil {
		t.Fatal(err)
	}
	return certFile, pair
}

func startDoTServer(t *testing.T, handler dns.HandlerFunc) *dotServer {
	t.Helper()
	certFile, pair := upstreamCert(t)
	s := &dotServer{caFile: certFile}
	cfg := &tls.Config{Certificates: []tls.Certificate{pair}, VerifyConnection: func(cs tls.ConnectionState) error {
		if cs.DidResume {
			s.resumed.Add(1)
		}
		return nil
	}}
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	s.addr = l.Addr().String()
	started := make(chan struct{})
	srv := &dns.Server{Listener: tls.NewListener(countingListener{l, &s.accepted}, cfg), Net: "tcp-tls",
		Handler: handler, NotifyStartedFunc: func() { close(started) }}
	go func() { _ = srv.ActivateAndServe() }()
	<-started
	t.Cleanup(func() { _ = srv.Shutdown() })
	return s
}

// conns counts the connections a forwarder took, by reuse; each must be
// of proto (tcp-tls for DoT, https for DoH).
type conns struct {
	proto          string
	opened, reused atomic.Int32
}

func (c *conns) observe(_, proto string, reused bool) {
	if proto != c.proto {
		panic("a " + c.proto + " connection counted as " + proto)
	}
	if reused {
		c.reused.Add(1)
	} else {
		c.opened.Add(1)
	}
}

func newDoTForwarder(t *testing.T, files TLSFiles, c *conns, mod func(*Config), upstreams ...string) *Forwarder {
	t.Helper()
	tc, err := LoadTLS(files, len(upstreams))
	if err != nil {
		t.Fatal(err)
	}
	cfg := Config{Upstreams: upstreams, Policy: "sequential", Timeout: 2 * time.Second, MaxConcurrent: 100,
		HealthCheck: 20 * time.Millisecond, MaxFails: 2, Logger: slog.New(slog.DiscardHandler),
		TLS: tc, Expire: 10 * time.Second}
	if c != nil {
		cfg.OnConn = c.observe
	}
	if mod != nil {
		mod(&cfg)
	}
	f := New(cfg)
	t.Cleanup(f.Close)
	return f
}

func askA(f *Forwarder, name string) (*dns.Msg, error) {
	q := new(dns.Msg)
	q.SetQuestion(name, dns.TypeA)
	return f.Exchange(context.Background(), q)
}

func wantA(t *testing.T, f *Forwarder, name string) {
	t.Helper()
	r, err := askA(f, name)
	if err != nil {
		t.Fatalf("%s: %v", name, err)
	}
	if len(r.Answer) != 1 || r.Answer[0].(*dns.A).A.String() != "192.0.2.1" {
		t.Fatalf("%s: answer %v, want 192.0.2.1", name, r.Answer)
	}
}

// wantAnswers asks n different names one after another.
func wantAnswers(t *testing.T, f *Forwarder, n int) {
	t.Helper()
	for i := range n {
		wantA(t, f, fmt.Sprintf("q%d.example.org.", i))
	}
}

// Queries one after another share one connection: one handshake for
// all of them.
func TestDoTQueriesShareOneConnection(t *testing.T) {
	s := startDoTServer(t, answerA)
	c := conns{proto: "tcp-tls"}
	f := newDoTForwarder(t, TLSFiles{CAFile: s.caFile}, &c, nil, "tls://"+s.addr)
	wantAnswers(t, f, 50)
	if n := s.accepted.Load(); n != 1 {
		t.Errorf("the upstream accepted %d connections for 50 queries, want 1", n)
	}
	if c.opened.Load() != 1 || c.reused.Load() != 49 {
		t.Errorf("counted %d opened and %d reused connections, want 1 and 49", c.opened.Load(), c.reused.Load())
	}
}

// With no connection kept (expire 0) each query opens one, and resumes
// the TLS session of the one before.
func TestDoTResumesSessions(t *testing.T) {
	s := startDoTServer(t, answerA)
	f := newDoTForwarder(t, TLSFiles{CAFile: s.caFile}, nil, func(c *Config) { c.Expire = 0 }, "tls://"+s.addr)
	wantAnswers(t, f, 3)
	if s.accepted.Load() != 3 || s.resumed.Load() != 2 {
		t.Errorf("%d connections, %d resumed; want 3, the last 2 resumed", s.accepted.Load(), s.resumed.Load())
	}
}

// An upstream that closes a connection after each answer (its own idle
// timeout, say) costs a new connection, never a failed query.
func TestDoTConnectionClosedByUpstreamIsReplaced(t *testing.T) {
	s := startDoTServer(t, func(w dns.ResponseWriter, r *dns.Msg) {
		answerA(w, r)
		_ = w.Close()
	})
	f := newDoTForwarder(t, TLSFiles{CAFile: s.caFile}, nil, nil, "tls://"+s.addr)
	wantAnswers(t, f, 5)
	if n := s.accepted.Load(); n != 5 {
		t.Errorf("the upstream accepted %d connections, want one per query (5)", n)
	}
	if f.Healthy() != 1 {
		t.Error("the upstream was marked down for closing idle connections")
	}
}

// An idle connection is closed once idle for expire, with no query to
// notice it.
func TestDoTIdleConnectionExpires(t *testing.T) {
	s := startDoTServer(t, answerA)
	f := newDoTForwarder(t, TLSFiles{CAFile: s.caFile}, nil, func(c *Config) { c.Expire = 50 * time.Millisecond }, "tls://"+s.addr)
	wantA(t, f, "example.org.")
	pool := f.upstreams[0].conns
	testutil.Eventually(t, 5*time.Second, func() error {
		if n := pool.idleConns(); n != 0 {
			return fmt.Errorf("%d idle connections after expire", n)
		}
		return nil
	})
	wantA(t, f, "example.org.")
	if n := s.accepted.Load(); n != 2 {
		t.Errorf("%d connections, want 2: the expired one replaced", n)
	}
}

// Queries in flight together each have a connection; at most
// MaxIdleConns of them are kept after.
func TestDoTMaxIdleConns(t *testing.T) {
	const parallel = 4
	var arrived sync.WaitGroup
	arrived.Add(parallel)
	s := startDoTServer(t, func(w dns.ResponseWriter, r *dns.Msg) {
		if !strings.HasPrefix(r.Question[0].Name, "late") {
			arrived.Done()
			arrived.Wait() // every query holds its connection until all are in
		}
		answerA(w, r)
	})
	f := newDoTForwarder(t, TLSFiles{CAFile: s.caFile}, nil, func(c *Config) { c.MaxIdleConns = 1 }, "tls://"+s.addr)
	var wg sync.WaitGroup
	errs := make(chan error, parallel)
	for i := range parallel {
		wg.Go(func() {
			if _, err := askA(f, fmt.Sprintf("q%d.example.org.", i)); err != nil {
				errs <- err
			}
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	if n := f.upstreams[0].conns.idleConns(); n != 1 {
		t.Errorf("%d idle connections kept, want MaxIdleConns (1)", n)
	}
	wantA(t, f, "late.example.org.")
	if n := s.accepted.Load(); n != parallel {
		t.Errorf("%d connections, want %d: the kept one serves the next query", n, parallel)
	}
}

// A certificate the forwarder does not trust, or for another name, fails
// the query, and the health checks (over TLS too) keep the upstream down.
func TestDoTUntrustedUpstreamIsMarkedDown(t *testing.T) {
	other := startDoTServer(t, answerA)
	for _, c := range []struct {
		name  string
		files func(s *dotServer) TLSFiles
	}{
		{"system roots", func(*dotServer) TLSFiles { return TLSFiles{} }},
		{"another CA", func(*dotServer) TLSFiles { return TLSFiles{CAFile: other.caFile} }},
		{"another name", func(s *dotServer) TLSFiles { return TLSFiles{CAFile: s.caFile, ServerName: "dns.example.org"} }},
	} {
		s := startDoTServer(t, answerA)
		f := newDoTForwarder(t, c.files(s), nil, nil, "tls://"+s.addr)
		for range 2 {
			if r, err := askA(f, "example.org."); err == nil {
				t.Fatalf("%s: an untrusted upstream answered: %v", c.name, r)
			}
		}
		if f.Healthy() != 0 {
			t.Fatalf("%s: the upstream is not marked down", c.name)
		}
		// The health checks connect over TLS, fail the same way, and
		// leave it down.
		probed := s.accepted.Load()
		testutil.Eventually(t, 5*time.Second, func() error {
			if s.accepted.Load() < probed+2 {
				return fmt.Errorf("no health check reached the upstream")
			}
			return nil
		})
		if f.Healthy() != 0 {
			t.Fatalf("%s: a health check passed with a certificate that fails", c.name)
		}
	}
	// With the right CA and a name its certificate holds, it answers.
	s := startDoTServer(t, answerA)
	f := newDoTForwarder(t, TLSFiles{CAFile: s.caFile, ServerName: "localhost"}, nil, nil, "tls://"+s.addr)
	wantA(t, f, "example.org.")
}

// An upstream that resets every connection fails the query and is
// marked down; it never panics the forwarder.
func TestDoTUpstreamResetting(t *testing.T) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { l.Close() })
	go func() {
		for {
			c, err := l.Accept()
			if err != nil {
				return
			}
			c.(*net.TCPConn).SetLinger(0) // RST, not FIN
			c.Close()
		}
	}()
	s := startDoTServer(t, answerA) // only for a CA file
	f := newDoTForwarder(t, TLSFiles{CAFile: s.caFile}, nil, nil, "tls://"+l.Addr().String())
	for range 2 {
		if _, err := askA(f, "example.org."); err == nil {
			t.Fatal("an upstream that resets answered")
		}
	}
	if f.Healthy() != 0 {
		t.Fatal("an upstream that resets is not marked down")
	}
}

// Plain and TLS upstreams mix in one forwarder, as in CoreDNS: each is
// asked over its own transport.
func TestPlainAndTLSUpstreamsMix(t *testing.T) {
	s := startDoTServer(t, answerA)
	pc, err := net.ListenPacket("udp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	started := make(chan struct{})
	plain := &dns.Server{PacketConn: pc, NotifyStartedFunc: func() { close(started) },
		Handler: dns.HandlerFunc(func(w dns.ResponseWriter, r *dns.Msg) {
			m := new(dns.Msg)
			m.SetRcode(r, dns.RcodeNameError)
			_ = w.WriteMsg(m)
		})}
	go func() { _ = plain.ActivateAndServe() }()
	<-started
	t.Cleanup(func() { _ = plain.Shutdown() })
	c := conns{proto: "tcp-tls"}
	f := newDoTForwarder(t, TLSFiles{CAFile: s.caFile}, &c, func(c *Config) { c.Policy = "round_robin" },
		pc.LocalAddr().String(), "tls://"+s.addr)
	rcodes := map[int]int{}
	for range 4 {
		r, err := askA(f, "example.org.")
		if err != nil {
			t.Fatal(err)
		}
		rcodes[r.Rcode]++
	}
	if rcodes[dns.RcodeSuccess] != 2 || rcodes[dns.RcodeNameError] != 2 {
		t.Errorf("answers by rcode %v, want 2 from each upstream", rcodes)
	}
	if c.opened.Load() != 1 || c.reused.Load() != 1 {
		t.Errorf("%d TLS connections opened and %d reused, want 1 and 1: the plain upstream takes none",
			c.opened.Load(), c.reused.Load())
	}
}

func TestLoadTLSNamesTheFile(t *testing.T) {
	dir := t.TempDir()
	certFile, keyFile, _ := testutil.WriteCert(t, dir, "client", "client")
	notPEM := filepath.Join(dir, "not.pem")
	if err := os.WriteFile(notPEM, []byte("hello"), 0o644); err != nil {
		t.Fatal(err)
	}
	missing := filepath.Join(dir, "missing.pem")
	for _, c := range []struct {
		files TLSFiles
		want  string
	}{
		{TLSFiles{CAFile: missing}, "caFile: open " + missing},
		{TLSFiles{CAFile: notPEM}, "caFile: " + notPEM + " holds no PEM certificate"},
		{TLSFiles{CertFile: missing, KeyFile: keyFile}, "certFile " + missing},
		{TLSFiles{CertFile: certFile, KeyFile: notPEM}, "keyFile " + notPEM},
		{TLSFiles{CertFile: certFile}, "needs both"},
	} {
		_, err := LoadTLS(c.files, 1)
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("LoadTLS(%+v) = %v, want an error with %q", c.files, err, c.want)
		}
	}
	tc, err := LoadTLS(TLSFiles{CAFile: certFile, CertFile: certFile, KeyFile: keyFile, ServerName: "dns.example"}, 2)
	if err != nil || tc.RootCAs == nil || len(tc.Certificates) != 1 || tc.ServerName != "dns.example" || tc.ClientSessionCache == nil {
		t.Errorf("LoadTLS with every file: %+v, %v", tc, err)
	}
}
