package httpapi

import (
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
)

// A scraper that accepts gzip, as Prometheus does, gets the page as text:
// the page is small, and a pooled gzip writer would hold about 1 MB of
// every replica's heap.
func TestMetricsAreSentUncompressed(t *testing.T) {
	reg := prometheus.NewRegistry()
	queries := prometheus.NewCounter(prometheus.CounterOpts{Name: "shardns_test_queries_total", Help: "Queries."})
	reg.MustRegister(queries)
	queries.Add(3)
	s := New(Config{Registry: reg, Ready: func() bool { return true }, Ring: func() Ring { return Ring{} }})

	req := httptest.NewRequest(http.MethodGet, "/metrics", nil)
	req.Header.Set("Accept-Encoding", "gzip")
	rec := httptest.NewRecorder()
	s.srv.Handler.ServeHTTP(rec, req)

	if rec.Code != http.StatusOK {
		t.Fatalf("status %d, want 200", rec.Code)
	}
	if enc := rec.Header().Get("Content-Encoding"); enc != "" {
		t.Fatalf("Content-Encoding %q, want none", enc)
	}
	if body := rec.Body.String(); !strings.Contains(body, "shardns_test_queries_total 3") {
		t.Fatalf("page lacks the counter:\n%s", body)
	}
}
