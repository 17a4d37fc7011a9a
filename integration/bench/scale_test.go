package bench

import (
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/miekg/dns"

	"github.com/shardns/shardns/integration/harness"
	"github.com/shardns/shardns/integration/kubeapi"
	"github.com/shardns/shardns/internal/testutil"
)

// TestScaleCurve is part of `make bench`: how a cluster of replicas
// grows with the cluster it serves, beside one CoreDNS on the same
// apiserver. 100 namespaces, services of 10 endpoints each (30%
// headless), at the sizes of SHARDNS_SCALE (default 5k,20k,50k,100k);
// at each size CoreDNS alone, then N = 3 and N = 6 replicas
// (replicationFactor 1) started together, with sharded watches and
// without (the same apiserver restarted without ShardedListAndWatch).
// The services are written into etcd (loadBenchServices): through the
// API, 100k would take hours here.
//
// For each point it records the steady RSS (after the servers answer the
// newest service, have settled and SHARDNS_SCALE_SETTLE, 30s, has
// passed) and the peak RSS (VmHWM) of the largest replica, the time
// until every replica is ready (CoreDNS: until it answers the newest
// service), and the CPU-seconds spent until then and the handoffs are
// over. The rows go to SHARDNS_SCALE_OUT (default scale.tsv in the
// test's temporary directory, whose path is logged), which
// `go run ./scripts/scalecurve` draws. SHARDNS_SCALE_WATCHES=sharded (or
// unsharded) measures one kind of watches only, SHARDNS_SCALE_REPLICAS=6
// (or 3) one number of replicas.
func TestScaleCurve(t *testing.T) {
	if os.Getenv("SHARDNS_BENCH") == "" {
		t.Skip("set SHARDNS_BENCH=1 (make bench)")
	}
	cp := kubeapi.StartWith(t, scaleAPIServer(kubeapi.Sharded))
	sizes, err := parseScaleSizes(os.Getenv("SHARDNS_SCALE"))
	if err != nil {
		t.Fatalf("SHARDNS_SCALE: %v", err)
	}
	settle := 30 * time.Second
	if d := os.Getenv("SHARDNS_SCALE_SETTLE"); d != "" {
		if settle, err = time.ParseDuration(d); err != nil {
			t.Fatalf("SHARDNS_SCALE_SETTLE: %v", err)
		}
	}
	out := os.Getenv("SHARDNS_SCALE_OUT")
	if out == "" {
		out = filepath.Join(t.TempDir(), "scale.tsv")
	}
	tsv, err := os.Create(out)
	if err != nil {
		t.Fatal(err)
	}
	defer tsv.Close()
	fmt.Fprintln(tsv, scaleHeader)
	coredns := harness.BuildCoreDNS(t)
	const namespaces, endpoints = 100, 10
	for n := range namespaces {
		harness.CreateNamespace(t, cp.Client, fmt.Sprintf("bench%d", n), nil)
	}
	s := &scaleRun{t: t, cp: cp, settle: settle, kind: "sharded", namespaces: namespaces}
	made := 0
	for _, size := range sizes {
		start := time.Now()
		loadBenchServices(t, cp, made, size, namespaces, endpoints)
		t.Logf("scale: loaded services %d to %d (× %d endpoints) in %v", made, size, endpoints, time.Since(start).Round(time.Second))
		made = size
		s.last = fmt.Sprintf("svc%d.bench%d.svc.cluster.local.", size-1, (size-1)%namespaces)
		core := s.coreDNS(coredns)
		s.write(tsv, size, endpoints, core)
		// The kind the apiserver serves now first: one restart per size.
		kinds := watchKinds(os.Getenv("SHARDNS_SCALE_WATCHES"))
		if s.kind == "unsharded" {
			slices.Reverse(kinds)
		}
		for _, kind := range kinds {
			s.serve(kind)
			for _, n := range replicaCounts(os.Getenv("SHARDNS_SCALE_REPLICAS")) {
				p := s.replicas(n)
				s.write(tsv, size, endpoints, p)
				t.Logf("scale: %dk services, %d replicas, %s watches: largest replica peak %.2f × CoreDNS's peak, steady %.2f × CoreDNS's steady",
					size/1000, n, kind, p.peak/core.peak, p.steady/core.steady)
				if size == 100000 && n == 6 && kind == "sharded" {
					verdict := "met"
					if p.peak > 0.2*core.peak {
						verdict = "missed"
					}
					t.Logf("scale: 100k × 6 sharded: largest peak %.0f MB, target ≤ 0.2 × CoreDNS's %.0f MB = %.0f MB: %s",
						p.peak, core.peak, 0.2*core.peak, verdict)
				}
			}
		}
	}
	t.Logf("scale: rows in %s (go run ./scripts/scalecurve < %s > docs/scale-curve.svg)", out, out)
}

