package listeners

import (
	"errors"
	"io"
	"log/slog"
	"net"
	"net/netip"
	"os"
	"sync/atomic"
	"testing"
	"time"

	"github.com/asynkron/protoactor-go/actor"
	"github.com/miekg/dns"

	"github.com/shardns/shardns/internal/testutil"
	"github.com/shardns/shardns/model"
	"github.com/shardns/shardns/query"
	"github.com/shardns/shardns/zone"
)

// startListener serves a one-service zone on a loopback port through a
// listener actor, and stops the actor when the test ends.
func startListener(t testing.TB, maxConns int, idle time.Duration) string {
	return startListenerWith(t, Config{MaxConnections: maxConns, IdleTimeout: idle})
}

// startListenerWith is startListener with any TCP bounds set in cfg.
func startListenerWith(t testing.TB, cfg Config) string {
	t.Helper()
	s, err := Bind("127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	return spawnListener(t, cfg, s, NewProps)
}

// spawnListener serves the one-service zone on s through the listener
// actor props makes, and stops the actor when the test ends.
func spawnListener(t testing.TB, cfg Config, s *Sockets, props func(Config, *Sockets) *actor.Props) string {
	t.Helper()
	system := actor.NewActorSystem(actor.WithLoggerFactory(func(*actor.ActorSystem) *slog.Logger {
		return slog.New(slog.NewTextHandler(io.Discard, nil))
	}))
	if cfg.Handler == nil {
		var handler atomic.Pointer[query.Handler]
		handler.Store(testHandler())
		cfg.Handler = &handler
	}
	cfg.Logger = slog.New(slog.NewTextHandler(io.Discard, nil))
	pid := system.Root.Spawn(props(cfg, s))
	t.Cleanup(func() {
		system.Root.StopFuture(pid).Wait()
		system.Shutdown()
	})
	return s.Addr()
}

func expectWeb(t testing.TB, addr, proto string) {
	t.Helper()
	r, err := testutil.Exchange(addr, proto, "web.ns.svc.cluster.local.", dns.TypeA)
	if err != nil {
		t.Fatal(err)
	}
	if r.Rcode != dns.RcodeSuccess || len(r.Answer) != 1 {
		t.Fatalf("%s: got %v", proto, r)
	}
}

func TestServesUDPAndTCP(t *testing.T) {
	addr := startListener(t, 16, time.Second)
	expectWeb(t, addr, "udp")
	expectWeb(t, addr, "tcp")
}

// Several queries share one TCP connection, answered in order.
func TestTCPPipelining(t *testing.T) {
	addr := startListener(t, 16, time.Second)
	conn, err := dns.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	for i := range 3 {
		m := new(dns.Msg)
		m.SetQuestion("web.ns.svc.cluster.local.", dns.TypeA)
		m.Id = uint16(100 + i)
		if err := conn.WriteMsg(m); err != nil {
			t.Fatal(err)
		}
	}
	for i := range 3 {
		r, err := conn.ReadMsg()
		if err != nil {
			t.Fatal(err)
		}
		if r.Id != uint16(100+i) || len(r.Answer) != 1 {
			t.Fatalf("reply %d: %v", i, r)
		}
	}
}

// A client that sends one byte and stalls holds only its own connection,
// and is closed when it stays idle.
func TestTCPStalledClient(t *testing.T) {
	addr := startListener(t, 16, 200*time.Millisecond)
	stalled, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	defer stalled.Close()
	stalled.Write([]byte{0})
	expectWeb(t, addr, "tcp")
	expectWeb(t, addr, "udp")
	stalled.SetReadDeadline(time.Now().Add(5 * time.Second))
	if _, err := stalled.Read(make([]byte, 1)); err != io.EOF {
		t.Fatalf("stalled connection: read %v, want EOF after the idle timeout", err)
	}
}

// A full listener lets a new client in by closing its idlest connection.
func TestTCPConnectionLimit(t *testing.T) {
	addr := startListener(t, 1, 5*time.Second)
	first, err := dns.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	defer first.Close()
	m := new(dns.Msg)
	m.SetQuestion("web.ns.svc.cluster.local.", dns.TypeA)
	if err := first.WriteMsg(m); err != nil {
		t.Fatal(err)
	}
	if _, err := first.ReadMsg(); err != nil {
		t.Fatal(err)
	}
	// The listener is full: a new client gets in by closing the idlest.
	expectWeb(t, addr, "tcp")
	first.SetReadDeadline(time.Now().Add(5 * time.Second))
	if _, err := first.Conn.Read(make([]byte, 1)); err != io.EOF {
		t.Fatalf("the idlest connection of a full listener: read %v, want EOF", err)
	}
	expectWeb(t, addr, "udp")
}

// A connection is closed after its quota of queries; the client reconnects.
func TestTCPMaxQueries(t *testing.T) {
	addr := startListenerWith(t, Config{MaxConnections: 4, IdleTimeout: 5 * time.Second, MaxQueries: 2})
	conn, err := dns.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	m := new(dns.Msg)
	m.SetQuestion("web.ns.svc.cluster.local.", dns.TypeA)
	for i := range 2 {
		if err := conn.WriteMsg(m); err != nil {
			t.Fatal(err)
		}
		if _, err := conn.ReadMsg(); err != nil {
			t.Fatalf("query %d within the quota: %v", i+1, err)
		}
	}
	conn.SetReadDeadline(time.Now().Add(5 * time.Second))
	conn.WriteMsg(m)
	if _, err := conn.ReadMsg(); err == nil {
		t.Fatal("a third query was answered on a connection with a quota of 2")
	}
	expectWeb(t, addr, "tcp")
}

// BenchmarkServeUDP is a loopback round trip through a listener actor.
func BenchmarkServeUDP(b *testing.B) {
	addr := startListener(b, 16, time.Second)
	conn, err := net.Dial("udp", addr)
	if err != nil {
		b.Fatal(err)
	}
	defer conn.Close()
	m := new(dns.Msg)
	m.SetQuestion("web.ns.svc.cluster.local.", dns.TypeA)
	req, _ := m.Pack()
	buf := make([]byte, 512)
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

// panicReader panics for one zone, as a bug reached by one name would.
type panicReader struct{ zone.Reader }

func (v panicReader) Zone(key string) *zone.Snapshot {
	if key == "boom.svc.cluster.local." {
		panic("a bug reached by one name")
	}
	return v.Reader.Zone(key)
}

func (v panicReader) Remote(key string) []string {
	if key == "boom.svc.cluster.local." {
		return nil
	}
	return v.Reader.Remote(key)
}

// A query that panics gets SERVFAIL over UDP and TCP, at once, and the
// listener goes on answering.
func TestPanicAnswersServerFailure(t *testing.T) {
	s, err := Bind("127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	zcfg := &zone.Config{Domains: zone.Domains{Cluster: []string{"cluster.local."}}, TTL: 5}
	zcfg.Prepare()
	view := zone.NewStatic(zcfg, []any{&model.Namespace{Name: "ns"}, &model.Namespace{Name: "boom"},
		&model.Service{Namespace: "ns", Name: "web", ClusterIPs: []netip.Addr{netip.MustParseAddr("10.0.0.1")},
			Ports: []model.Port{{Name: "http", Protocol: "TCP", Port: 80}}}}, true)
	system := actor.NewActorSystem(actor.WithLoggerFactory(func(*actor.ActorSystem) *slog.Logger {
		return slog.New(slog.NewTextHandler(io.Discard, nil))
	}))
	var handler atomic.Pointer[query.Handler]
	handler.Store(&query.Handler{Config: zcfg, Zones: panicReader{view}})
	pid := system.Root.Spawn(NewProps(Config{Handler: &handler, MaxConnections: 4, IdleTimeout: time.Minute,
		Logger: slog.New(slog.NewTextHandler(io.Discard, nil))}, s))
	t.Cleanup(func() {
		system.Root.StopFuture(pid).Wait()
		system.Shutdown()
	})
	for _, proto := range []string{"udp", "tcp"} {
		r, err := testutil.Exchange(s.Addr(), proto, "web.boom.svc.cluster.local.", dns.TypeA)
		if err != nil {
			t.Fatalf("%s: %v", proto, err)
		}
		if r.Rcode != dns.RcodeServerFailure || len(r.Question) != 1 || r.Question[0].Name != "web.boom.svc.cluster.local." {
			t.Fatalf("%s: got %v, want SERVFAIL for the question asked", proto, r)
		}
		expectWeb(t, s.Addr(), proto)
	}
}

// testHandler answers the test zone: web.ns.svc.cluster.local, 10.0.0.1.
func testHandler() *query.Handler {
	zcfg := &zone.Config{Domains: zone.Domains{Cluster: []string{"cluster.local."}}, TTL: 5}
	zcfg.Prepare()
	view := zone.NewStatic(zcfg, []any{
		&model.Namespace{Name: "ns"},
		&model.Service{Namespace: "ns", Name: "web", ClusterIPs: []netip.Addr{netip.MustParseAddr("10.0.0.1")},
			Ports: []model.Port{{Name: "http", Protocol: "TCP", Port: 80}}},
	}, true)
	return &query.Handler{Config: zcfg, Zones: view}
}

// The first query of a connection must come within the read timeout;
// after it, the idle timeout applies, as CoreDNS's timeouts read, idle.
func TestTCPReadTimeoutThenIdle(t *testing.T) {
	addr := startListenerWith(t, Config{MaxConnections: 4, ReadTimeout: 200 * time.Millisecond, IdleTimeout: 5 * time.Second})
	silent, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	defer silent.Close()
	start := time.Now()
	silent.SetReadDeadline(time.Now().Add(4 * time.Second))
	if _, err := silent.Read(make([]byte, 1)); err != io.EOF || time.Since(start) > 3*time.Second {
		t.Fatalf("connection without a query: read %v after %v, want EOF at the 200ms read timeout", err, time.Since(start))
	}
	talker, err := dns.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	defer talker.Close()
	m := new(dns.Msg)
	m.SetQuestion("web.ns.svc.cluster.local.", dns.TypeA)
	if err := talker.WriteMsg(m); err != nil {
		t.Fatal(err)
	}
	if _, err := talker.ReadMsg(); err != nil {
		t.Fatal(err)
	}
	// Well past the read timeout, the connection is still open.
	talker.SetReadDeadline(time.Now().Add(time.Second))
	if _, err := talker.Conn.Read(make([]byte, 1)); !errors.Is(err, os.ErrDeadlineExceeded) {
		t.Fatalf("after a query: read %v, want the connection kept open for the idle timeout", err)
	}
}
