package forward

import (
	"context"
	"crypto/tls"
	"errors"
	"log/slog"
	"math/rand/v2"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/miekg/dns"

	"github.com/shardns/shardns/internal/ticker"
)

// Errors the caller maps to rcodes: ErrOverloaded → REFUSED (shed load),
// ErrNoUpstream → SERVFAIL.
var (
	ErrOverloaded = errors.New("forward: too many queries in flight")
	ErrNoUpstream = errors.New("forward: no upstream answered")
)

// Config configures a Forwarder.
type Config struct {
	// Upstreams are host:port of plain DNS upstreams, tls://host:port
	// of DNS over TLS ones and https://host:port/path of DNS over HTTPS
	// ones (ParseUpstreams writes them so).
	Upstreams     []string
	Policy        string        // random | round_robin | sequential
	Timeout       time.Duration // read timeout of one attempt
	MaxConcurrent int           // queries in flight; more are refused
	HealthCheck   time.Duration // probe interval of upstreams marked down
	MaxFails      int           // consecutive failures that mark an upstream down
	Logger        *slog.Logger
	// TLS is the client configuration of the tls:// and https://
	// upstreams (LoadTLS);
	// nil: the system's roots, and each upstream's IP as its name.
	TLS *tls.Config
	// MaxIdleConns bounds the open connections kept per upstream between
	// queries (TLS, TCP to plain ones, HTTP/1.1 to DoH ones); 0: no
	// bound.
	MaxIdleConns int
	// Expire closes a connection kept open once it has been idle this
	// long; 0 keeps none.
	Expire time.Duration
	// MaxAge replaces a connection kept open once it has been open this
	// long, however busy; 0: no bound (CoreDNS's max_age). DoH
	// upstreams' connections have none.
	MaxAge time.Duration
	// ForceTCP asks plain upstreams over TCP, on connections kept open,
	// whatever transport the question came over (force_tcp). It wins
	// over PreferUDP, as in CoreDNS.
	ForceTCP bool
	// PreferUDP asks plain upstreams over UDP even for a question that
	// came over TCP (prefer_udp); a truncated answer is asked again over
	// TCP. Without either, a question that came over TCP goes over TCP.
	PreferUDP bool
	// Failover are the rcodes on which the next upstream is asked as if
	// this one had failed (failover); from the last one, its answer is
	// the answer. They do not count as failures.
	Failover []int
	// OnResult observes every attempt (upstream, rcode or error), for
	// metrics. upstream is the address without its tls:// or https://
	// prefix and path, as CoreDNS labels it.
	OnResult func(upstream string, rcode int, err error, took time.Duration)
	// OnConn observes each connection taken for a query over a stream:
	// reused or newly opened, by proto "tcp", "tcp-tls" (tls://) or
	// "https" (https://).
	OnConn func(upstream, proto string, reused bool)
}

// Forwarder sends questions upstream. Its health-check goroutine is
// started by New and stopped by Close.
type Forwarder struct {
	cfg       Config
	upstreams []*upstream
	inflight  atomic.Int64
	pending   sync.WaitGroup // queries in flight, for Drain
	next      atomic.Uint32  // round_robin position
	sick      chan struct{}  // an upstream was marked down: the health checks start
	stop      chan struct{}
	wg        sync.WaitGroup
}

type upstream struct {
	addr string // host:port
	tls  bool   // DNS over TLS
	// conns are the connections kept open: TLS ones to a tls://
	// upstream, TCP ones to a plain one; nil for a DoH upstream.
	conns *connPool
	// doh asks a DNS over HTTPS upstream, which is asked nothing else.
	doh   *dohClient
	fails atomic.Int32
	down  atomic.Bool
}

// name is the upstream as configured, for logs.
func (u *upstream) name() string {
	if u.doh != nil {
		return u.doh.url
	}
	if u.tls {
		return tlsScheme + u.addr
	}
	return u.addr
}

