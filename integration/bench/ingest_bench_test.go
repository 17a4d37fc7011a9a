package bench

import (
	"encoding/json"
	"fmt"
	"io"
	"math/rand/v2"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/miekg/dns"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/shardns/shardns/integration/harness"
	"github.com/shardns/shardns/integration/kubeapi"
	"github.com/shardns/shardns/internal/testutil"
)

// TestShardedIngest is part of `make bench`: replicas with sharded
// watches (replicationFactor 1) side by side with one CoreDNS on the same
// apiserver, which shards watches. 100 namespaces; 10k services of 10
// endpoints, then 20k.
//
//   - Memory: the largest replica's RSS as a share of CoreDNS's, each
//     measured once every server holds the cluster and a settling period
//     has passed: 3 replicas at 10k (target ≤ 0.45), 3 and 6 at 20k
//     (≤ 0.40, ≤ 0.25). SHARDNS_MEMORY=0 skips the measurements (the
//     cluster is still made, for the churn).
//   - Readiness: while each replica joins, those already serving stay
//     ready (asked every 100 ms until the zones they lost are released).
//   - Churn: 10 EndpointSlice updates a second across all namespaces for
//     SHARDNS_CHURN (10m; 0 skips it): the CPU-seconds and watch events
//     of one replica alone, then of each of 3 (target ≤ 1.5/3 of the
//     one's, events about 1/3), gossiping with the default timing. The
//     one replica churns for half of it before the three and half after
//     them, and its cost is the sum: the shared machine's speed drifts
//     (one replica alone has measured 19 and 32 CPU-seconds for the same
//     10 minutes, hours apart), and so the drift weighs on both alike.
func TestShardedIngest(t *testing.T) {
	cp, client := harness.BenchControlPlane(t)
	churn := 10 * time.Minute
	if d := os.Getenv("SHARDNS_CHURN"); d != "" {
		var err error
		if churn, err = time.ParseDuration(d); err != nil {
			t.Fatalf("SHARDNS_CHURN: %v", err)
		}
	}
	const namespaces, endpoints = 100, 10
	harness.GenerateCluster(t, client, namespaces, 10000, endpoints)
	coredns := startCoreDNS(t, harness.BuildCoreDNS(t), cp.Kubeconfig)
	var rs []*harness.Replica
	// The memory phases gossip with the tests' fast timing, so that each
	// replica joins and settles in a second; the churn with the default
	// one (gossip: lan), as deployed: the fast timing exchanges the whole
	// member list every 2 s and gossips every 50 ms, a cost of the tests
	// that the CPU measured here would otherwise include.
	cluster := "gossip: fast\n  handoffGrace: 5s"
	grow := func(n int) {
		for len(rs) < n {
			var seeds []string
			if len(rs) > 0 {
				seeds = []string{rs[0].Gossip}
			}
			serving := watchReadiness(rs)
			rs = append(rs, harness.StartReplica(t, cp, harness.ReplicaOptions{Name: fmt.Sprintf("r%d", len(rs)), Seeds: seeds, RF: 1, Cluster: cluster}))
			harness.Settled(t, rs, len(rs))
			// The replicas already serving re-list what they keep; they
			// must stay ready throughout, or a readiness probe would take
			// them out of the Service all at once.
			handedOver(t, rs)
			if asked, unready := serving.stop(); len(serving.replicas) > 0 {
				t.Logf("readiness: while r%d joined, the %d replicas already serving answered /ready %d times, %d of them not ready",
					len(rs)-1, len(serving.replicas), asked, unready)
				if unready > 0 {
					t.Errorf("replicas already serving turned unready %d times while r%d joined", unready, len(rs)-1)
				}
			}
			// What the newcomer took from announcing itself to serving
			// its share, against the grace its zones' old owners give it.
			r := rs[len(rs)-1]
			if n := harness.Scrape(t, r.HTTP, "shardns_cluster_gain_load_duration_seconds_count"); n > 0 {
				t.Logf("handoff: r%d (replica %d of %d) loaded the zones it gained in %.1f s",
					len(rs)-1, len(rs), len(rs), harness.Scrape(t, r.HTTP, "shardns_cluster_gain_load_duration_seconds_sum")/n)
			}
		}
	}
	grow(3)
	compare := func(services int, target float64) {
		t.Helper()
		if os.Getenv("SHARDNS_MEMORY") == "0" {
			return
		}
		last := fmt.Sprintf("svc%d.bench%d.svc.cluster.local.", services-1, (services-1)%namespaces)
		settledIngest(t, coredns.addr, rs, last)
		// What a server keeps once its lists are done and it has
		// rested for a while: the targets' reading.
		time.Sleep(30 * time.Second)
		core, coreAnon := procMemory(t, coredns.pid)
		largest, largestAnon, name := 0.0, 0.0, ""
		var each []string
		var biggest *harness.Replica
		for _, r := range rs {
			rss, anon := procMemory(t, r.Cmd.Process.Pid)
			each = append(each, fmt.Sprintf("%.0f (%.0f)", rss, anon))
			if rss > largest {
				largest, name, biggest = rss, r.HTTP, r
			}
			largestAnon = max(largestAnon, anon)
		}
		// Then, RSS read, what each holds live and in spans: a replica
		// that handed zones over beside one that only gained them.
		for i, r := range rs {
			profile := fmt.Sprintf("heap-%dk-%d-r%d.pb.gz", services/1000, len(rs), i)
			m := measureMemory(t, r, profile)
			largestMark := ""
			if r == biggest {
				largestMark = " (the largest)"
			}
			t.Logf("memory: r%d%s holds %.0f records; Go heap %.1f MB in use, %.1f MB free and not returned to the OS, %s; runtime %.1f MB mapped beside the heap (stacks of %.0f goroutines, metadata)",
				i, largestMark, m.records, m.heapInUse, m.unreturned, m.heap(), m.runtime, m.goroutines)
		}
		verdict := "met"
		if largest/core > target {
			verdict = "missed"
		}
		t.Logf("memory: %dk services × %d endpoints, %d replicas: RSS (anonymous) %s MB; CoreDNS %.0f (%.0f) MB; "+
			"largest %.0f MB (%s) = %.2f × CoreDNS's RSS, target ≤ %.2f: %s; largest anonymous %.2f × CoreDNS's",
			services/1000, endpoints, len(rs), strings.Join(each, ", "), core, coreAnon,
			largest, name, largest/core, target, verdict, largestAnon/coreAnon)
	}
	// inUse reads the servers once more after they have served a trickle
	// of questions for as long, as an operator reads servers in use. It
	// comes after the last of the readings above, which it would change:
	// what serving grows stays.
	inUse := func(services int) {
		t.Helper()
		if os.Getenv("SHARDNS_MEMORY") == "0" {
			return
		}
		serveFor(t, 30*time.Second, services, namespaces, append([]string{coredns.addr}, replicaAddrs(rs)...), rs)
		core, coreAnon := procMemory(t, coredns.pid)
		largest, largestAnon, each := 0.0, 0.0, []string(nil)
		for _, r := range rs {
			rss, anon := procMemory(t, r.Cmd.Process.Pid)
			each = append(each, fmt.Sprintf("%.0f (%.0f)", rss, anon))
			largest, largestAnon = max(largest, rss), max(largestAnon, anon)
		}
		t.Logf("memory in use: %dk services, %d replicas: RSS (anonymous) %s MB; CoreDNS %.0f (%.0f) MB; largest %.2f × CoreDNS's, anonymous %.2f",
			services/1000, len(rs), strings.Join(each, ", "), core, coreAnon, largest/core, largestAnon/coreAnon)
		// Then, RSS read, what serving grew: the heap between collections
		// (in use, against the live heap a profile's collection leaves)
		// and what questions left live, the owners' answers cached.
		for i, r := range rs {
			m := measureMemory(t, r, fmt.Sprintf("heap-%dk-%d-r%d-in-use.pb.gz", services/1000, len(rs), i))
			t.Logf("memory in use: r%d Go heap %.1f MB in use, %.1f MB free and not returned to the OS, %s; runtime %.1f MB mapped beside the heap",
				i, m.heapInUse, m.unreturned, m.heap(), m.runtime)
		}
	}
	compare(10000, 0.45)
	harness.GenerateServices(t, client, 10000, 20000, namespaces, endpoints)
	compare(20000, 0.40)
	if os.Getenv("SHARDNS_MEMORY") != "0" {
		grow(6)
	}
	compare(20000, 0.25)
	inUse(20000)
	if os.Getenv("SHARDNS_MEMORY") != "0" {
		leaveUnderLoad(t, cp, rs, cluster, namespaces)
	}

	if churn == 0 {
		return // SHARDNS_CHURN=0: memory only
	}
	// Churn: one replica alone, then three, each set started anew.
	cluster = "gossip: lan\n  handoffGrace: 5s"
	churnWith := func(n int, d time.Duration, phase string) []churnResult {
		for _, r := range rs {
			r.Cmd.Process.Kill()
		}
		rs = nil
		grow(n)
		settledIngest(t, coredns.addr, rs, "svc19999.bench99.svc.cluster.local.")
		return churnCost(t, client, rs, d, namespaces, phase)
	}
	before := churnWith(1, churn/2, "-before")[0]
	three := churnWith(3, churn, "")
	after := churnWith(1, churn-churn/2, "-after")[0]
	single := []churnResult{{before.cpu + after.cpu, before.events + after.events}}
	t.Logf("churn: 1 replica: %s (%s before the three, %s after)", single[0], before, after)
	for i, c := range three {
		verdict := "met"
		if c.cpu > 1.5/3*single[0].cpu {
			verdict = "missed"
		}
		t.Logf("churn: 3 replicas, r%d: %s; CPU %.2f × one replica's (target ≤ 0.50: %s), events %.2f × its",
			i, c, c.cpu/single[0].cpu, verdict, c.events/single[0].events)
	}
}

