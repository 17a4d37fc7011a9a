package bench

import (
	"fmt"
	"os"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/shardns/shardns/integration/harness"
	"github.com/shardns/shardns/integration/kubeapi"
)

// TestPeakMemory is part of `make bench`: the most memory a replica holds
// at any moment (VmHWM), beside CoreDNS's on the same apiserver, once on
// an apiserver that does not shard watches and once on one that does.
// 20k services × 10 endpoints in 100 namespaces (SHARDNS_PEAK_SERVICES
// sets the count; SHARDNS_PEAK_MODES=unsharded or sharded runs one
// mode), 3 replicas with replicationFactor 1 started together
// (SHARDNS_PEAK_START=serial: one after another, each once the one
// before is ready), then three moments that make a replica list and
// build:
//
//   - start: the replicas' initial lists and the ring changes of their
//     joins;
//   - restart: the apiserver down for 15 s and back, under 1,000 verified
//     queries a second to the replicas, none of which may fail;
//   - ring change: a fourth replica joins, the others hand zones over.
//
// Each moment's peak is read and then reset (/proc/PID/clear_refs), so
// each is reported alone. The verdict compares the largest replica's
// peak through all three with CoreDNS's: ≤ 0.35 without sharded watches,
// ≤ 0.25 with them.
func TestPeakMemory(t *testing.T) {
	if os.Getenv("SHARDNS_BENCH") == "" {
		t.Skip("set SHARDNS_BENCH=1 (make bench)")
	}
	services := 20000
	if s := os.Getenv("SHARDNS_PEAK_SERVICES"); s != "" {
		var err error
		if services, err = strconv.Atoi(s); err != nil || services < 100 {
			t.Fatalf("SHARDNS_PEAK_SERVICES=%q: want a count of at least 100", s)
		}
	}
	var summary []string
	for _, c := range []struct {
		name   string
		api    kubeapi.Config
		target float64
	}{
		{"unsharded", kubeapi.Unsharded, 0.35},
		{"sharded", kubeapi.Sharded, 0.25},
	} {
		if modes := os.Getenv("SHARDNS_PEAK_MODES"); modes != "" && !slices.Contains(strings.Split(modes, ","), c.name) {
			continue
		}
		t.Run(c.name, func(t *testing.T) {
			summary = append(summary, peakRun(t, c.name, c.api, services, c.target))
		})
	}
	for _, line := range summary {
		t.Logf("peak memory: %s", line)
	}
}

// peakNamespaces and peakEndpoints shape the cluster: its services are
// spread over peakNamespaces, each with peakEndpoints endpoints.
const peakNamespaces, peakEndpoints = 100, 10

// peakPhases names the moments peakRun measures, in order.
var peakPhases = []string{"start", "restart", "ring change"}

