package bench

import (
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/shardns/shardns/integration/harness"
)

// nodeTierRow is one window's measurement.
type nodeTierRow struct {
	nodes         int
	invalidations bool
	cpu, cpuMax   float64 // the replicas' CPU-seconds a second, together and the busiest's
	rss, rssMax   float64 // MB, together and the largest's
	cpuPer1k      float64 // CPU-seconds a second per 1,000 nodes beyond the run with none
	rssPer1k      float64 // MB per 1,000 nodes beyond the run with none
	polls         float64 // ring requests a second
	questions     float64 // questions a second
	unanswered    float64 // share of questions not answered or unserved
	changed       float64 // ZoneChanged messages a node received a second
	p50, p99      time.Duration
	hitRate       float64 // the simulated nodes' cache
	probeHit      float64 // a node-local process's owners' cache (-1: none)
	baselineHit   float64 // SHARDNS_NODE_BASELINE_BIN's (-1: none)
	churn         float64 // EndpointSlice updates a second
	busy          float64 // share of the machine's CPU in use
	simCPU        float64 // the simulating process's CPU-seconds a second
}

func (r nodeTierRow) String() string {
	return fmt.Sprintf("%d nodes, invalidations %t: replicas %.3f CPU-s/s (busiest %.3f), RSS %.0f MB (largest %.0f); "+
		"%.0f ring polls/s, %.0f questions/s (%.1f%% unanswered); %.2f invalidations/node/s, change→node p50 %v p99 %v; "+
		"hit rate: simulated nodes %.1f%%, node-local process %s, baseline %s; churn %.0f/s; machine %.0f%% busy, simulator %.2f CPU-s/s",
		r.nodes, r.invalidations, r.cpu, r.cpuMax, r.rss, r.rssMax, r.polls, r.questions, 100*r.unanswered,
		r.changed, r.p50.Round(time.Millisecond), r.p99.Round(time.Millisecond), 100*r.hitRate, percent(r.probeHit), percent(r.baselineHit), r.churn, 100*r.busy, r.simCPU)
}

// nodeTierBench is what a window measures: the replicas, the real
// node-local processes, the simulated nodes' counts and the churn.
type nodeTierBench struct {
	t      *testing.T
	rs     []*harness.Replica
	probes []*nodeLocalProbe
	cfg    *simConfig
	churn  *nodeChurn
}

// nodeTierStart is what a window starts from.
type nodeTierStart struct {
	at                time.Time
	cpu               []float64 // each replica's CPU-seconds
	self, busy, total float64
	churned           int64
	probed            probeWindow
}

// measure measures one window of d with n simulated nodes.
func (b *nodeTierBench) measure(n int, d time.Duration) nodeTierRow {
	t := b.t
	t.Helper()
	w := nodeTierStart{self: harness.CPUSeconds(t, os.Getpid()), churned: b.churn.done.Load()}
	for _, r := range b.rs {
		w.cpu = append(w.cpu, harness.CPUSeconds(t, r.Cmd.Process.Pid))
	}
	w.busy, w.total = machineCPU(t)
	b.cfg.stats.snapshot()
	w.probed, w.at = startProbeWindow(t, b.probes), time.Now()
	inv := b.cfg.invalidations.Load()
	profiles := b.profile(n, inv, d)
	time.Sleep(d)
	profiles.Wait()
	row := b.finish(w, n, inv)
	t.Logf("node tier: %s", row)
	return row
}

// profile keeps, with SHARDNS_PROFILE_DIR, each replica's CPU profile of
// the window there (cpu-nodetier-<nodes>-<on|off>-r<i>.pb.gz).
func (b *nodeTierBench) profile(n int, inv bool, d time.Duration) *sync.WaitGroup {
	var profiles sync.WaitGroup
	if dir := os.Getenv("SHARDNS_PROFILE_DIR"); dir != "" {
		mode := map[bool]string{true: "on", false: "off"}[inv]
		for i, r := range b.rs {
			name := filepath.Join(dir, fmt.Sprintf("cpu-nodetier-%d-%s-r%d.pb.gz", n, mode, i))
			profiles.Go(func() { keepCPUProfile(b.t, r, d, name) })
		}
	}
	return &profiles
}

