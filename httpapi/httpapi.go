// Package httpapi serves the operational HTTP endpoints on one address:
// /health (liveness), /ready (readiness), /metrics (Prometheus) to every
// client, and /debug/ring (zones and owners as JSON), /debug/ring/view
// (the same drawn, live, in a browser) and, when enabled,
// Go's runtime profiles under /debug/pprof/ to clients on this host and
// the networks of http.debug only. Every server bounds its connections
// and the time a request may take (conns.go), so that requests that
// never finish hold neither memory nor the probes out.
package httpapi

import (
	"net"
	"net/http"
	"net/http/pprof"
	"net/netip"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"
)

// Ring describes members, zones and owners for /debug/ring.
type Ring struct {
	Self    string              `json:"self"`
	Members []Member            `json:"members"`
	Zones   map[string][]string `json:"zones"`  // zone key → owners
	Served  []string            `json:"served"` // zones this replica answers from its own state
	// Rejected lists the processes refused membership, gossip or the
	// remote port (docs/hardening.md, "Trust between replicas").
	Rejected []Rejection `json:"rejected,omitempty"`
	// Replication is cluster.replicationFactor: the first Replication
	// names of each zone's list own it, the first of them is asked
	// first (0: every member owns every zone).
	Replication int `json:"replication"`
	// Loading lists the zones this replica gained and still loads: its
	// queries go to the replicas that held them until they are complete.
	Loading []string `json:"loading,omitempty"`
	// Grace lists the zones this replica lost and still holds through
	// cluster.handoffGrace, answering the questions sent to it while
	// their new owners load them.
	Grace []string `json:"grace,omitempty"`
}

// Rejection counts the refused attempts from one address for one reason.
type Rejection struct {
	Addr   string    `json:"addr"`
	Name   string    `json:"name,omitempty"` // the node name it claimed
	Reason string    `json:"reason"`
	Count  uint64    `json:"count"`
	Last   time.Time `json:"last"`
}

// Member is one live replica.
type Member struct {
	Name   string `json:"name"`
	Remote string `json:"remote,omitempty"`
	Owner  bool   `json:"owner"` // false while it loads (or for node-local caches)
	// Down: its remote port refused a connection, so it owns nothing here
	// although gossip still lists it.
	Down bool `json:"down,omitempty"`
	// Pending: a replica that has not announced itself an owner yet; it
	// will once its sources have synced.
	Pending bool `json:"pending,omitempty"`
}

// Config is what the endpoints report on.
type Config struct {
	Registry *prometheus.Registry
	Ready    func() bool // every source synced and the node joined
	Ring     func() Ring
	// Pprof reports whether /debug/pprof/ is served (http.pprof). It is
	// asked on every request, so a reload turns profiles on and off
	// without restarting the server; nil serves none.
	Pprof func() bool
	// Debug are the networks, beyond this host, whose clients may read
	// /debug/ (http.debug); asked on every such request, so a reload
	// applies at once. nil: this host's clients only.
	Debug func() []netip.Prefix
	// Counters count connections closed to make room and requests timed
	// out; nil counts nowhere.
	Counters *Counters
	// Limits bound connections and requests; zero fields take
	// DefaultLimits's.
	Limits Limits
	// Now is the clock of the ring's cache and of the connections' ages;
	// nil is time.Now.
	Now func() time.Time
}

// Server is the HTTP endpoint set.
type Server struct {
	cfg      Config
	srv      *http.Server
	conns    *connSet
	ring     ringCache
	lameduck atomic.Bool
}