// leaveUnderLoad measures a replica leaving the ring of rs, which it
// joins last, as a scale-in does, with the deployed lameduck (5 s): the
// others stay, so it keeps its watches sharded (node watchEverything)
// and answers through its lameduck. Its RSS is read every 50 ms until it
// exits; the replicas staying answer a name of every namespace
// throughout, until they have loaded its zones, and none may fail.
func leaveUnderLoad(t *testing.T, cp *kubeapi.ControlPlane, rs []*harness.Replica, cluster string, namespaces int) {
	t.Helper()
	r := harness.StartReplica(t, cp, harness.ReplicaOptions{Name: fmt.Sprintf("r%d", len(rs)), Seeds: []string{rs[0].Gossip}, RF: 1, Cluster: cluster, Lameduck: 5 * time.Second})
	all := append(slices.Clone(rs), r)
	harness.Settled(t, all, len(all))
	handedOver(t, all)
	// An endpoint's own name in each namespace: one A record, known here
	// (harness.GenerateCluster's addresses), whichever replica owns it.
	names := map[string]string{}
	for n := range namespaces {
		names[fmt.Sprintf("host-0.svc%d.bench%d.svc.cluster.local.", n, n)] = fmt.Sprintf("10.200.%d.%d", n/10, n%10*20+1)
	}
	l := harness.StartLoad(func() []string { return harness.Addrs(rs) }, names)
	pid := r.Cmd.Process.Pid
	before, _ := procMemory(t, pid)
	peak := before
	start := time.Now()
	r.Cmd.Process.Signal(syscall.SIGTERM)
	tick := time.NewTicker(50 * time.Millisecond)
	for exited := false; !exited; {
		select {
		case <-r.Done:
			exited = true
		case <-tick.C:
			if rss, _, err := readProcMemory(pid); err == nil {
				peak = max(peak, rss)
			}
		}
	}
	tick.Stop()
	stopped := time.Since(start)
	harness.Settled(t, rs, len(rs))
	handedOver(t, rs)
	example := l.Stop()
	t.Logf("leaving: r%d (of %d) exited %.1f s after SIGTERM; RSS %.0f MB before, %.0f MB at most while it left",
		len(rs), len(all), stopped.Seconds(), before, peak)
	if l.Failed.Load() > 0 {
		t.Errorf("leaving: %d of %d queries to the replicas staying failed after a retry; e.g. %s", l.Failed.Load(), l.Asked.Load(), example)
	} else {
		t.Logf("leaving: %d queries to the replicas staying, none failed", l.Asked.Load())
	}
}