// scaleHeader names the columns of the bench's TSV rows; scalePoint
// writes them in this order. Memory in MB, times and CPU in seconds.
const scaleHeader = "services\tendpoints\tserver\twatch\treplicas\tsteady_rss_mb\tpeak_rss_mb\tready_s\tsync_cpu_s\tsync_cpu_total_s"

// scalePoint is one measured server or set of replicas: steady and peak
// are the largest replica's (each its own largest), syncCPU too, and
// syncTotal the sum over the replicas.
type scalePoint struct {
	server, watch       string
	replicas            int
	steady, peak, ready float64
	syncCPU, syncTotal  float64
	records             float64
}

// scaleRun is the control plane of the curve and what it serves now.
type scaleRun struct {
	t          *testing.T
	cp         *kubeapi.ControlPlane
	settle     time.Duration
	kind       string // the apiserver's watches: sharded or unsharded
	namespaces int
	last       string // the newest service's name
}

func (s *scaleRun) write(tsv *os.File, services, endpoints int, p scalePoint) {
	fmt.Fprintf(tsv, "%d\t%d\t%s\t%s\t%d\t%.1f\t%.1f\t%.1f\t%.2f\t%.2f\n", services, endpoints,
		p.server, p.watch, p.replicas, p.steady, p.peak, p.ready, p.syncCPU, p.syncTotal)
	s.t.Logf("scale: %dk × %d: %s, %s watches, %d replicas: steady RSS %.0f MB, peak %.0f MB (the largest's), ready in %.1f s, "+
		"%.1f CPU-seconds to sync (the largest's; %.1f in all), %.0f records",
		services/1000, endpoints, p.server, p.watch, p.replicas, p.steady, p.peak, p.ready, p.syncCPU, p.syncTotal, p.records)
}

// serve restarts the apiserver with the watches of kind, unless it
// serves them already.
func (s *scaleRun) serve(kind string) {
	if kind == s.kind {
		return
	}
	cfg := kubeapi.Sharded
	if kind == "unsharded" {
		cfg = kubeapi.Unsharded
	}
	start := time.Now()
	s.cp.RestartAPIServerWith(s.t, scaleAPIServer(cfg))
	s.kind = kind
	s.t.Logf("scale: apiserver restarted with %s watches in %v", kind, time.Since(start).Round(time.Second))
}

// coreDNS starts CoreDNS alone, measures it and stops it: its relists
// would otherwise weigh on the replicas' CPU when the apiserver restarts.
func (s *scaleRun) coreDNS(bin string) scalePoint {
	s.t.Helper()
	start := time.Now()
	c := startCoreDNS(s.t, bin, s.cp.Kubeconfig)
	testutil.Eventually(s.t, 20*time.Minute, func() error { return answers(c.addr, s.last) })
	p := scalePoint{server: "coredns", watch: "all", replicas: 1, ready: time.Since(start).Seconds()}
	p.syncCPU = harness.CPUSeconds(s.t, c.pid)
	p.syncTotal = p.syncCPU
	time.Sleep(s.settle) // what an operator reads once it has served a while
	p.steady, p.peak = harness.ResidentMB(s.t, c.pid)
	stopPID(c.pid)
	return p
}

// replicas starts n replicas at once, as a StatefulSet's first rollout
// does, measures them once they serve the cluster and stops them.
func (s *scaleRun) replicas(n int) scalePoint {
	t := s.t
	t.Helper()
	var rs []*harness.Replica
	started := make([]time.Time, n)
	for i := range n {
		var seeds []string
		if i > 0 {
			seeds = []string{rs[0].Gossip}
		}
		started[i] = time.Now()
		rs = append(rs, harness.StartReplica(t, s.cp, harness.ReplicaOptions{Name: fmt.Sprintf("r%d", i), Seeds: seeds, RF: 1, Cluster: harness.FastGossip}))
	}
	p := scalePoint{server: "shardns", watch: s.kind, replicas: n, ready: readyAfter(t, rs, started)}
	harness.Settled(t, rs, n)
	// settledIngest asks a CoreDNS too: r0 stands in for the one
	// stopped.
	settledIngest(t, rs[0].Addr, rs, s.last)
	want := 1.0
	if s.kind == "unsharded" {
		want = 0
	}
	for _, r := range rs {
		cpu := harness.CPUSeconds(t, r.Cmd.Process.Pid)
		p.syncCPU, p.syncTotal = max(p.syncCPU, cpu), p.syncTotal+cpu
		p.records += harness.Scrape(t, r.HTTP, "shardns_records_held")
		if got := harness.Scrape(t, r.HTTP, "shardns_kubernetes_sharded_watch"); got != want {
			t.Fatalf("%s: shardns_kubernetes_sharded_watch %v with %s watches", r.HTTP, got, s.kind)
		}
	}
	time.Sleep(s.settle)
	for _, r := range rs {
		steady, peak := harness.ResidentMB(t, r.Cmd.Process.Pid)
		p.steady, p.peak = max(p.steady, steady), max(p.peak, peak)
	}
	for _, r := range rs {
		r.Cmd.Process.Kill()
		<-r.Done
	}
	return p
}

