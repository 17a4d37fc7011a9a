// Package listeners holds the listener actors that own the DNS sockets.
//
// A listener actor owns one UDP socket and one TCP socket on one address
// (plain DNS), one TCP socket speaking TLS (DNS over TLS), or one TCP
// socket serving HTTPS (DNS over HTTPS). When it starts it runs their
// serving goroutines, which answer each request in place through
// query.Handler (no mailbox on the query path); when it stops it closes
// the sockets and waits for every goroutine, so nothing it started
// outlives it. A Scope in front of the handler limits a listener to some
// zones, as a Corefile server block does, or answers them as whoami.
package listeners

import (
	"cmp"
	"crypto/tls"
	"fmt"
	"log/slog"
	"net"
	"net/netip"
	"runtime"
	"sync"
	"sync/atomic"
	"time"

	"github.com/asynkron/protoactor-go/actor"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/shardns/shardns/query"
)

// Config configures one listener.
type Config struct {
	// Handler is loaded for every request, so a reload can swap it while
	// the sockets stay open.
	Handler *atomic.Pointer[query.Handler]
	// Scope is what the listener answers (its server blocks, the DNS over
	// HTTPS path), swapped on reload like Handler; nil, or a nil Scope,
	// answers every name through Handler.
	Scope *atomic.Pointer[Scope]
	// TLS makes the TCP socket speak DNS over TLS (NewProps) or HTTPS
	// (NewHTTPSProps).
	TLS            *tls.Config
	Panics         prometheus.Counter // counts recovered panics; may be nil
	IdleTimeout    time.Duration      // TCP: close after this long without a query
	ReadTimeout    time.Duration      // TCP: close a new connection whose first query is not in by then; 0: IdleTimeout
	WriteTimeout   time.Duration      // TCP: bound on writing one response; 0: IdleTimeout
	MaxConnections int                // TCP: concurrent connections; one more closes the idlest
	// MaxConnectionsPerSource bounds one client address's connections;
	// one more closes its own idlest. 0: no bound but MaxConnections.
	MaxConnectionsPerSource int
	Evicted                 prometheus.Counter // counts connections closed for MaxConnections; may be nil
	EvictedSource           prometheus.Counter // counts connections closed for MaxConnectionsPerSource; may be nil
	MaxQueries              int                // TCP: queries per connection before it is closed; 0: no bound
	// MaxLargeMessages bounds the messages over 512 bytes (TCP and TLS
	// messages, HTTPS bodies) read or answered at once; one more cuts the
	// one arriving the longest (gate.go). 0: DefaultMaxLargeMessages.
	MaxLargeMessages int
	LargeEvicted     prometheus.Counter // counts connections closed for MaxLargeMessages; may be nil
	LargeDropped     prometheus.Counter // counts messages dropped with every place answering; may be nil
	// HTTPS bounds DNS over HTTPS (https.go).
	HTTPS       HTTPSLimits
	UDPReaders  int                // goroutines reading the UDP socket; 0: one per two cores (defaultUDPReaders)
	RateLimit   *RateLimiter       // UDP queries per client address; nil: no limit
	RateLimited prometheus.Counter // counts datagrams RateLimit dropped; may be nil
	RRL         *RRL               // UDP response rate limiting; nil: none
	RRLCounters *RRLCounters       // counts RRL's decisions; may be nil
	Logger      *slog.Logger
}

// Sockets are the bound sockets of one address. UDP is nil for DNS over
// TLS and HTTPS.
type Sockets struct {
	UDP *UDPSocket
	TCP net.Listener
	// shared: bound by BindShared, beside other processes' sockets.
	shared bool
}

// BindTCP opens only TCP on addr, for DNS over TLS and HTTPS.
func BindTCP(addr string) (*Sockets, error) {
	tcp, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, err
	}
	return &Sockets{TCP: tcp}, nil
}

// Bind opens UDP and TCP on addr. It runs before any actor starts, so a
// port in use is a start-up error rather than a crashed actor.
func Bind(addr string) (*Sockets, error) { return bind(addr, false) }

// BindShared opens UDP and TCP on addr as Bind does, but beside the
// sockets another process of the same user has bound there with
// BindShared (SO_REUSEPORT, Linux only): a new node-local process starts
// on 169.254.20.10:53 while the old one serves. The oldest sockets of the
// address take every packet and connection until they yield
// (Yield), so a process that is not ready answers nothing.
func BindShared(addr string) (*Sockets, error) { return bind(addr, true) }

// streamListenConfig is how every DNS, DNS over TLS and DNS over HTTPS
// TCP socket listens: without TCP keep-alives. Go turns them on for
// each accepted connection by default, four setsockopt calls
// (SO_KEEPALIVE and its idle time, interval and count) of the 19 system
// calls a connection asking one question costs. A peer that vanished
// is what keep-alives find, and IdleTimeout (10 s by default, before a
// keep-alive's first probe at 15 s) already closes its connection.
func streamListenConfig() net.ListenConfig { return net.ListenConfig{KeepAlive: -1} }