// peakRun measures one apiserver mode and returns its summary line.
func peakRun(t *testing.T, mode string, api kubeapi.Config, services int, target float64) string {
	const namespaces, endpoints = peakNamespaces, peakEndpoints
	cp := kubeapi.StartWith(t, api)
	start := time.Now()
	for n := range namespaces {
		harness.CreateNamespace(t, cp.Client, fmt.Sprintf("bench%d", n), nil)
	}
	loadBenchServices(t, cp, 0, services, namespaces, endpoints)
	t.Logf("%s: generated %d services × %d endpoints in %v", mode, services, endpoints, time.Since(start).Round(time.Second))
	coredns := startCoreDNS(t, harness.BuildCoreDNS(t), cp.Kubeconfig)
	cluster := "gossip: fast\n  handoffGrace: 5s"
	var rs []*harness.Replica
	add := func() {
		var seeds []string
		if len(rs) > 0 {
			seeds = []string{rs[0].Gossip}
		}
		rs = append(rs, harness.StartReplica(t, cp, harness.ReplicaOptions{Name: fmt.Sprintf("r%d", len(rs)), Seeds: seeds, RF: 1, Cluster: cluster}))
	}
	last := fmt.Sprintf("svc%d.bench%d.svc.cluster.local.", services-1, (services-1)%namespaces)
	var table []phasePeaks
	// Started together, as a Deployment or a StatefulSet with parallel
	// pod management starts them; with SHARDNS_PEAK_START=serial each
	// once the one before is ready (ordered pod management), where the
	// first holds the whole cluster alone until the second joins.
	serial := os.Getenv("SHARDNS_PEAK_START") == "serial"
	for range 3 {
		add()
		if serial {
			harness.SettledWithin(t, rs, len(rs), 5*time.Minute)
		}
	}
	harness.SettledWithin(t, rs, len(rs), 5*time.Minute)
	settledIngest(t, coredns.addr, rs, last)
	table = append(table, readPeaks(t, coredns.pid, rs))

	// An endpoint's own name in each namespace: one A record, known here
	// (harness.CreateBenchService's addresses), whichever replica owns it.
	names := map[string]string{}
	for n := range namespaces {
		names[fmt.Sprintf("host-0.svc%d.bench%d.svc.cluster.local.", n, n)] = fmt.Sprintf("10.200.%d.%d", n/10, n%10*20+1)
	}
	p, asked, failed := restartUnderLoad(t, cp, coredns.pid, coredns.addr, rs, names, mode, services)
	table = append(table, p)
	last = fmt.Sprintf("svc%d.bench%d.svc.cluster.local.", services, services%namespaces)

	// The ring change under the same load, its failures counted apart:
	// they are the handoff's (cluster.handoffGrace), not the restart's.
	ring := startPacedLoad(func() []string { return harness.Addrs(rs[:3]) }, names, 1000)
	add()
	harness.SettledWithin(t, rs, len(rs), 5*time.Minute)
	settledIngest(t, coredns.addr, rs, last)
	table = append(table, readPeaks(t, coredns.pid, rs))
	ringAsked, ringFailed, ringExample, _ := ring.stop()
	t.Logf("%s: %d queries through the ring change, %d failed", mode, ringAsked, ringFailed)
	if ringFailed > 0 {
		t.Logf("%s: a query failed through the ring change: %s", mode, ringExample)
	}

	var largest, core float64
	for i, p := range table {
		largest, core = max(largest, p.largest()), max(core, p.coredns)
		t.Logf("%s: peak RSS through %s: replicas %s MB; CoreDNS %.0f MB; largest %.2f × CoreDNS's peak",
			mode, peakPhases[i], p.replicasString(), p.coredns, p.largest()/p.coredns)
	}
	verdict := "met"
	if largest/core > target {
		verdict = "missed"
	}
	return fmt.Sprintf("%s, %dk services × %d endpoints: largest replica's peak %.0f MB, CoreDNS's %.0f MB: %.2f × (target ≤ %.2f: %s); %d queries through the restart, %d failed",
		mode, services/1000, endpoints, largest, core, largest/core, target, verdict, asked, failed)
}

// restartUnderLoad stops the apiserver for 15 s and starts it again
// under 1,000 verified queries a second to rs, waits until a service made
// after it (svc<services>) answers everywhere, and returns the peaks
// through it and what the queries asked and how many failed.
func restartUnderLoad(t *testing.T, cp *kubeapi.ControlPlane, corePID int, coreAddr string, rs []*harness.Replica,
	names map[string]string, mode string, services int) (p phasePeaks, asked, failed int64) {
	t.Helper()
	const namespaces, endpoints = peakNamespaces, peakEndpoints
	l := startPacedLoad(func() []string { return harness.Addrs(rs) }, names, 1000)
	cp.StopAPIServer(t)
	time.Sleep(15 * time.Second) // the outage measured, not a wait for a condition
	cp.StartAPIServer(t)
	// A service made after the restart answers once every replica watches
	// again, past the lists the restart cost.
	harness.CreateBenchService(t, cp.Client, services, namespaces, endpoints)
	settledIngest(t, coreAddr, rs, fmt.Sprintf("svc%d.bench%d.svc.cluster.local.", services, services%namespaces))
	p = readPeaks(t, corePID, rs)
	asked, failed, example, rate := l.stop()
	if failed > 0 {
		t.Errorf("%s: %d of %d queries failed after a retry through the restart; e.g. %s", mode, failed, asked, example)
	}
	t.Logf("%s: %d queries (%.0f a second) through the restart, %d failed", mode, asked, rate, failed)
	return p, asked, failed
}