// New returns a running Forwarder.
func New(cfg Config) *Forwarder {
	f := &Forwarder{cfg: cfg, sick: make(chan struct{}, 1), stop: make(chan struct{})}
	base := cfg.TLS
	if base == nil {
		base = &tls.Config{MinVersion: tls.VersionTLS12, ClientSessionCache: tls.NewLRUClientSessionCache(len(cfg.Upstreams))}
	}
	for _, a := range cfg.Upstreams {
		f.upstreams = append(f.upstreams, newUpstream(a, base, cfg))
	}
	f.wg.Go(f.healthLoop)
	return f
}

// newUpstream sets up the upstream a, as ParseUpstreams writes it, with
// the connections it is asked on.
func newUpstream(a string, base *tls.Config, cfg Config) *upstream {
	limits := poolLimits{expire: cfg.Expire, maxAge: cfg.MaxAge, maxIdle: cfg.MaxIdleConns}
	observe := func(addr, proto string) func(bool) {
		return func(reused bool) {
			if cfg.OnConn != nil {
				cfg.OnConn(addr, proto, reused)
			}
		}
	}
	if strings.HasPrefix(a, httpsScheme) {
		addr := dohAddr(a)
		return &upstream{addr: addr, doh: newDoH(a, base, limits, observe(addr, "https"))}
	}
	addr, isTLS := strings.CutPrefix(a, tlsScheme)
	if isTLS {
		return &upstream{addr: addr, tls: true, conns: newPool(addr, base, limits, observe(addr, "tcp-tls"))}
	}
	return &upstream{addr: addr, conns: newPool(addr, nil, limits, observe(addr, "tcp"))}
}

// Close stops the health checks and closes the connections kept open.
func (f *Forwarder) Close() {
	close(f.stop)
	f.wg.Wait()
	for _, u := range f.upstreams {
		if u.doh != nil {
			u.doh.close()
		} else {
			u.conns.close()
		}
	}
}

// Acquire reserves a slot for one query in flight; the caller must call
// Release when done. It fails when MaxConcurrent are in flight.
func (f *Forwarder) Acquire() error {
	if f.inflight.Add(1) > int64(f.cfg.MaxConcurrent) {
		f.inflight.Add(-1)
		return ErrOverloaded
	}
	f.pending.Add(1)
	return nil
}

// Release frees a slot taken by Acquire.
func (f *Forwarder) Release() {
	f.inflight.Add(-1)
	f.pending.Done()
}

// Drain waits until no query is in flight, or timeout passes.
func (f *Forwarder) Drain(timeout time.Duration) {
	done := make(chan struct{})
	go func() {
		f.pending.Wait()
		close(done)
	}()
	select {
	case <-done:
	case <-time.After(timeout):
	}
}

// Exchange asks the upstreams in policy order until one answers, as
// for a question that came over UDP.
func (f *Forwarder) Exchange(ctx context.Context, req *dns.Msg) (*dns.Msg, error) {
	return f.ExchangeFor(ctx, req, false)
}

// ExchangeFor asks the upstreams in policy order until one answers, or
// one answers a Failover rcode and none is left to ask. overTCP says the
// question came over TCP: without PreferUDP, plain upstreams are asked
// over TCP too, as CoreDNS asks them over the client's transport. The
// request is sent with a fresh random ID; the reply carries req's ID.
func (f *Forwarder) ExchangeFor(ctx context.Context, req *dns.Msg, overTCP bool) (*dns.Msg, error) {
	q := req.Copy()
	q.Id = dns.Id()
	list := f.order()
	var last *dns.Msg // the latest answer passed over for a Failover rcode
	for i, u := range list {
		if ctx.Err() != nil {
			break
		}
		start := time.Now()
		r, err := f.exchangeOne(ctx, u, q, overTCP)
		if f.cfg.OnResult != nil {
			rc := -1
			if r != nil {
				rc = r.Rcode
			}
			f.cfg.OnResult(u.addr, rc, err, time.Since(start))
		}
		if err != nil {
			f.failed(u, err)
			continue
		}
		u.fails.Store(0)
		if i < len(list)-1 && slices.Contains(f.cfg.Failover, r.Rcode) {
			last = r
			continue
		}
		r.Id = req.Id
		return r, nil
	}
	if last != nil {
		last.Id = req.Id
		return last, nil
	}
	return nil, ErrNoUpstream
}