// keepCPUProfile writes r's CPU profile of the next d to file; a failure
// is logged, not fatal: the profile is for reading, not for the verdict.
func keepCPUProfile(t *testing.T, r *harness.Replica, d time.Duration, file string) {
	resp, err := http.Get(fmt.Sprintf("http://%s/debug/pprof/profile?seconds=%d", r.HTTP, int(d.Seconds())))
	if err != nil {
		t.Logf("CPU profile of %s: %v", r.HTTP, err)
		return
	}
	defer resp.Body.Close()
	profile, err := io.ReadAll(resp.Body)
	if err == nil && resp.StatusCode == http.StatusOK {
		err = os.WriteFile(file, profile, 0o644)
	}
	if err != nil || resp.StatusCode != http.StatusOK {
		t.Logf("CPU profile of %s: %d %v", r.HTTP, resp.StatusCode, err)
	}
}

// settledIngest waits until CoreDNS and every replica answer last, the
// replicas hold each record once between them, have released the zones
// they lost and have returned the memory their loads freed.
func settledIngest(t *testing.T, coredns string, rs []*harness.Replica, last string) {
	t.Helper()
	handedOver(t, rs)
	testutil.Eventually(t, 5*time.Minute, func() error {
		for _, addr := range append([]string{coredns}, harness.Addrs(rs)...) {
			r, err := testutil.Exchange(addr, "udp", last, dns.TypeA)
			if err != nil {
				return err
			}
			if r.Rcode != dns.RcodeSuccess || len(r.Answer) == 0 {
				return fmt.Errorf("%s from %s: %s", last, addr, dns.RcodeToString[r.Rcode])
			}
		}
		for _, r := range rs {
			// A handoff is over once the zones it took away are released
			// (handedOver) and the memory that freed is returned: its
			// cost is not the churn's.
			if harness.Scrape(t, r.HTTP, "shardns_memory_return_pending") != 0 {
				return fmt.Errorf("%s has freed memory to return", r.HTTP)
			}
		}
		return nil
	})
}