// New returns a server for cfg; Serve starts it.
func New(cfg Config) *Server {
	s := newServer(cfg)
	mux := http.NewServeMux()
	mux.HandleFunc("GET /health", s.health)
	mux.HandleFunc("GET /ready", s.ready)
	mux.Handle("GET /metrics", metricsHandler(cfg.Registry))
	mux.Handle("GET /debug/ring", s.debug(http.HandlerFunc(s.serveRing)))
	mux.Handle("GET /debug/ring/view", s.debug(http.HandlerFunc(s.serveRingView)))
	// The handlers are registered on this server's mux only: importing
	// net/http/pprof also registers them on http.DefaultServeMux, which
	// nothing here serves.
	mux.Handle("/debug/pprof/", s.profiles(http.HandlerFunc(pprof.Index)))
	mux.Handle("/debug/pprof/cmdline", s.profiles(http.HandlerFunc(pprof.Cmdline)))
	mux.Handle("/debug/pprof/profile", s.profiles(http.HandlerFunc(pprof.Profile)))
	mux.Handle("/debug/pprof/symbol", s.profiles(http.HandlerFunc(pprof.Symbol)))
	mux.Handle("/debug/pprof/trace", s.profiles(http.HandlerFunc(pprof.Trace)))
	mux.Handle("/", notFound("this address serves /health, /ready, /metrics, /debug/ring and /debug/ring/view to this host's clients"))
	s.srv.Handler = s.withDeadlines(mux)
	return s
}

// NewMetrics returns a server of /metrics alone: a second address for
// scrapes, such as CoreDNS's :9153, which every pod reaches. cfg's
// Registry, Counters, Limits and Now are used; nothing else is served.
func NewMetrics(cfg Config) *Server {
	s := newServer(Config{Registry: cfg.Registry, Counters: cfg.Counters, Limits: cfg.Limits, Now: cfg.Now})
	mux := http.NewServeMux()
	mux.Handle("GET /metrics", metricsHandler(cfg.Registry))
	mux.Handle("/", notFound("this address serves /metrics only"))
	s.srv.Handler = s.withDeadlines(mux)
	return s
}

func newServer(cfg Config) *Server {
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	cfg.Limits = cfg.Limits.withDefaults()
	s := &Server{cfg: cfg}
	s.srv = &http.Server{
		ReadHeaderTimeout: cfg.Limits.ReadHeaderTimeout,
		ReadTimeout:       cfg.Limits.ReadTimeout,
		// The write deadline is set per request (withDeadlines): a CPU
		// profile takes longer than any other answer, and pprof refuses
		// a duration over the server's WriteTimeout.
		IdleTimeout:    cfg.Limits.IdleTimeout,
		MaxHeaderBytes: cfg.Limits.MaxHeaderBytes,
		ConnState: func(c net.Conn, state http.ConnState) {
			if s.conns != nil {
				s.conns.changed(c, state)
			}
		},
	}
	return s
}

// metricsHandler serves reg's page. The page is sent uncompressed: it is
// about 20 KB, and a gzip writer, which the handler pools between
// scrapes, holds about 1 MB of the replica's heap (1.3 MB of RSS on an
// idle replica: 5% of it).
func metricsHandler(reg *prometheus.Registry) http.Handler {
	return promhttp.HandlerFor(reg, promhttp.HandlerOpts{Registry: reg, DisableCompression: true})
}

// notFound answers 404 with a body that says what the address serves.
func notFound(serves string) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		http.Error(w, "404 not found: "+serves, http.StatusNotFound)
	})
}

// Serve serves on l until Close; it returns http.ErrServerClosed then.
// Serve is called once.
func (s *Server) Serve(l net.Listener) error {
	s.conns = newConnSet(s.cfg.Limits, s.cfg.Counters.server("http://"+l.Addr().String()), s.cfg.Now)
	return s.srv.Serve(&boundedListener{Listener: l, set: s.conns})
}

// Close stops the server.
func (s *Server) Close() error { return s.srv.Close() }

// EnterLameduck makes /ready fail while the process finishes in-flight
// work, so load balancers stop sending new queries first.
func (s *Server) EnterLameduck() { s.lameduck.Store(true) }

func (s *Server) health(w http.ResponseWriter, _ *http.Request) {
	w.Write([]byte("OK"))
}

func (s *Server) ready(w http.ResponseWriter, _ *http.Request) {
	if s.lameduck.Load() {
		http.Error(w, "shutting down", http.StatusServiceUnavailable)
		return
	}
	if !s.cfg.Ready() {
		http.Error(w, "not ready: sources syncing", http.StatusServiceUnavailable)
		return
	}
	w.Write([]byte("OK"))
}