// exchangeOne asks one upstream: over HTTPS, over TLS or TCP on a
// connection kept open, or over UDP, and again over TCP when the answer
// is truncated. force_tcp and prefer_udp change only plain upstreams.
func (f *Forwarder) exchangeOne(ctx context.Context, u *upstream, q *dns.Msg, overTCP bool) (*dns.Msg, error) {
	if u.doh != nil {
		return u.doh.exchange(ctx, q, f.cfg.Timeout)
	}
	if u.tls || f.cfg.ForceTCP || overTCP && !f.cfg.PreferUDP {
		return u.conns.exchange(ctx, q, f.cfg.Timeout)
	}
	c := &dns.Client{Net: "udp", Timeout: f.cfg.Timeout, UDPSize: dns.MaxMsgSize}
	r, _, err := c.ExchangeContext(ctx, q, u.addr)
	if err == nil && r.Truncated {
		return u.conns.exchange(ctx, q, f.cfg.Timeout)
	}
	return r, err
}

func (f *Forwarder) failed(u *upstream, err error) {
	if int(u.fails.Add(1)) >= f.cfg.MaxFails && !u.down.Swap(true) {
		f.cfg.Logger.Warn("upstream marked down", "upstream", u.name(), "err", err)
		select {
		case f.sick <- struct{}{}:
		default:
		}
	}
}

// order lists the upstreams to try: healthy ones in policy order, then the
// ones marked down (better a slow answer than none when all are down).
func (f *Forwarder) order() []*upstream {
	n := len(f.upstreams)
	list := make([]*upstream, 0, n)
	start := 0
	switch f.cfg.Policy {
	case "round_robin":
		start = int(f.next.Add(1)) % n
	case "random":
		start = rand.IntN(n)
	}
	for i := range n {
		if u := f.upstreams[(start+i)%n]; !u.down.Load() {
			list = append(list, u)
		}
	}
	for i := range n {
		if u := f.upstreams[(start+i)%n]; u.down.Load() {
			list = append(list, u)
		}
	}
	if f.cfg.Policy == "random" && len(list) > 1 {
		healthy := 0
		for _, u := range list {
			if !u.down.Load() {
				healthy++
			}
		}
		rand.Shuffle(healthy, func(i, j int) { list[i], list[j] = list[j], list[i] })
	}
	return list
}

// healthLoop probes upstreams marked down every HealthCheck and puts
// them back when they answer. Healthy upstreams are checked by real
// traffic, so while none is down the loop sleeps: a ticker that found
// nothing to do twice a second was a fifth of the wakeups of an idle
// replica of three.
func (f *Forwarder) healthLoop() {
	ticker.WhileNeeded(f.stop, f.sick, f.cfg.HealthCheck, func() bool {
		for _, u := range f.upstreams {
			if u.down.Load() && f.probe(u) {
				u.fails.Store(0)
				u.down.Store(false)
				f.cfg.Logger.Info("upstream healthy again", "upstream", u.name())
			}
		}
		return f.Healthy() < len(f.upstreams)
	})
}

// probe asks ". IN NS" the way queries are asked (over TLS for a tls://
// upstream, so a certificate that fails keeps it down; over TCP with
// ForceTCP, as CoreDNS's health checks): any answer at all means the
// upstream is up.
func (f *Forwarder) probe(u *upstream) bool {
	m := new(dns.Msg)
	m.SetQuestion(".", dns.TypeNS)
	ctx, cancel := context.WithTimeout(context.Background(), f.cfg.Timeout)
	defer cancel()
	_, err := f.exchangeOne(ctx, u, m, false)
	return err == nil
}

// Healthy reports how many upstreams are not marked down.
func (f *Forwarder) Healthy() int {
	n := 0
	for _, u := range f.upstreams {
		if !u.down.Load() {
			n++
		}
	}
	return n
}
