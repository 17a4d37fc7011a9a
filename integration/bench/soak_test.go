package bench

import (
	"fmt"
	"os"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/miekg/dns"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"

	"github.com/shardns/shardns/integration/harness"
	"github.com/shardns/shardns/integration/kubeapi"
	"github.com/shardns/shardns/internal/testutil"
)

// Soak bounds, checked on every replica at the end against its sample at
// the end of the warm-up: memory may not grow by more than half, and
// goroutines by more than a quarter (plus a few for timers and
// connections that come and go).
const (
	soakRSSGrowth       = 1.5
	soakGoroutineGrowth = 1.25
	soakGoroutineSlack  = 20
	soakChurnPerSecond  = 10
	soakQueriesPerSec   = 1000
)

// TestSoak is `make soak`: three replica processes on a real apiserver
// answer a steady mix of queries while Services change 10 times a second,
// for SOAK_DURATION (10m). Every minute it prints each replica's RSS and
// goroutines; it fails if a stable name is answered wrongly, if more than
// 0.1% of queries time out twice, or if RSS or goroutines grow past the
// bounds above after the first minute. It runs only with SHARDNS_SOAK=1.
func TestSoak(t *testing.T) {
	if os.Getenv("SHARDNS_SOAK") == "" {
		t.Skip("set SHARDNS_SOAK=1 (make soak)")
	}
	duration := 10 * time.Minute
	if s := os.Getenv("SOAK_DURATION"); s != "" {
		d, err := time.ParseDuration(s)
		if err != nil || d < 2*time.Minute {
			t.Fatalf("SOAK_DURATION=%q: want a duration of at least 2m", s)
		}
		duration = d
	}
	cp := kubeapi.Start(t)
	stable := map[string]string{}
	for i := range 5 {
		ns := fmt.Sprintf("soak%d", i)
		harness.CreateNamespace(t, cp.Client, ns, nil)
		for j := range 10 {
			svc := harness.CreateService(t, cp.Client, harness.ClusterIPService(ns, fmt.Sprintf("svc%d", j)))
			stable[fmt.Sprintf("svc%d.%s.svc.cluster.local.", j, ns)] = svc.Spec.ClusterIP
		}
	}
	harness.CreateNamespace(t, cp.Client, "churn", nil)

	a := harness.StartReplica(t, cp, harness.ReplicaOptions{Name: "s0", RF: 2, Cluster: harness.FastGossip})
	b := harness.StartReplica(t, cp, harness.ReplicaOptions{Name: "s1", Seeds: []string{a.Gossip}, RF: 2, Cluster: harness.FastGossip})
	c := harness.StartReplica(t, cp, harness.ReplicaOptions{Name: "s2", Seeds: []string{a.Gossip}, RF: 2, Cluster: harness.FastGossip})
	replicas := []*harness.Replica{a, b, c}
	harness.Settled(t, replicas, 3)

	stop := make(chan struct{})
	var wg sync.WaitGroup
	churn := &soakChurn{client: cp.Client}
	wg.Go(func() { churn.run(stop) })
	q := &soakQueries{stable: stable, replicas: []string{a.Addr, b.Addr, c.Addr}}
	wg.Go(func() { q.run(stop) })

	start := time.Now()
	warm := make([]soakSample, len(replicas))
	var last []soakSample
	tick := time.NewTicker(time.Minute)
	for minute := 1; time.Since(start) < duration; minute++ {
		<-tick.C
		last = sampleReplicas(t, replicas)
		for i, s := range last {
			t.Logf("soak minute %d %s: rss %.1f MiB, goroutines %.0f; queries %d (wrong %d, timeouts %d), service changes %d (errors %d)",
				minute, replicas[i].Addr, s.rss/(1<<20), s.goroutines,
				q.asked.Load(), q.wrong.Load(), q.timeouts.Load(), churn.changes.Load(), churn.errors.Load())
		}
		if minute == 1 {
			copy(warm, last)
		}
		if dir := os.Getenv("SHARDNS_PROFILE_DIR"); dir != "" {
			// The live heap after a collection tells a leak (it grows)
			// from a heap that has not reached its size yet (it does not).
			for i, r := range replicas {
				m := measureMemory(t, r, fmt.Sprintf("soak-%d-minute-%d.pb.gz", i, minute))
				t.Logf("soak minute %d %s: live heap %.1f MB, in use %.1f MB", minute, r.Addr, m.live, m.spans)
			}
		}
	}
	tick.Stop()
	close(stop)
	wg.Wait()

	for i, s := range last {
		w := warm[i]
		t.Logf("soak %s: rss %.1f → %.1f MiB (bound %.1f), goroutines %.0f → %.0f (bound %.0f)", replicas[i].Addr,
			w.rss/(1<<20), s.rss/(1<<20), w.rss*soakRSSGrowth/(1<<20),
			w.goroutines, s.goroutines, w.goroutines*soakGoroutineGrowth+soakGoroutineSlack)
		if s.rss > w.rss*soakRSSGrowth {
			t.Errorf("%s: RSS grew from %.1f to %.1f MiB after the warm-up", replicas[i].Addr, w.rss/(1<<20), s.rss/(1<<20))
		}
		if s.goroutines > w.goroutines*soakGoroutineGrowth+soakGoroutineSlack {
			t.Errorf("%s: goroutines grew from %.0f to %.0f after the warm-up", replicas[i].Addr, w.goroutines, s.goroutines)
		}
	}
	if n := q.wrong.Load(); n > 0 {
		t.Errorf("%d wrong answers of %d queries; e.g. %s", n, q.asked.Load(), q.example.Load())
	}
	if n, asked := q.timeouts.Load(), q.asked.Load(); n*1000 > asked {
		t.Errorf("%d of %d queries timed out twice", n, asked)
	}
	if churn.changes.Load() < int64(duration.Seconds())*soakChurnPerSecond/2 {
		t.Errorf("only %d service changes in %v", churn.changes.Load(), duration)
	}
}

