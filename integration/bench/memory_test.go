package bench

import (
	"fmt"
	"io"
	"math"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/shardns/shardns/integration/harness"
	"github.com/shardns/shardns/internal/testutil"
)

// TestShardedMemory is part of `make bench`: 10k services and 100k
// endpoints, replicationFactor 1, with 1, 2 and 3 replicas. For each
// replica it prints the records it holds, its RSS and what the Go heap
// holds live; the target is RSS ≤ 1.5/N of the one replica holding
// everything. With SHARDNS_PROFILE_DIR set, it writes each replica's heap
// profile there (go tool pprof -top FILE).
func TestShardedMemory(t *testing.T) {
	cp, client := harness.BenchControlPlane(t)
	start := time.Now()
	harness.GenerateCluster(t, client, 100, 10000, 10)
	t.Logf("generated 10000 services and 100000 endpoints in %v", time.Since(start).Round(time.Second))
	var rs []*harness.Replica
	var total float64        // records held by the one replica
	var single replicaMemory // its memory
	for i := range 3 {
		var seeds []string
		if i > 0 {
			seeds = []string{rs[0].Gossip}
		}
		rs = append(rs, harness.StartReplica(t, cp, harness.ReplicaOptions{Name: fmt.Sprintf("r%d", i), Seeds: seeds, RF: 1, Cluster: harness.FastGossip}))
		harness.Settled(t, rs, len(rs))
		// Zones lost to the newcomer are held for the handoff grace (5 s
		// here); once every record is held exactly once and each replica
		// has returned the memory that loading and dropping zones freed,
		// the replicas are in the state they serve in.
		testutil.Eventually(t, 90*time.Second, func() error {
			sum := 0.0
			for _, r := range rs {
				sum += harness.Scrape(t, r.HTTP, "shardns_records_held")
				if harness.Scrape(t, r.HTTP, "shardns_memory_return_pending") != 0 {
					return fmt.Errorf("%s has freed memory to return", r.HTTP)
				}
			}
			if i == 0 {
				total = sum
				if total == 0 {
					return fmt.Errorf("the first replica holds no record")
				}
			}
			if sum != total {
				return fmt.Errorf("replicas hold %.0f records, want %.0f", sum, total)
			}
			return nil
		})
		var worst replicaMemory
		for j, r := range rs {
			m := measureMemory(t, r, fmt.Sprintf("heap-%d-of-%d.pb.gz", j+1, len(rs)))
			worst.rss, worst.anon = max(worst.rss, m.rss), max(worst.anon, m.anon)
			t.Logf("%d replicas: %s holds %.0f records, RSS %.0f MB (%.0f MB anonymous), Go heap %.0f MB in use, "+
				"%s; %.1f CPU-seconds since it started",
				len(rs), r.HTTP, m.records, m.rss, m.anon, m.heapInUse, m.heap(), m.cpu)
		}
		if i == 0 {
			single = worst
			continue
		}
		for _, c := range []struct {
			what        string
			worst, base float64
		}{{"RSS", worst.rss, single.rss}, {"anonymous RSS", worst.anon, single.anon}} {
			limit := 1.5 * c.base / float64(len(rs))
			verdict := "met"
			if c.worst > limit {
				verdict = "missed"
			}
			t.Logf("%d replicas: largest %s %.0f MB, target ≤ 1.5/%d × %.0f MB = %.0f MB: %s",
				len(rs), c.what, c.worst, len(rs), c.base, limit, verdict)
		}
	}
}

// replicaMemory is one replica's memory, in MB.
type replicaMemory struct {
	records   float64
	rss       float64 // resident set, as the kernel counts it
	anon      float64 // its anonymous part: the process's own memory, without the mapped binary
	heapInUse float64 // heap spans in use, garbage not yet collected included
	// unreturned is heap memory free of spans and not yet returned to
	// the OS: still resident, unless the kernel never backed it.
	unreturned float64
	live       float64 // heap objects reachable after a forced collection
	spans      float64 // heap spans in use after it: live objects and the holes between them
	cpu        float64 // CPU-seconds the replica has used: its loads, as it serves no query here
	// runtime is what the Go runtime has mapped beside the heap: goroutine
	// stacks, span and GC metadata, profiling buckets, other. Not all of
	// it is resident: the part of RssAnon the heap does not explain is.
	runtime    float64
	goroutines float64
}

