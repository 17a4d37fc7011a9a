package listeners

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/netip"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/asynkron/protoactor-go/actor"
	"github.com/miekg/dns"
	"golang.org/x/sys/unix"

	"github.com/shardns/shardns/internal/testutil"
	"github.com/shardns/shardns/model"
	"github.com/shardns/shardns/query"
	"github.com/shardns/shardns/zone"
)

// A node-local process replaced under load, as a DaemonSet rolled with
// maxSurge does: the new process binds the address beside the old one
// and answers nothing until the old one hands over; the old one then
// answers what it holds and stops. Every query of a steady stream is
// answered once, by the old process before the hand-over and by the new
// one after it. Each process answers web.ns with an address of its own.
func TestSharedAddressYield(t *testing.T) {
	old, err := BindShared("127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	stopOld := spawnShared(t, old, "10.0.0.1")
	s := startStream(t, old.Addr(), 4)
	s.waitAnswers(t, 200)

	next, err := BindShared(old.Addr())
	if err != nil {
		t.Fatalf("binding the address beside the serving process: %v", err)
	}
	spawnShared(t, next, "10.0.0.2")
	s.waitAnswers(t, 400)
	if got := s.from("10.0.0.2"); got != 0 {
		t.Fatalf("the new process answered %d queries before the old one handed over", got)
	}
	expectAddr(t, old.Addr(), "tcp", "10.0.0.1")

	if err := old.Yield(); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if err := old.Drain(ctx); err != nil {
		t.Fatalf("drain: %v", err)
	}
	expectAddr(t, old.Addr(), "tcp", "10.0.0.2")
	stopOld()
	before := s.answered()
	s.waitAnswers(t, before+400)
	lost, answers := s.stop()
	if lost != 0 {
		t.Fatalf("%d of %d queries unanswered across the hand-over", lost, answers+lost)
	}
	if got := s.from("10.0.0.2"); got < 400 {
		t.Fatalf("the new process answered %d queries after the hand-over, want every one since (400 or more)", got)
	}
}

// Alone on the address, a process that hands over keeps answering: the
// maxUnavailable rollout, and a pod deleted with no successor.
func TestYieldAloneKeepsServing(t *testing.T) {
	s, err := BindShared("127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	spawnShared(t, s, "10.0.0.1")
	if err := s.Yield(); err != nil {
		t.Fatal(err)
	}
	for _, proto := range []string{"udp", "tcp"} {
		expectAddr(t, s.Addr(), proto, "10.0.0.1")
	}
}

// An address bound by Bind stays exclusive: a second process gets
// "address in use", as a replica's port must.
func TestBindStaysExclusive(t *testing.T) {
	s, err := Bind("127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	for _, bind := range []func(string) (*Sockets, error){Bind, BindShared} {
		if again, err := bind(s.Addr()); err == nil {
			again.Close()
			t.Fatalf("a second bind of %s succeeded", s.Addr())
		}
	}
}

// spawnShared serves web.ns.svc.cluster.local as ip on s through a
// listener actor, and returns what stops it (idempotent; also run when
// the test ends).
func spawnShared(t *testing.T, s *Sockets, ip string) func() {
	t.Helper()
	system := actor.NewActorSystem(actor.WithLoggerFactory(func(*actor.ActorSystem) *slog.Logger {
		return slog.New(slog.NewTextHandler(io.Discard, nil))
	}))
	var handler atomic.Pointer[query.Handler]
	handler.Store(webHandler(ip))
	cfg := Config{Handler: &handler, MaxConnections: 16, IdleTimeout: time.Second,
		Logger: slog.New(slog.NewTextHandler(io.Discard, nil))}
	pid := system.Root.Spawn(NewProps(cfg, s))
	var once sync.Once
	stop := func() {
		once.Do(func() {
			system.Root.StopFuture(pid).Wait()
			system.Shutdown()
		})
	}
	t.Cleanup(stop)
	return stop
}

// webHandler answers web.ns.svc.cluster.local with ip.
func webHandler(ip string) *query.Handler {
	zcfg := &zone.Config{Domains: zone.Domains{Cluster: []string{"cluster.local."}}, TTL: 5}
	zcfg.Prepare()
	view := zone.NewStatic(zcfg, []any{
		&model.Namespace{Name: "ns"},
		&model.Service{Namespace: "ns", Name: "web", ClusterIPs: []netip.Addr{netip.MustParseAddr(ip)},
			Ports: []model.Port{{Name: "http", Protocol: "TCP", Port: 80}}},
	}, true)
	return &query.Handler{Config: zcfg, Zones: view}
}

func expectAddr(t *testing.T, addr, proto, ip string) {
	t.Helper()
	r, err := testutil.Exchange(addr, proto, "web.ns.svc.cluster.local.", dns.TypeA)
	if err != nil {
		t.Fatalf("%s: %v", proto, err)
	}
	if len(r.Answer) != 1 || r.Answer[0].(*dns.A).A.String() != ip {
		t.Fatalf("%s: got %v, want the answer %s", proto, r, ip)
	}
}

// stream is clients asking web.ns without pause, each one query at a
// time, as resolvers of a node's pods do. A query unanswered within
// streamTimeout is lost: a resolver would have asked again.
type stream struct {
	done  chan struct{}
	wg    sync.WaitGroup
	mu    sync.Mutex
	by    map[string]int // answers by address
	total int
	lost  int
	errs  []string
}

const streamTimeout = 2 * time.Second

func startStream(t *testing.T, addr string, clients int) *stream {
	s := &stream{done: make(chan struct{}), by: map[string]int{}}
	for range clients {
		conn, err := net.Dial("udp", addr)
		if err != nil {
			t.Fatal(err)
		}
		s.wg.Go(func() {
			defer conn.Close()
			s.ask(conn)
		})
	}
	t.Cleanup(func() { s.stop() })
	return s
}

func (s *stream) ask(conn net.Conn) {
	buf := make([]byte, 512)
	m := new(dns.Msg)
	m.SetQuestion("web.ns.svc.cluster.local.", dns.TypeA)
	for id := uint16(1); ; id++ {
		select {
		case <-s.done:
			return
		default:
		}
		m.Id = id
		req, _ := m.Pack()
		conn.Write(req)
		s.record(readAnswer(conn, buf, id))
	}
}

// readAnswer is the address answered to query id, or "" if none came.
func readAnswer(conn net.Conn, buf []byte, id uint16) (string, error) {
	conn.SetReadDeadline(time.Now().Add(streamTimeout))
	for {
		n, err := conn.Read(buf)
		if err != nil {
			return "", err
		}
		r := new(dns.Msg)
		if r.Unpack(buf[:n]) != nil || r.Id != id {
			continue
		}
		if r.Rcode != dns.RcodeSuccess || len(r.Answer) != 1 {
			return "", fmt.Errorf("answer %v", r)
		}
		return r.Answer[0].(*dns.A).A.String(), nil
	}
}

func (s *stream) record(ip string, err error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if err != nil {
		s.lost++
		if len(s.errs) < 5 {
			s.errs = append(s.errs, err.Error())
		}
		return
	}
	s.by[ip]++
	s.total++
}

func (s *stream) answered() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.total
}

func (s *stream) from(ip string) int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.by[ip]
}

