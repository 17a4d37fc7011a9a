// Package httpapi serves the operational HTTP endpoints on one address:
// /health (liveness), /ready (readiness), /metrics (Prometheus),
// /debug/ring (zones and owners as JSON) and, when enabled, Go's runtime
// profiles under /debug/pprof/.
package httpapi

import (
	"encoding/json"
	"net"
	"net/http"
	"net/http/pprof"
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
}

// Server is the HTTP endpoint set.
type Server struct {
	cfg      Config
	srv      *http.Server
	lameduck atomic.Bool
}

// New returns a server for cfg; Serve starts it.
func New(cfg Config) *Server {
	s := &Server{cfg: cfg}
	mux := http.NewServeMux()
	mux.HandleFunc("GET /health", s.health)
	mux.HandleFunc("GET /ready", s.ready)
	// The page is sent uncompressed: it is about 20 KB, and a gzip
	// writer, which the handler pools between scrapes, holds about 1 MB
	// of the replica's heap (1.3 MB of RSS on an idle replica: 5% of it).
	mux.Handle("GET /metrics", promhttp.HandlerFor(cfg.Registry, promhttp.HandlerOpts{
		Registry: cfg.Registry, DisableCompression: true}))
	mux.HandleFunc("GET /debug/ring", s.ring)
	// The handlers are registered on this server's mux only: importing
	// net/http/pprof also registers them on http.DefaultServeMux, which
	// nothing here serves.
	mux.Handle("/debug/pprof/", s.profiles(http.HandlerFunc(pprof.Index)))
	mux.Handle("/debug/pprof/cmdline", s.profiles(http.HandlerFunc(pprof.Cmdline)))
	mux.Handle("/debug/pprof/profile", s.profiles(http.HandlerFunc(pprof.Profile)))
	mux.Handle("/debug/pprof/symbol", s.profiles(http.HandlerFunc(pprof.Symbol)))
	mux.Handle("/debug/pprof/trace", s.profiles(http.HandlerFunc(pprof.Trace)))
	s.srv = &http.Server{Handler: mux}
	return s
}

// profiles serves h only while http.pprof is on; otherwise the path does
// not exist.
func (s *Server) profiles(h http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if s.cfg.Pprof == nil || !s.cfg.Pprof() {
			http.NotFound(w, r)
			return
		}
		h.ServeHTTP(w, r)
	})
}

// NewMetrics returns a server of /metrics alone: a second address for
// scrapes, such as CoreDNS's :9153.
func NewMetrics(reg *prometheus.Registry) *Server {
	mux := http.NewServeMux()
	mux.Handle("GET /metrics", promhttp.HandlerFor(reg, promhttp.HandlerOpts{Registry: reg, DisableCompression: true}))
	return &Server{srv: &http.Server{Handler: mux}}
}

// Serve serves on l until Close; it returns http.ErrServerClosed then.
func (s *Server) Serve(l net.Listener) error { return s.srv.Serve(l) }

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

func (s *Server) ring(w http.ResponseWriter, _ *http.Request) {
	w.Header().Set("Content-Type", "application/json")
	json.NewEncoder(w).Encode(s.cfg.Ring())
}