// phasePeaks is the peak RSS of each replica and of CoreDNS through one
// moment, in MB.
type phasePeaks struct {
	replicas []float64
	coredns  float64
}

func (p phasePeaks) largest() float64 {
	m := 0.0
	for _, v := range p.replicas {
		m = max(m, v)
	}
	return m
}

func (p phasePeaks) replicasString() string {
	var each []string
	for _, v := range p.replicas {
		each = append(each, fmt.Sprintf("%.0f", v))
	}
	return strings.Join(each, ", ")
}

// readPeaks reads the peak RSS of CoreDNS and of each replica, then
// resets it, so that the next reading covers the next moment alone.
func readPeaks(t *testing.T, coredns int, rs []*harness.Replica) phasePeaks {
	t.Helper()
	var p phasePeaks
	p.coredns = takePeak(t, coredns)
	for _, r := range rs {
		p.replicas = append(p.replicas, takePeak(t, r.Cmd.Process.Pid))
	}
	return p
}

// takePeak returns VmHWM of pid in MB and resets it to the current RSS
// (clear_refs 5, Linux 4.0+).
func takePeak(t *testing.T, pid int) float64 {
	t.Helper()
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		t.Fatal(err)
	}
	peak := -1.0
	for _, line := range strings.Split(string(b), "\n") {
		if value, ok := strings.CutPrefix(line, "VmHWM:"); ok {
			kb, err := strconv.ParseFloat(strings.TrimSuffix(strings.TrimSpace(value), " kB"), 64)
			if err == nil {
				peak = kb / 1024
			}
		}
	}
	if peak < 0 {
		t.Fatalf("no VmHWM in /proc/%d/status", pid)
	}
	if err := os.WriteFile(fmt.Sprintf("/proc/%d/clear_refs", pid), []byte("5"), 0); err != nil {
		t.Fatalf("resetting the peak RSS of %d: %v", pid, err)
	}
	return peak
}

// pacedLoad asks names at a steady rate, each query allowed one retry as
// resolvers do, and checks every answer.
type pacedLoad struct {
	done    chan struct{}
	wg      sync.WaitGroup
	began   time.Time
	asked   atomic.Int64
	failed  atomic.Int64
	mu      sync.Mutex
	example string
}

// startPacedLoad asks perSecond queries a second, in batches every 10 ms,
// of the replicas targets returns, in turn.
func startPacedLoad(targets func() []string, names map[string]string, perSecond int) *pacedLoad {
	l := &pacedLoad{done: make(chan struct{}), began: time.Now()}
	type question struct{ name, ip string }
	var qs []question
	for name, ip := range names {
		qs = append(qs, question{name, ip})
	}
	batch := max(1, perSecond/100)
	l.wg.Go(func() {
		tick := time.NewTicker(10 * time.Millisecond)
		defer tick.Stop()
		for i := 0; ; {
			select {
			case <-l.done:
				return
			case <-tick.C:
			}
			ts := targets()
			for range batch {
				q, addr := qs[i%len(qs)], ts[i%len(ts)]
				i++
				l.asked.Add(1)
				if err := harness.AnswerIs(addr, q.name, q.ip); err != nil {
					if err = harness.AnswerIs(addr, q.name, q.ip); err != nil {
						l.failed.Add(1)
						l.mu.Lock()
						l.example = err.Error()
						l.mu.Unlock()
					}
				}
			}
		}
	})
	return l
}

// stop ends the load and returns what it asked, what failed, an example
// failure and the rate it reached.
func (l *pacedLoad) stop() (asked, failed int64, example string, rate float64) {
	close(l.done)
	l.wg.Wait()
	l.mu.Lock()
	defer l.mu.Unlock()
	asked = l.asked.Load()
	return asked, l.failed.Load(), l.example, float64(asked) / time.Since(l.began).Seconds()
}
