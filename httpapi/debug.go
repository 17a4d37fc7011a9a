package httpapi

import (
	"bytes"
	"encoding/json"
	"net"
	"net/http"
	"net/netip"
	"strconv"
	"sync"
	"time"
)

// The /debug/ endpoints tell what a replica knows of the whole cluster
// (every namespace, member and refused address) and what its process
// does (profiles): they are served to this host's clients — loopback,
// or an address of this host's own, as `shardns ring` and an operator on
// the node connect — and to the networks of http.debug, never to any pod
// that reaches :8080 or kube-dns:9153.

// ringTTL is how long one /debug/ring page is served again: computing it
// orders every zone's owners.
const ringTTL = time.Second

// debug serves h to allowed clients only, and 403 to the others.
func (s *Server) debug(h http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if !s.debugAllowed(r) {
			s.countRefused(r, "debug")
			http.Error(w, "403 forbidden: "+r.URL.Path+" is served only to clients on this host and in the networks of http.debug",
				http.StatusForbidden)
			return
		}
		h.ServeHTTP(w, r)
	})
}

// countRefused counts r refused for reason, under the server it reached.
func (s *Server) countRefused(r *http.Request, reason string) {
	if s.cfg.Counters == nil {
		return
	}
	server := "http://"
	if local, ok := r.Context().Value(http.LocalAddrContextKey).(net.Addr); ok {
		server += local.String()
	}
	s.cfg.Counters.Refused.WithLabelValues(server, reason).Inc()
}

// debugAllowed reports whether r's client is on this host or in a
// network of http.debug.
func (s *Server) debugAllowed(r *http.Request) bool {
	client, err := netip.ParseAddrPort(r.RemoteAddr)
	if err != nil {
		return false
	}
	addr := client.Addr().Unmap()
	if addr.IsLoopback() {
		return true
	}
	// A connection from one of this host's own addresses to itself has
	// that address at both ends; no other host can complete one.
	if local, ok := r.Context().Value(http.LocalAddrContextKey).(*net.TCPAddr); ok && local.AddrPort().Addr().Unmap() == addr {
		return true
	}
	if s.cfg.Debug == nil {
		return false
	}
	for _, p := range s.cfg.Debug() {
		if p.Contains(addr) {
			return true
		}
	}
	return false
}

// profiles serves h only while http.pprof is on, to allowed clients;
// otherwise the path does not exist. A profile or trace of N seconds may
// take N seconds more than any other request.
func (s *Server) profiles(h http.Handler) http.Handler {
	allowed := s.debug(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if sec, err := strconv.ParseFloat(r.FormValue("seconds"), 64); err == nil && sec > 0 && sec < 3600 {
			extra := time.Duration(sec * float64(time.Second))
			rc := http.NewResponseController(w)
			rc.SetReadDeadline(s.cfg.Now().Add(s.cfg.Limits.ReadTimeout + extra))
			rc.SetWriteDeadline(s.cfg.Now().Add(s.cfg.Limits.WriteTimeout + extra))
		}
		h.ServeHTTP(w, r)
	}))
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if s.cfg.Pprof == nil || !s.cfg.Pprof() {
			http.NotFound(w, r)
			return
		}
		allowed.ServeHTTP(w, r)
	})
}

// withDeadlines gives each request WriteTimeout to be answered.
func (s *Server) withDeadlines(h http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		http.NewResponseController(w).SetWriteDeadline(s.cfg.Now().Add(s.cfg.Limits.WriteTimeout))
		h.ServeHTTP(w, r)
	})
}

// ringCache holds the last /debug/ring page for ringTTL; requests
// arriving while it is computed wait for it and share it.
type ringCache struct {
	mu   sync.Mutex
	at   time.Time
	page []byte
}

func (s *Server) serveRing(w http.ResponseWriter, _ *http.Request) {
	w.Header().Set("Content-Type", "application/json")
	w.Write(s.ringPage())
}

// ringPage is the JSON of cfg.Ring, computed again once ringTTL passed.
func (s *Server) ringPage() []byte {
	c := &s.ring
	c.mu.Lock()
	defer c.mu.Unlock()
	now := s.cfg.Now()
	if c.page != nil && now.Sub(c.at) < ringTTL && !now.Before(c.at) {
		return c.page
	}
	var b bytes.Buffer
	json.NewEncoder(&b).Encode(s.cfg.Ring())
	c.at, c.page = now, b.Bytes()
	return c.page
}
