package listeners

import (
	"bytes"
	"cmp"
	"context"
	"encoding/binary"
	"errors"
	"log/slog"
	"net"
	"net/http"
	"net/netip"
	"strconv"
	"sync"
	"time"

	"github.com/asynkron/protoactor-go/actor"
	"github.com/miekg/dns"

	"github.com/shardns/shardns/query"
)

// DNS over HTTPS (RFC 8484): net/http over TLS (HTTP/1.1 and HTTP/2),
// GET with the query in the dns parameter and POST with the query as the
// body, both answered through the same Config.serve as UDP and TCP.

// dohContentType is the Content-Type header of every answer.
var dohContentType = []string{dohMediaType}

const (
	dohMediaType = "application/dns-message"
	// dohMaxMessage is the largest DNS message, as over TCP.
	dohMaxMessage = dns.MaxMsgSize
	// dohStopWait bounds how long stopping waits for requests in flight.
	dohStopWait = 2 * time.Second
	// dohLateGrace is added to the handler's bound on late answers, so the
	// SERVFAIL a forwarder writes at its own deadline still reaches the
	// request waiting for it.
	dohLateGrace = time.Second
)

// httpsListener is the actor owning one DNS over HTTPS socket.
type httpsListener struct {
	cfg      Config
	sockets  *Sockets
	server   *http.Server
	conns    *connSet
	inflight *gate         // the requests being read and answered (https_limits.go)
	large    *gate         // those whose body outgrew the smallest buffer
	stopping chan struct{} // closed when the actor stops: late waits end
	wg       sync.WaitGroup
}

// NewHTTPSProps returns the props of a DNS over HTTPS listener on
// sockets.TCP; cfg.TLS presents the certificate and cfg.Scope holds the
// path.
func NewHTTPSProps(cfg Config, sockets *Sockets) *actor.Props {
	return actor.PropsFromProducer(func() actor.Actor {
		return &httpsListener{cfg: cfg, sockets: sockets}
	})
}

func (l *httpsListener) Receive(ctx actor.Context) {
	switch ctx.Message().(type) {
	case *actor.Started:
		l.start()
	case *actor.Stopping:
		l.stop()
	}
}

func (l *httpsListener) start() {
	l.conns = newConnSet()
	l.inflight = newGate(l.cfg.HTTPS.maxInFlight(), l.cfg.HTTPS.Refused.Evicted)
	l.large = newGate(cmp.Or(l.cfg.MaxLargeMessages, DefaultMaxLargeMessages), l.cfg.HTTPS.Refused.Evicted)
	l.stopping = make(chan struct{})
	l.server = &http.Server{
		Handler:           l,
		TLSConfig:         l.cfg.TLS.Clone(),
		ReadHeaderTimeout: l.cfg.readTimeout(),
		ReadTimeout:       l.cfg.readTimeout(),
		WriteTimeout:      l.cfg.writeTimeout() + l.lateBound(), // each request sets its own; see ServeHTTP
		IdleTimeout:       l.cfg.IdleTimeout,
		MaxHeaderBytes:    16 << 10,
		HTTP2:             l.cfg.HTTPS.http2Config(),
		// Failed handshakes and broken clients are not the server's errors.
		ErrorLog: slog.NewLogLogger(l.cfg.Logger.Handler(), slog.LevelDebug),
	}
	ln := &boundedListener{Listener: l.sockets.TCP, conns: l.conns, bounds: l.cfg.bounds()}
	l.wg.Go(func() {
		if err := l.server.ServeTLS(ln, "", ""); err != nil && !errors.Is(err, http.ErrServerClosed) {
			l.cfg.Logger.Error("https listener", "addr", l.sockets.Addr(), "err", err)
		}
	})
	l.cfg.Logger.Info("listening", "addr", l.sockets.Addr(), "proto", "https")
}

func (l *httpsListener) stop() {
	close(l.stopping)
	ctx, cancel := context.WithTimeout(context.Background(), dohStopWait)
	defer cancel()
	l.server.Shutdown(ctx)
	// Close the TCP connections first: closing a TLS connection sends an
	// alert, which waits behind a write stalled on a slow client.
	l.conns.closeAll()
	l.server.Close()
	l.wg.Wait()
}

// ServeHTTP answers one DNS over HTTPS request.
func (l *httpsListener) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	// The wait for a late answer follows the handler, which a reload
	// swaps: the write deadline moves with it. Both HTTP/1 and HTTP/2
	// support this; should a transport not, the server's WriteTimeout
	// stays.
	bound := l.lateBound()
	if d := l.cfg.writeTimeout() + bound; d != l.server.WriteTimeout {
		// Each request got the server's WriteTimeout when it came in;
		// setting it again costs HTTP/2 a message to the connection's
		// loop and a new timer, a few percent of a request.
		http.NewResponseController(w).SetWriteDeadline(time.Now().Add(d))
	}
	if r.URL.Path != l.scope().Path() {
		http.NotFound(w, r)
		return
	}
	req, release, status, err := l.admit(w, r)
	if err != nil {
		refuse(w, r, status, err)
		return
	}
	defer release()
	client, _ := netip.ParseAddrPort(r.RemoteAddr)
	client = netip.AddrPortFrom(client.Addr().Unmap(), client.Port())
	late := &lateAnswer{c: make(chan []byte, 1)}
	t := query.Transport{TCP: true, IPv6: client.Addr().Is6(), Late: late, Client: client}
	if a, ok := r.Context().Value(http.LocalAddrContextKey).(net.Addr); ok {
		t.Server = addrPort(a)
	}
	resp := l.cfg.serve(req, t, nil)
	if resp == nil {
		if !query.Pending(req) {
			http.Error(w, "not a DNS query", http.StatusBadRequest)
			return
		}
		if resp = l.waitLate(r.Context(), late, bound); resp == nil {
			if r.Context().Err() != nil {
				return // the client left
			}
			resp = serverFailure(req)
		}
	}
	h := w.Header()
	h["Content-Type"] = dohContentType // shared: nothing writes to it
	h["Cache-Control"] = []string{"max-age=" + strconv.FormatUint(uint64(cacheAge(resp)), 10)}
	h["Content-Length"] = []string{strconv.Itoa(len(resp))}
	w.WriteHeader(http.StatusOK)
	w.Write(resp)
}