func (s *stream) waitAnswers(t *testing.T, n int) {
	t.Helper()
	testutil.Eventually(t, 20*time.Second, func() error {
		if got := s.answered(); got < n {
			return fmt.Errorf("%d answers, want %d", got, n)
		}
		return nil
	})
}

// stop ends the clients and returns the queries lost and answered.
func (s *stream) stop() (lost, answered int) {
	select {
	case <-s.done:
	default:
		close(s.done)
	}
	s.wg.Wait()
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.lost, s.total
}

// A process that replaced another takes the address back once that one
// has closed: the next process to bind, between its bind and its own
// program (played here by a socket that joins the group and attaches
// none), receives nothing. Without TakeBack the program the replaced
// process left ("the socket bound after me") sent it everything.
func TestSurvivorTakesTheAddressBack(t *testing.T) {
	old, err := BindShared("127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	stopOld := spawnShared(t, old, "10.0.0.1")
	survivor, err := BindShared(old.Addr())
	if err != nil {
		t.Fatal(err)
	}
	spawnShared(t, survivor, "10.0.0.2")
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	took := make(chan error, 1)
	go func() {
		ok, err := survivor.TakeBack(ctx)
		if err == nil && !ok {
			err = fmt.Errorf("TakeBack gave up with no error")
		}
		took <- err
	}()
	if err := old.Yield(); err != nil {
		t.Fatal(err)
	}
	if err := old.Drain(ctx); err != nil {
		t.Fatalf("drain: %v", err)
	}
	stopOld()
	old.Close()
	if err := <-took; err != nil {
		t.Fatalf("TakeBack: %v", err)
	}

	udp, tcp := bareMembers(t, survivor.Addr())
	for i := range 20 {
		expectAddr(t, survivor.Addr(), []string{"udp", "tcp"}[i%2], "10.0.0.2")
	}
	if n, _ := unix.IoctlGetInt(udp, unix.SIOCINQ); n > 0 {
		t.Fatalf("a socket joining the group without a program of its own got %d bytes of queries", n)
	}
	if info, err := unix.GetsockoptTCPInfo(tcp, unix.IPPROTO_TCP, unix.TCP_INFO); err != nil || info.Unacked > 0 {
		t.Fatalf("a listener joining the group without a program of its own got connections (%v)", err)
	}
}

// A process bound first, alone, has nothing to take back.
func TestTakeBackAloneFromTheStart(t *testing.T) {
	s, err := BindShared("127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	if ok, err := s.TakeBack(context.Background()); ok || err != nil {
		t.Fatalf("TakeBack of a first process: %v, %v; want false at once", ok, err)
	}
}

// bareMembers joins addr's UDP and TCP groups with sockets that attach
// no program, as a process does between its bind and its steer.
func bareMembers(t *testing.T, addr string) (udp, tcp int) {
	t.Helper()
	ap := netip.MustParseAddrPort(addr)
	sa := &unix.SockaddrInet4{Port: int(ap.Port()), Addr: ap.Addr().As4()}
	for _, kind := range []int{unix.SOCK_DGRAM, unix.SOCK_STREAM} {
		fd, err := unix.Socket(unix.AF_INET, kind|unix.SOCK_CLOEXEC, 0)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { unix.Close(fd) })
		if err := unix.SetsockoptInt(fd, unix.SOL_SOCKET, unix.SO_REUSEPORT, 1); err != nil {
			t.Fatal(err)
		}
		if err := unix.Bind(fd, sa); err != nil {
			t.Fatal(err)
		}
		if kind == unix.SOCK_STREAM {
			if err := unix.Listen(fd, 16); err != nil {
				t.Fatal(err)
			}
			tcp = fd
		} else {
			udp = fd
		}
	}
	return udp, tcp
}
