package httpapi

import (
	"context"
	"net"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
)

// ask serves one request for path from client (host:port) to s's
// handler, the connection's local address being local.
func ask(s *Server, path, client, local string) *httptest.ResponseRecorder {
	req := httptest.NewRequest(http.MethodGet, path, nil)
	req.RemoteAddr = client
	if local != "" {
		req = req.WithContext(context.WithValue(req.Context(), http.LocalAddrContextKey, net.TCPAddrFromAddrPort(netip.MustParseAddrPort(local))))
	}
	rec := httptest.NewRecorder()
	s.srv.Handler.ServeHTTP(rec, req)
	return rec
}

func testConfig() Config {
	return Config{Registry: prometheus.NewRegistry(), Ready: func() bool { return true },
		Ring: func() Ring { return Ring{Self: "a", Members: []Member{{Name: "a", Owner: true}}} }}
}

// /debug/ring and /debug/pprof/ are served to this host's clients and
// the networks of http.debug; anybody gets /health, /ready and /metrics.
func TestDebugOnlyToThisHostAndHTTPDebug(t *testing.T) {
	var nets atomic.Pointer[[]netip.Prefix]
	nets.Store(&[]netip.Prefix{})
	cfg := testConfig()
	cfg.Pprof = func() bool { return true }
	cfg.Debug = func() []netip.Prefix { return *nets.Load() }
	cfg.Counters = NewCounters(prometheus.NewRegistry())
	s := New(cfg)
	const node = "10.0.0.5:9254"
	refused := 0.0
	cases := []struct {
		name, path, client, local string
		nets                      []netip.Prefix
		want                      int
	}{
		{"loopback", "/debug/ring", "127.0.0.1:40000", "127.0.0.1:8080", nil, http.StatusOK},
		{"loopback v6", "/debug/ring", "[::1]:40000", "[::1]:8080", nil, http.StatusOK},
		{"the host's own address", "/debug/ring", "10.0.0.5:40000", node, nil, http.StatusOK},
		{"a pod", "/debug/ring", "10.244.1.7:40000", node, nil, http.StatusForbidden},
		{"a pod, profiles", "/debug/pprof/heap", "10.244.1.7:40000", node, nil, http.StatusForbidden},
		{"loopback, the ring's page", "/debug/ring/view", "127.0.0.1:40000", "127.0.0.1:8080", nil, http.StatusOK},
		{"a pod, the ring's page", "/debug/ring/view", "10.244.1.7:40000", node, nil, http.StatusForbidden},
		{"a pod in http.debug, the ring's page", "/debug/ring/view", "10.244.1.7:40000", node, []netip.Prefix{netip.MustParsePrefix("10.244.0.0/16")}, http.StatusOK},
		{"a pod in http.debug", "/debug/ring", "10.244.1.7:40000", node, []netip.Prefix{netip.MustParsePrefix("10.244.0.0/16")}, http.StatusOK},
		{"a pod outside http.debug", "/debug/ring", "10.245.1.7:40000", node, []netip.Prefix{netip.MustParsePrefix("10.244.0.0/16")}, http.StatusForbidden},
		{"everybody", "/debug/ring", "[2001:db8::7]:40000", "[2001:db8::1]:8080", []netip.Prefix{netip.MustParsePrefix("0.0.0.0/0"), netip.MustParsePrefix("::/0")}, http.StatusOK},
		{"a pod, health", "/health", "10.244.1.7:40000", node, nil, http.StatusOK},
		{"a pod, ready", "/ready", "10.244.1.7:40000", node, nil, http.StatusOK},
		{"a pod, metrics", "/metrics", "10.244.1.7:40000", node, nil, http.StatusOK},
		{"a pod, elsewhere", "/debug/vars", "10.244.1.7:40000", node, nil, http.StatusNotFound},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			nets.Store(&c.nets)
			rec := ask(s, c.path, c.client, c.local)
			if rec.Code != c.want {
				t.Fatalf("%s from %s: %d %q, want %d", c.path, c.client, rec.Code, rec.Body, c.want)
			}
			if c.want == http.StatusForbidden && !strings.Contains(rec.Body.String(), "http.debug") {
				t.Errorf("403 body %q does not say how to allow it", rec.Body)
			}
			if c.want == http.StatusForbidden {
				refused++
			}
			if got := (served{addr: node}).counter(cfg.Counters.Refused, "debug"); got != refused {
				t.Errorf("shardns_http_refused_total{reason=debug} on %s = %v, want %v", node, got, refused)
			}
		})
	}
}

// Profiles do not exist without http.pprof, even for this host.
func TestProfilesNeedPprof(t *testing.T) {
	s := New(testConfig())
	if rec := ask(s, "/debug/pprof/heap", "127.0.0.1:40000", "127.0.0.1:8080"); rec.Code != http.StatusNotFound {
		t.Errorf("/debug/pprof/heap without http.pprof: %d, want 404", rec.Code)
	}
}

// The metrics address serves /metrics and nothing else, to anybody.
func TestMetricsAddressServesMetricsOnly(t *testing.T) {
	cfg := testConfig()
	cfg.Pprof = func() bool { return true }
	s := NewMetrics(cfg)
	for path, want := range map[string]int{"/metrics": 200, "/debug/ring": 404, "/debug/pprof/heap": 404, "/health": 404, "/ready": 404} {
		rec := ask(s, path, "127.0.0.1:40000", "127.0.0.1:9153")
		if rec.Code != want {
			t.Errorf("%s on the metrics address: %d, want %d", path, rec.Code, want)
		}
		if want == 404 && !strings.Contains(rec.Body.String(), "/metrics only") {
			t.Errorf("%s: body %q does not say what the address serves", path, rec.Body)
		}
	}
}

// The ring page is computed once however many ask within a second, and
// again after.
func TestRingPageIsCached(t *testing.T) {
	var computed atomic.Int32
	now := time.Date(2026, 12, 3, 20, 0, 0, 0, time.UTC)
	cfg := testConfig()
	cfg.Ring = func() Ring {
		computed.Add(1)
		return Ring{Self: "a", Zones: map[string][]string{"shop.svc.cluster.local.": {"a"}}}
	}
	cfg.Now = func() time.Time { return now }
	s := New(cfg)
	for range 100 {
		rec := ask(s, "/debug/ring", "127.0.0.1:40000", "")
		if !strings.Contains(rec.Body.String(), `"shop.svc.cluster.local.":["a"]`) {
			t.Fatalf("ring page %q", rec.Body)
		}
	}
	if n := computed.Load(); n != 1 {
		t.Errorf("100 requests within a second computed the ring %d times, want 1", n)
	}
	now = now.Add(ringTTL)
	ask(s, "/debug/ring", "127.0.0.1:40000", "")
	if n := computed.Load(); n != 2 {
		t.Errorf("a request a second later computed the ring %d times in all, want 2", n)
	}
}

// A CPU profile longer than WriteTimeout is served: its duration is
// added to the request's deadlines.
func TestProfileOutlastsWriteTimeout(t *testing.T) {
	cfg := testConfig()
	cfg.Pprof = func() bool { return true }
	cfg.Limits = Limits{WriteTimeout: 200 * time.Millisecond, ReadTimeout: 200 * time.Millisecond}
	sv := serve(t, cfg)
	code, body, err := get(sv.addr, "/debug/pprof/profile?seconds=1")
	if err != nil || code != http.StatusOK || len(body) == 0 {
		t.Fatalf("a 1 s CPU profile with a 200 ms WriteTimeout: %d, %d bytes, %v", code, len(body), err)
	}
}