// finish is the row of the window begun at w.
func (b *nodeTierBench) finish(w nodeTierStart, n int, inv bool) nodeTierRow {
	t := b.t
	s := b.cfg.stats.snapshot()
	rates, failed := w.probed.hitRates(t, b.probes)
	secs := time.Since(w.at).Seconds()
	row := nodeTierRow{nodes: n, invalidations: inv, churn: float64(b.churn.done.Load()-w.churned) / secs,
		simCPU: (harness.CPUSeconds(t, os.Getpid()) - w.self) / secs}
	busy, total := machineCPU(t)
	row.busy = (busy - w.busy) / (total - w.total)
	for i, r := range b.rs {
		c := (harness.CPUSeconds(t, r.Cmd.Process.Pid) - w.cpu[i]) / secs
		m, _ := procMemory(t, r.Cmd.Process.Pid)
		row.cpu, row.cpuMax = row.cpu+c, max(row.cpuMax, c)
		row.rss, row.rssMax = row.rss+m, max(row.rssMax, m)
	}
	row.polls, row.questions = float64(s.polls)/secs, float64(s.asked)/secs
	if s.asked > 0 {
		row.unanswered = max(0, 1-float64(s.answered)/float64(s.asked))
	}
	if n > 0 {
		row.changed = float64(s.changed) / secs / float64(n)
	}
	row.p50, row.p99, row.hitRate = s.quantile(0.5), s.quantile(0.99), s.hitRate()
	row.probeHit, row.baselineHit = rate(rates, "current"), rate(rates, "baseline")
	if failed > 0 || s.gaps > 0 || s.timeouts > 0 {
		t.Logf("node tier: %d nodes: %d questions to the node-local processes failed; simulated nodes: %d gaps in invalidations, %d questions timed out",
			n, failed, s.gaps, s.timeouts)
	}
	return row
}

// percent is a hit rate as a percentage, "–" for none (-1).
func percent(rate float64) string {
	if rate < 0 {
		return "–"
	}
	return fmt.Sprintf("%.1f%%", 100*rate)
}

// rate is rates[label], or -1.
func rate(rates map[string]float64, label string) float64 {
	if r, ok := rates[label]; ok {
		return r
	}
	return -1
}

// machineCPU is the machine's busy and total jiffies (/proc/stat).
func machineCPU(t *testing.T) (busy, total float64) {
	t.Helper()
	b, err := os.ReadFile("/proc/stat")
	if err != nil {
		t.Fatal(err)
	}
	line, _, _ := strings.Cut(string(b), "\n")
	for i, f := range strings.Fields(line)[1:] {
		v, _ := strconv.ParseFloat(f, 64)
		total += v
		if i != 3 && i != 4 { // idle, iowait
			busy += v
		}
	}
	return busy, total
}

// perThousand fills each row's cost per 1,000 nodes beyond the row with
// no node (the churn and the replicas' own upkeep).
func perThousand(rows []nodeTierRow) {
	var base *nodeTierRow
	for i := range rows {
		if rows[i].nodes == 0 {
			base = &rows[i]
		}
	}
	if base == nil {
		return
	}
	for i := range rows {
		if n := rows[i].nodes; n > 0 {
			rows[i].cpuPer1k = (rows[i].cpu - base.cpu) * 1000 / float64(n)
			rows[i].rssPer1k = (rows[i].rss - base.rss) * 1000 / float64(n)
		}
	}
}

// writeNodeTier writes rows as TSV to SHARDNS_NODE_TIER_OUT
// (bench-node-tier.tsv).
func writeNodeTier(t *testing.T, rows []nodeTierRow) {
	t.Helper()
	var b strings.Builder
	b.WriteString("nodes\tinvalidations\treplica_cpu\treplica_cpu_max\treplica_rss_mb\treplica_rss_max_mb\tcpu_per_1k_nodes\trss_mb_per_1k_nodes\t" +
		"ring_polls_per_s\tquestions_per_s\tunanswered\tinvalidations_per_node_s\tlatency_p50_ms\tlatency_p99_ms\thit_rate\tnodelocal_hit_rate\tbaseline_hit_rate\tchurn_per_s\tmachine_busy\n")
	for _, r := range rows {
		fmt.Fprintf(&b, "%d\t%t\t%.3f\t%.3f\t%.1f\t%.1f\t%.3f\t%.1f\t%.0f\t%.0f\t%.4f\t%.3f\t%.1f\t%.1f\t%.4f\t%.4f\t%.4f\t%.0f\t%.2f\n",
			r.nodes, r.invalidations, r.cpu, r.cpuMax, r.rss, r.rssMax, r.cpuPer1k, r.rssPer1k, r.polls, r.questions,
			r.unanswered, r.changed, harness.Millis(r.p50), harness.Millis(r.p99), r.hitRate, r.probeHit, r.baselineHit, r.churn, r.busy)
	}
	out := os.Getenv("SHARDNS_NODE_TIER_OUT")
	if out == "" {
		out = "bench-node-tier.tsv"
	}
	if err := os.WriteFile(out, []byte(b.String()), 0o644); err != nil {
		t.Fatal(err)
	}
	t.Logf("node tier: rows written to %s:\n%s", out, b.String())
}

// envInts reads a comma-separated list of integers from the environment.
func envInts(t *testing.T, name string, def []int) []int {
	t.Helper()
	v := os.Getenv(name)
	if v == "" {
		return def
	}
	var out []int
	for _, f := range strings.Split(v, ",") {
		n, err := strconv.Atoi(strings.TrimSpace(f))
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		out = append(out, n)
	}
	return out
}

func envDuration(t *testing.T, name string, def time.Duration) time.Duration {
	t.Helper()
	v := os.Getenv(name)
	if v == "" {
		return def
	}
	d, err := time.ParseDuration(v)
	if err != nil {
		t.Fatalf("%s: %v", name, err)
	}
	return d
}