// handedOver waits until every replica has released the zones a ring
// change took from it: the end of its grace period, by which the replicas
// that lost zones have listed what they keep again.
func handedOver(t *testing.T, rs []*harness.Replica) {
	t.Helper()
	testutil.Eventually(t, 2*time.Minute, func() error {
		for _, r := range rs {
			if n := harness.Scrape(t, r.HTTP, "shardns_cluster_zones_in_grace"); n != 0 {
				return fmt.Errorf("%s still answers %.0f zones it lost", r.HTTP, n)
			}
		}
		return nil
	})
}

// readinessWatch asks replicas for /ready every 100 ms until stopped.
type readinessWatch struct {
	replicas []*harness.Replica
	done     chan struct{}
	wg       sync.WaitGroup
	asked    atomic.Int64
	unready  atomic.Int64
}

func watchReadiness(rs []*harness.Replica) *readinessWatch {
	w := &readinessWatch{replicas: slices.Clone(rs), done: make(chan struct{})}
	client := &http.Client{Timeout: time.Second}
	w.wg.Go(func() {
		tick := time.NewTicker(100 * time.Millisecond)
		defer tick.Stop()
		for {
			select {
			case <-w.done:
				return
			case <-tick.C:
			}
			for _, r := range w.replicas {
				resp, err := client.Get("http://" + r.HTTP + "/ready")
				if err != nil {
					continue // a slow answer is not a not-ready one
				}
				resp.Body.Close()
				w.asked.Add(1)
				if resp.StatusCode != http.StatusOK {
					w.unready.Add(1)
				}
			}
		}
	})
	return w
}

// stop ends the watch and returns how many answers it had, and how many
// of them were not ready.
func (w *readinessWatch) stop() (asked, unready int64) {
	close(w.done)
	w.wg.Wait()
	return w.asked.Load(), w.unready.Load()
}

// churnResult is what a replica spent on a churn.
type churnResult struct {
	cpu    float64 // CPU-seconds
	events float64 // EndpointSlice events its watches delivered
}