func (l *httpsListener) scope() *Scope {
	if l.cfg.Scope == nil {
		return nil
	}
	return l.cfg.Scope.Load()
}

// lateBound is how long a request waits for a late answer: the longest
// bound of the current handler and the blocks' own, and a grace.
func (l *httpsListener) lateBound() time.Duration {
	return l.scope().LateBound(l.cfg.Handler.Load()) + dohLateGrace
}

// waitLate waits for a forwarded answer: nil when the client leaves, the
// listener stops, or bound passes.
func (l *httpsListener) waitLate(ctx context.Context, late *lateAnswer, bound time.Duration) []byte {
	timer := time.NewTimer(bound)
	defer timer.Stop()
	select {
	case b := <-late.c:
		return b
	case <-ctx.Done():
	case <-l.stopping:
	case <-timer.C:
	}
	return nil
}

// lateAnswer receives the forwarded answer of one DNS over HTTPS request.
// A second answer, or one after the request gave up, is dropped.
type lateAnswer struct{ c chan []byte }

func (a *lateAnswer) WriteLate(resp []byte, _ netip.AddrPort) {
	select {
	case a.c <- bytes.Clone(resp):
	default:
	}
}

// cacheAge is the Cache-Control max-age of a response (RFC 8484 section
// 5.1): the smallest TTL of its records, and of the SOA minimum for a
// negative answer; 0 when it holds no record or does not parse. It reads
// the wire bytes in place: unpacking the answer into records for this
// alone was a sixth of the handler's CPU.
func cacheAge(resp []byte) uint32 {
	if len(resp) < headerLength {
		return 0
	}
	off := headerLength
	for range binary.BigEndian.Uint16(resp[4:]) { // the questions
		if off = skipName(resp, off); off < 0 || off+4 > len(resp) {
			return 0
		}
		off += 4
	}
	records := int(binary.BigEndian.Uint16(resp[6:])) + int(binary.BigEndian.Uint16(resp[8:])) + int(binary.BigEndian.Uint16(resp[10:]))
	age, seen := uint32(0), false
	see := func(ttl uint32) {
		if !seen || ttl < age {
			age, seen = ttl, true
		}
	}
	for range records {
		if off = skipName(resp, off); off < 0 || off+10 > len(resp) {
			return 0
		}
		rrtype, ttl := binary.BigEndian.Uint16(resp[off:]), binary.BigEndian.Uint32(resp[off+4:])
		end := off + 10 + int(binary.BigEndian.Uint16(resp[off+8:]))
		if end > len(resp) {
			return 0
		}
		switch rrtype {
		case dns.TypeOPT: // not a record: its TTL field holds EDNS flags
		case dns.TypeSOA:
			if end-off-10 < 22 { // two names and five numbers
				return 0
			}
			see(ttl)
			see(binary.BigEndian.Uint32(resp[end-4:])) // the minimum ends the data
		default:
			see(ttl)
		}
		off = end
	}
	return age
}

// serverFailure answers req with SERVFAIL when no forwarded answer came.
func serverFailure(req []byte) []byte {
	m := new(dns.Msg)
	if m.Unpack(req) != nil {
		m = &dns.Msg{MsgHdr: dns.MsgHdr{Id: uint16(req[0])<<8 | uint16(req[1])}}
	}
	r := new(dns.Msg)
	r.SetRcode(m, dns.RcodeServerFailure)
	b, _ := r.Pack()
	return b
}

// boundedListener applies the connection bounds (conns.go), as the TCP
// listener does, and tracks the connections so stopping can close them.
type boundedListener struct {
	net.Listener
	conns  *connSet
	bounds connBounds
}

func (l *boundedListener) Accept() (net.Conn, error) {
	for {
		c, err := l.Listener.Accept()
		if err != nil {
			return nil, err
		}
		if s := l.conns.add(c, l.bounds); s != nil {
			return &trackedConn{Conn: c, conns: l.conns, state: s}, nil
		}
		c.Close()
	}
}

// trackedConn marks its connection active when it reads, and leaves its
// connSet when closed.
type trackedConn struct {
	net.Conn
	conns *connSet
	state *trackedConnState
	once  sync.Once
}

func (c *trackedConn) Read(b []byte) (int, error) {
	n, err := c.Conn.Read(b)
	if n > 0 {
		c.conns.touch(c.state)
	}
	return n, err
}

func (c *trackedConn) Close() error {
	c.once.Do(func() { c.conns.remove(c.state) })
	return c.Conn.Close()
}