// readyAfter waits until every replica's /ready is 200 and returns the
// longest time one took from its start, to the polling's resolution.
func readyAfter(t *testing.T, rs []*harness.Replica, started []time.Time) float64 {
	t.Helper()
	took := make([]time.Duration, len(rs))
	testutil.Eventually(t, 20*time.Minute, func() error {
		var waiting []string
		for i, r := range rs {
			if took[i] > 0 {
				continue
			}
			if harness.HTTPStatus(t, "http://"+r.HTTP+"/ready") == 200 {
				took[i] = time.Since(started[i])
				continue
			}
			waiting = append(waiting, r.HTTP)
		}
		if len(waiting) > 0 {
			return fmt.Errorf("not ready: %v", waiting)
		}
		return nil
	})
	longest := time.Duration(0)
	for _, d := range took {
		longest = max(longest, d)
	}
	return longest.Seconds()
}

// answers is nil once addr answers name with an address.
func answers(addr, name string) error {
	r, err := testutil.Exchange(addr, "udp", name, dns.TypeA)
	if err != nil {
		return err
	}
	if r.Rcode != dns.RcodeSuccess || len(r.Answer) == 0 {
		return fmt.Errorf("%s from %s: %s, %d answers", name, addr, dns.RcodeToString[r.Rcode], len(r.Answer))
	}
	return nil
}

// stopPID ends a server the test started, ahead of its cleanup.
func stopPID(pid int) {
	if p, err := os.FindProcess(pid); err == nil {
		p.Kill()
	}
}

// scaleAPIServer is cfg with a ClusterIP range for 100k services (70k
// ClusterIPs, 30% being headless): a /12. A second ServiceCIDR beside
// the harness's /16 made creation crawl once the /16 was full (9 a
// second past 65k services, on 1.37): allocators of several ranges are
// tried in turn, the full one among them.
func scaleAPIServer(cfg kubeapi.Config) kubeapi.Config {
	cfg.ServiceCIDRs = []string{"10.96.0.0/12", kubeapi.ServiceCIDRs[1]}
	return cfg
}

// replicaCounts reads SHARDNS_SCALE_REPLICAS: 3 or 6 keeps to one
// number of replicas; anything else measures both.
func replicaCounts(s string) []int {
	switch s {
	case "3":
		return []int{3}
	case "6":
		return []int{6}
	}
	return []int{3, 6}
}

// watchKinds reads SHARDNS_SCALE_WATCHES: sharded or unsharded keeps
// to one kind of watches; anything else measures both.
func watchKinds(s string) []string {
	if s == "sharded" || s == "unsharded" {
		return []string{s}
	}
	return []string{"sharded", "unsharded"}
}

// parseScaleSizes reads SHARDNS_SCALE: service counts separated by
// commas, each a number with an optional k (thousands), increasing.
// Empty is the whole curve.
func parseScaleSizes(s string) ([]int, error) {
	if strings.TrimSpace(s) == "" {
		s = "5k,20k,50k,100k"
	}
	var sizes []int
	for _, f := range strings.Split(s, ",") {
		f = strings.TrimSpace(f)
		mult := 1
		if v, ok := strings.CutSuffix(f, "k"); ok {
			f, mult = v, 1000
		}
		n, err := strconv.Atoi(f)
		if err != nil || n <= 0 {
			return nil, fmt.Errorf("%q is not a number of services (e.g. 20k)", f)
		}
		if len(sizes) > 0 && n*mult <= sizes[len(sizes)-1] {
			return nil, fmt.Errorf("sizes must increase: %d after %d", n*mult, sizes[len(sizes)-1])
		}
		sizes = append(sizes, n*mult)
	}
	return sizes, nil
}

func TestParseScaleSizes(t *testing.T) {
	for _, c := range []struct {
		in   string
		want []int
		err  bool
	}{
		{in: "", want: []int{5000, 20000, 50000, 100000}},
		{in: "5k, 20k", want: []int{5000, 20000}},
		{in: "1500,100k", want: []int{1500, 100000}},
		{in: "20k,5k", err: true},
		{in: "20k,20k", err: true},
		{in: "k", err: true},
		{in: "-5k", err: true},
		{in: "5m", err: true},
	} {
		got, err := parseScaleSizes(c.in)
		if (err != nil) != c.err || fmt.Sprint(got) != fmt.Sprint(c.want) && !c.err {
			t.Errorf("parseScaleSizes(%q) = %v, %v; want %v, error %t", c.in, got, err, c.want, c.err)
		}
	}
}