func (c churnResult) String() string {
	return fmt.Sprintf("%.1f CPU-seconds, %.0f EndpointSlice events", c.cpu, c.events)
}

// churnCost updates 10 EndpointSlices a second, each time a random
// service's first endpoint to a new address, for d, and returns what each
// replica spent meanwhile.
func churnCost(t *testing.T, client kubernetes.Interface, rs []*harness.Replica, d time.Duration, namespaces int, phase string) []churnResult {
	t.Helper()
	before := make([]churnResult, len(rs))
	for i, r := range rs {
		before[i] = churnResult{harness.CPUSeconds(t, r.Cmd.Process.Pid), harness.ScrapeLabelled(t, r.HTTP, "shardns_kubernetes_events_total", `kind="EndpointSlice"`)}
	}
	// With SHARDNS_PROFILE_DIR, each replica's CPU profile of the churn
	// is kept there (cpu-churn-<replicas>-r<i><phase>.pb.gz).
	var profiles sync.WaitGroup
	if dir := os.Getenv("SHARDNS_PROFILE_DIR"); dir != "" {
		for i, r := range rs {
			name := filepath.Join(dir, fmt.Sprintf("cpu-churn-%d-r%d%s.pb.gz", len(rs), i, phase))
			profiles.Go(func() { keepCPUProfile(t, r, d, name) })
		}
	}
	tick := time.NewTicker(100 * time.Millisecond)
	defer tick.Stop()
	end := time.Now().Add(d)
	for n := 0; time.Now().Before(end); n++ {
		<-tick.C
		i := rand.IntN(20000)
		ns, name := fmt.Sprintf("bench%d", i%namespaces), fmt.Sprintf("svc%d-1", i)
		patch, _ := json.Marshal([]map[string]any{{"op": "replace", "path": "/endpoints/0/addresses/0",
			"value": fmt.Sprintf("10.%d.%d.%d", 220+n%30, (n/250)%250, n%250+1)}})
		if _, err := client.DiscoveryV1().EndpointSlices(ns).Patch(ctx, name, types.JSONPatchType, patch, metav1.PatchOptions{}); err != nil {
			t.Fatalf("churn: %v", err)
		}
	}
	profiles.Wait()
	out := make([]churnResult, len(rs))
	for i, r := range rs {
		out[i] = churnResult{harness.CPUSeconds(t, r.Cmd.Process.Pid) - before[i].cpu,
			harness.ScrapeLabelled(t, r.HTTP, "shardns_kubernetes_events_total", `kind="EndpointSlice"`) - before[i].events}
	}
	return out
}

// serveFor has each server at addrs answer a trickle of questions for d
// (about 100 a second each, for services of the bench's chosen at random
// in every namespace, so that a replica answers the zones it holds and
// asks the owners of the others), and reads the /metrics of each replica of
// rs every 10 s: the RSS read after it is that of servers in use, with
// the pages their query and metrics paths map, not of servers left idle
// since their last load.
func serveFor(t *testing.T, d time.Duration, services, namespaces int, addrs []string, rs []*harness.Replica) {
	t.Helper()
	end := time.Now().Add(d)
	ask, scrape := time.NewTicker(10*time.Millisecond), time.NewTicker(10*time.Second)
	defer ask.Stop()
	defer scrape.Stop()
	asked, failed := 0, 0
	for time.Now().Before(end) {
		select {
		case <-ask.C:
			i := rand.IntN(services)
			name := fmt.Sprintf("svc%d.bench%d.svc.cluster.local.", i, i%namespaces)
			for _, addr := range addrs {
				asked++
				if r, err := testutil.Exchange(addr, "udp", name, dns.TypeA); err != nil || r.Rcode != dns.RcodeSuccess {
					failed++
				}
			}
		case <-scrape.C:
			for _, r := range rs {
				harness.Samples(t, r.HTTP)
			}
		}
	}
	t.Logf("memory: before the read, %d questions asked of the servers, %d not answered NOERROR", asked, failed)
}

func replicaAddrs(rs []*harness.Replica) []string {
	var out []string
	for _, r := range rs {
		out = append(out, r.Addr)
	}
	return out
}