// measureMemory reads RSS first, undisturbed; then, from a replica that
// serves profiles (profiled), it fetches a heap profile with a forced
// collection, which leaves the live heap in the metrics, and keeps the
// profile in SHARDNS_PROFILE_DIR.
func measureMemory(t *testing.T, r *harness.Replica, profileName string) replicaMemory {
	t.Helper()
	m := replicaMemory{records: harness.Scrape(t, r.HTTP, "shardns_records_held")}
	m.rss, m.anon = procMemory(t, r.Cmd.Process.Pid)
	m.cpu = harness.CPUSeconds(t, r.Cmd.Process.Pid)
	page := harness.Samples(t, r.HTTP) // one page: the heap's and the runtime's figures of one moment
	read := func(metric string) float64 {
		v, ok := page[metric]
		if !ok {
			t.Fatalf("no %s in /metrics", metric)
		}
		return v
	}
	m.heapInUse = read("go_memstats_heap_inuse_bytes") / (1 << 20)
	m.unreturned = (read("go_memstats_heap_idle_bytes") - read("go_memstats_heap_released_bytes")) / (1 << 20)
	for _, metric := range []string{"go_memstats_stack_inuse_bytes", "go_memstats_mspan_inuse_bytes",
		"go_memstats_gc_sys_bytes", "go_memstats_buck_hash_sys_bytes", "go_memstats_other_sys_bytes"} {
		m.runtime += read(metric) / (1 << 20)
	}
	m.goroutines = read("go_goroutines")
	if !harness.Profiled() {
		m.live, m.spans = math.NaN(), math.NaN()
		return m
	}
	resp, err := http.Get("http://" + r.HTTP + "/debug/pprof/heap?gc=1")
	if err != nil {
		t.Fatal(err)
	}
	profile, err := io.ReadAll(resp.Body)
	resp.Body.Close()
	if err != nil || resp.StatusCode != http.StatusOK {
		t.Fatalf("heap profile of %s: %d %v", r.HTTP, resp.StatusCode, err)
	}
	m.live = harness.Scrape(t, r.HTTP, "go_memstats_heap_alloc_bytes") / (1 << 20)
	m.spans = harness.Scrape(t, r.HTTP, "go_memstats_heap_inuse_bytes") / (1 << 20)
	if err := os.WriteFile(filepath.Join(os.Getenv("SHARDNS_PROFILE_DIR"), profileName), profile, 0o644); err != nil {
		t.Fatal(err)
	}
	return m
}

// heap describes the live heap and the heap in use after a collection,
// which only a replica that serves profiles gives.
func (m replicaMemory) heap() string {
	if math.IsNaN(m.live) {
		return "live heap not read (SHARDNS_PROFILE_DIR reads it)"
	}
	return fmt.Sprintf("%.1f MB live, %.1f MB in use after a collection", m.live, m.spans)
}

// procMemory reads VmRSS and RssAnon of pid, in MB.
func procMemory(t *testing.T, pid int) (rss, anon float64) {
	t.Helper()
	rss, anon, err := readProcMemory(pid)
	if err != nil {
		t.Fatal(err)
	}
	return rss, anon
}

// readProcMemory is procMemory for a process that may be gone.
func readProcMemory(pid int) (rss, anon float64, err error) {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return 0, 0, err
	}
	for _, line := range strings.Split(string(b), "\n") {
		name, value, _ := strings.Cut(line, ":")
		kb, err := strconv.ParseFloat(strings.TrimSuffix(strings.TrimSpace(value), " kB"), 64)
		switch {
		case name == "VmRSS" && err == nil:
			rss = kb / 1024
		case name == "RssAnon" && err == nil:
			anon = kb / 1024
		}
	}
	if rss == 0 || anon == 0 {
		return 0, 0, fmt.Errorf("no VmRSS or RssAnon in /proc/%d/status", pid)
	}
	return rss, anon, nil
}