func bind(addr string, shared bool) (*Sockets, error) {
	_, port, _ := net.SplitHostPort(addr)
	for attempt := 0; ; attempt++ {
		udp, err := listenUDP(addr, shared)
		if err != nil {
			return nil, err
		}
		// Serve TCP on the port UDP got, which matters when addr asks for
		// :0; that port may be taken for TCP, so then try another one.
		tcp, err := listenTCP(udp.LocalAddr().String(), shared, steerOldest)
		if err == nil {
			return &Sockets{UDP: udp, TCP: tcp, shared: shared}, nil
		}
		udp.Close()
		if port != "0" || attempt == 10 {
			return nil, err
		}
	}
}

// Addr is the address served.
func (s *Sockets) Addr() string {
	if s.UDP == nil {
		return s.TCP.Addr().String()
	}
	return s.UDP.LocalAddr().String()
}

// Close closes the sockets.
func (s *Sockets) Close() {
	if s.UDP != nil {
		s.UDP.Close()
	}
	s.TCP.Close()
}

// listener is the actor owning one address's sockets.
type listener struct {
	cfg     Config
	sockets *Sockets
	wg      sync.WaitGroup
	conns   *connSet
	large   *gate // TCP messages over 512 bytes being read or answered

	handoff     chan acceptedConn // connection workers wait here; closed when serveTCP returns (tcp.go)
	idleWorkers atomic.Int32      // how many wait there
}

// DefaultMaxLargeMessages is Config.MaxLargeMessages's default: 64
// buffers of at most 64 KiB, 4 MiB, per listener.
const DefaultMaxLargeMessages = 64

// NewProps returns the props of a listener serving sockets: plain DNS,
// or DNS over TLS when cfg.TLS is set.
func NewProps(cfg Config, sockets *Sockets) *actor.Props {
	if cfg.TLS != nil {
		sockets = &Sockets{TCP: &dotListener{Listener: sockets.TCP, config: dotConfig(cfg.TLS)}}
	}
	return actor.PropsFromProducer(func() actor.Actor {
		return &listener{cfg: cfg, sockets: sockets}
	})
}

func (l *listener) Receive(ctx actor.Context) {
	switch ctx.Message().(type) {
	case *actor.Started:
		l.start()
	case *actor.Stopping:
		l.stop()
	}
}

func (l *listener) start() {
	readers := l.cfg.UDPReaders
	if readers <= 0 {
		readers = defaultUDPReaders()
	}
	l.conns = newConnSet()
	l.large = newGate(cmp.Or(l.cfg.MaxLargeMessages, DefaultMaxLargeMessages), l.cfg.LargeEvicted)
	l.handoff = make(chan acceptedConn)
	proto := "tls"
	if l.sockets.UDP != nil {
		proto = "udp+tcp"
		for range readers {
			l.wg.Go(func() { l.serveUDP() })
		}
	}
	l.wg.Go(func() { l.serveTCP() })
	l.cfg.Logger.Info("listening", "addr", l.sockets.Addr(), "proto", proto)
}

// defaultUDPReaders is one reader per two cores, at least one. Sending
// an answer costs a reader most of its CPU in the kernel, and the other
// cores deliver the packets: on two cores with the load generator beside
// the server, one reader answered 10-20% more queries per CPU-second
// than two, and spent 0.32 instead of 0.52 cores at 20k qps (a second
// reader only takes turns with the first and wakes another thread). One
// reader answers well over 100k qps, so more are for larger machines.
func defaultUDPReaders() int { return max(1, runtime.GOMAXPROCS(0)/2) }

func (l *listener) stop() {
	l.sockets.Close()
	l.conns.closeAll()
	l.wg.Wait()
}

// serve answers one request.
func (l *listener) serve(req []byte, t query.Transport, out []byte) []byte {
	return l.cfg.serve(req, t, out)
}

// serve answers one request through the scope and the handler. A panic
// is recovered, counted and logged, and answered SERVFAIL as CoreDNS
// does: one poisonous packet must not take the server down, nor leave a
// TCP client waiting for an answer that will never come.
func (c *Config) serve(req []byte, t query.Transport, out []byte) (resp []byte) {
	defer func() {
		if r := recover(); r != nil {
			if c.Panics != nil {
				c.Panics.Inc()
			}
			c.Logger.Error("panic answering a query", "panic", r, "request", fmt.Sprintf("%x", req))
			resp = nil
			if query.Pending(req) { // a query, not a runt or a response
				resp = serverFailure(req)
			}
		}
	}()
	h := c.Handler.Load()
	if c.Scope != nil {
		var b []byte
		var done bool
		if h, b, done = c.Scope.Load().route(h, req, t, out); done {
			return b
		}
	}
	return h.Serve(req, t, out)
}

// addrPort is a socket address as a netip.AddrPort; the zero value for
// one that is neither UDP nor TCP.
func addrPort(a net.Addr) netip.AddrPort {
	switch a := a.(type) {
	case *net.UDPAddr:
		return a.AddrPort()
	case *net.TCPAddr:
		return a.AddrPort()
	}
	return netip.AddrPort{}
}

func isIPv6(a net.Addr) bool {
	switch a := a.(type) {
	case *net.UDPAddr:
		return a.IP.To4() == nil
	case *net.TCPAddr:
		return a.IP.To4() == nil
	}
	return false
}

// String names the listener in logs.
func (l *listener) String() string { return fmt.Sprintf("listener %s", l.sockets.Addr()) }
