package node

import (
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/shardns/shardns/config"
	"github.com/shardns/shardns/internal/testutil"
)

// get fetches http://addr/path and returns the status and body.
func get(addr, path string) (int, string, error) {
	resp, err := http.Get("http://" + addr + path)
	if err != nil {
		return 0, "", err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b), err
}

// A port of a running process's own, so that a second bind of it fails.
func takenPort(t *testing.T) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { l.Close() })
	return l.Addr().String()
}

// http.metricsListen serves /metrics, and only it, beside http.listen, as
// CoreDNS's prometheus plugin does on :9153; a reload moves it, and one
// whose address cannot be bound keeps the running one serving.
func TestMetricsListen(t *testing.T) {
	cfg := strings.Replace(fmt.Sprintf(watchedConfig, 5), `http: {listen: "127.0.0.1:0"}`,
		`http: {listen: "127.0.0.1:0", metricsListen: ["127.0.0.1:0"]}`, 1)
	n, path, _ := startWatched(t, cfg)
	addrs := n.MetricsAddrs()
	if len(addrs) != 1 {
		t.Fatalf("metrics addresses %v, want one", addrs)
	}
	status, body, err := get(addrs[0], "/metrics")
	if err != nil || status != http.StatusOK || !strings.Contains(body, "shardns_zones_served") {
		t.Fatalf("/metrics on %s: %d %v, %.200s", addrs[0], status, err, body)
	}
	for _, p := range []string{"/ready", "/debug/ring"} {
		if status, _, err := get(addrs[0], p); err != nil || status != http.StatusNotFound {
			t.Fatalf("%s on the metrics address: %d %v, want 404", p, status, err)
		}
	}
	if !strings.Contains(body, `shardns_http_evicted_total{reason="full",server="http://`+addrs[0]+`"}`) {
		t.Errorf("/metrics lacks the metrics address's connection bound:\n%s", body)
	}

	// Moved to 127.0.0.2: the old address stops serving.
	if err := os.WriteFile(path, []byte(strings.Replace(cfg, `metricsListen: ["127.0.0.1:0"]`, `metricsListen: ["127.0.0.2:0"]`, 1)), 0o644); err != nil {
		t.Fatal(err)
	}
	n.ReloadNow()
	testutil.Eventually(t, 10*time.Second, func() error {
		if a := n.MetricsAddrs(); len(a) != 1 || !strings.HasPrefix(a[0], "127.0.0.2:") {
			return fmt.Errorf("metrics addresses %v, want one on 127.0.0.2", a)
		}
		return nil
	})
	moved := n.MetricsAddrs()[0]
	if status, _, err := get(moved, "/metrics"); err != nil || status != http.StatusOK {
		t.Fatalf("/metrics on %s after the reload: %d %v", moved, status, err)
	}
	if _, _, err := get(addrs[0], "/metrics"); err == nil {
		t.Fatalf("%s still serves after the reload moved it", addrs[0])
	}

	// A taken port: the reload fails, the running address keeps serving.
	taken := takenPort(t)
	badPath := filepath.Join(filepath.Dir(path), "taken.yaml")
	if err := os.WriteFile(badPath, []byte(strings.Replace(cfg, `metricsListen: ["127.0.0.1:0"]`, `metricsListen: ["127.0.0.2:0", "`+taken+`"]`, 1)), 0o644); err != nil {
		t.Fatal(err)
	}
	bad, err := config.Load(badPath)
	if err != nil {
		t.Fatal(err)
	}
	if err := n.Reload(bad); err == nil || !strings.Contains(err.Error(), "http.metricsListen[1]") {
		t.Fatalf("reload onto a taken port: %v, want an error naming http.metricsListen[1]", err)
	}
	if status, _, err := get(moved, "/metrics"); err != nil || status != http.StatusOK {
		t.Fatalf("/metrics on %s after a failed reload: %d %v", moved, status, err)
	}
}
