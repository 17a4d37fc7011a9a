package node

import (
	"fmt"
	"io"
	"net/http"
	"os"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/shardns/shardns/internal/testutil"
)

// /debug/pprof/ exists only with http.pprof, and a reload turns it on
// without restarting the HTTP server.
func TestPprofFollowsConfig(t *testing.T) {
	n, path, _ := startWatched(t, fmt.Sprintf(watchedConfig, 5))
	heap := "http://" + n.HTTPAddr() + "/debug/pprof/heap?debug=1"
	get := func() (int, string, error) {
		resp, err := http.Get(heap)
		if err != nil {
			return 0, "", err
		}
		defer resp.Body.Close()
		body, err := io.ReadAll(resp.Body)
		return resp.StatusCode, string(body), err
	}
	if code, _, err := get(); err != nil || code != http.StatusNotFound {
		t.Fatalf("heap profile with http.pprof off: %d %v, want 404", code, err)
	}
	if rate := memProfileRate(); rate != 0 {
		t.Fatalf("allocations sampled every %d bytes with http.pprof off, want none", rate)
	}

	on := strings.Replace(fmt.Sprintf(watchedConfig, 5), `http: {listen: "127.0.0.1:0"}`,
		`http: {listen: "127.0.0.1:0", pprof: true}`, 1)
	if err := os.WriteFile(path, []byte(on), 0o644); err != nil {
		t.Fatal(err)
	}
	n.ReloadNow()
	testutil.Eventually(t, 10*time.Second, func() error {
		code, body, err := get()
		if err != nil {
			return err
		}
		if code != http.StatusOK || !strings.HasPrefix(body, "heap profile:") {
			return fmt.Errorf("heap profile after reload: %d %.40q", code, body)
		}
		if rate := memProfileRate(); rate != heapSampleRate {
			return fmt.Errorf("allocations sampled every %d bytes after reload, want %d", rate, heapSampleRate)
		}
		return nil
	})
}

// memProfileRate reads the heap sampling rate the nodes set.
func memProfileRate() int {
	sampling.Lock()
	defer sampling.Unlock()
	return runtime.MemProfileRate
}
