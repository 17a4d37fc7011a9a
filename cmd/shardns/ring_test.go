package main

import (
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
)

// A replica that refuses /debug/ring to this client: `shardns ring` says
// why, not that the page is no JSON.
func TestRingRefused(t *testing.T) {
	const why = "403 forbidden: /debug/ring is served only to clients on this host and in the networks of http.debug"
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		http.Error(w, why, http.StatusForbidden)
	}))
	defer srv.Close()
	err := ring([]string{"--http", strings.TrimPrefix(srv.URL, "http://")})
	if err == nil || !strings.Contains(err.Error(), why) {
		t.Fatalf("shardns ring refused: %v, want an error saying %q", err, why)
	}
}