type soakSample struct{ rss, goroutines float64 }

func sampleReplicas(t *testing.T, rs []*harness.Replica) []soakSample {
	var out []soakSample
	for _, r := range rs {
		out = append(out, soakSample{rss: harness.Scrape(t, r.HTTP, "process_resident_memory_bytes"),
			goroutines: harness.Scrape(t, r.HTTP, "go_goroutines")})
	}
	return out
}

// soakChurn creates, updates and deletes Services in namespace churn,
// soakChurnPerSecond changes a second, cycling over 40 names.
type soakChurn struct {
	client          kubernetes.Interface
	changes, errors atomic.Int64
}

func (c *soakChurn) run(stop <-chan struct{}) {
	tick := time.NewTicker(time.Second / soakChurnPerSecond)
	defer tick.Stop()
	svcs := c.client.CoreV1().Services("churn")
	for i := 0; ; i++ {
		select {
		case <-stop:
			return
		case <-tick.C:
		}
		name := fmt.Sprintf("churn%d", i%40)
		var err error
		switch (i / 40) % 3 { // a round creates all 40, the next updates them, the next deletes them
		case 0:
			_, err = svcs.Create(ctx, harness.ClusterIPService("churn", name), metav1.CreateOptions{})
		case 1:
			var s *corev1.Service
			if s, err = svcs.Get(ctx, name, metav1.GetOptions{}); err == nil {
				s.Spec.Ports[0].Port = int32(8000 + i%1000)
				_, err = svcs.Update(ctx, s, metav1.UpdateOptions{})
			}
		case 2:
			err = svcs.Delete(ctx, name, metav1.DeleteOptions{})
		}
		if err != nil {
			c.errors.Add(1)
		} else {
			c.changes.Add(1)
		}
	}
}

// soakQueries asks the replicas in turn at soakQueriesPerSec: A, SRV and
// PTR of stable services (whose answers must be right), names that do
// not exist (NXDOMAIN) and churned names (either rcode, never SERVFAIL).
type soakQueries struct {
	stable   map[string]string
	replicas []string
	asked    atomic.Int64
	wrong    atomic.Int64
	timeouts atomic.Int64
	example  atomic.Value
}

func (q *soakQueries) run(stop <-chan struct{}) {
	var names []string
	for n := range q.stable {
		names = append(names, n)
	}
	tick := time.NewTicker(time.Second / soakQueriesPerSec)
	defer tick.Stop()
	for i := 0; ; i++ {
		select {
		case <-stop:
			return
		case <-tick.C:
		}
		addr := q.replicas[i%len(q.replicas)]
		name := names[i%len(names)]
		var err error
		switch i % 5 {
		case 0, 1:
			err = soakCheck(addr, name, dns.TypeA, func(r *dns.Msg) bool {
				return r.Rcode == dns.RcodeSuccess && len(r.Answer) == 1 && r.Answer[0].(*dns.A).A.String() == q.stable[name]
			})
		case 2:
			err = soakCheck(addr, "_http._tcp."+name, dns.TypeSRV, func(r *dns.Msg) bool {
				return r.Rcode == dns.RcodeSuccess && len(r.Answer) == 1
			})
		case 3:
			rev, _ := dns.ReverseAddr(q.stable[name])
			err = soakCheck(addr, rev, dns.TypePTR, func(r *dns.Msg) bool {
				return r.Rcode == dns.RcodeSuccess && len(r.Answer) == 1 && r.Answer[0].(*dns.PTR).Ptr == name
			})
		case 4:
			missing := fmt.Sprintf("missing%d.soak%d.svc.cluster.local.", i, i%5)
			err = soakCheck(addr, missing, dns.TypeA, func(r *dns.Msg) bool { return r.Rcode == dns.RcodeNameError })
			if err == nil {
				churned := fmt.Sprintf("churn%d.churn.svc.cluster.local.", i%40)
				err = soakCheck(addr, churned, dns.TypeA, func(r *dns.Msg) bool {
					return r.Rcode == dns.RcodeSuccess || r.Rcode == dns.RcodeNameError
				})
			}
		}
		q.asked.Add(1)
		switch err.(type) {
		case nil:
		case soakTimeout:
			q.timeouts.Add(1)
		default:
			q.wrong.Add(1)
			q.example.Store(err.Error())
		}
	}
}

type soakTimeout struct{ error }

// soakCheck asks once and, if no answer comes, once more (as resolvers
// do), and checks the answer with ok.
func soakCheck(addr, name string, qtype uint16, ok func(*dns.Msg) bool) error {
	r, err := testutil.Exchange(addr, "udp", name, qtype)
	if err != nil {
		if r, err = testutil.Exchange(addr, "udp", name, qtype); err != nil {
			return soakTimeout{err}
		}
	}
	if !ok(r) {
		return fmt.Errorf("%s %s from %s: %s %v", name, dns.TypeToString[qtype], addr, dns.RcodeToString[r.Rcode], r.Answer)
	}
	return nil
}
