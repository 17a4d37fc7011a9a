package harness

import (
	"fmt"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/shardns/shardns/integration/kubeapi"
)

// Load queries the replicas in turn until stopped, allowing each query
// one client retry (as resolvers do), and counts wrong answers.
type Load struct {
	stop    atomic.Bool
	wg      sync.WaitGroup
	Asked   atomic.Int64
	Failed  atomic.Int64
	mu      sync.Mutex
	example string
}

// StartLoad asks names (each with its address) and names that do not
// exist of the addresses targets returns, in turn, until Stop or Finish.
func StartLoad(targets func() []string, names map[string]string) *Load {
	l := &Load{}
	l.wg.Go(func() {
		for i := 0; !l.stop.Load(); i++ {
			ts := targets()
			addr := ts[i%len(ts)]
			// Names asked once each reach an owner every time: no cache
			// on the way can hide a failure.
			for j := range 6 {
				l.Asked.Add(1)
				miss := fmt.Sprintf("miss%d.proc%d.svc.cluster.local.", i, j)
				if err := NXDomain(addr, miss); err != nil {
					if err = NXDomain(addr, miss); err != nil {
						l.Failed.Add(1)
						l.mu.Lock()
						l.example = err.Error()
						l.mu.Unlock()
					}
				}
			}
			for name, ip := range names {
				l.Asked.Add(1)
				if err := AnswerIs(addr, name, ip); err != nil {
					if err = AnswerIs(addr, name, ip); err != nil {
						l.Failed.Add(1)
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

// Finish stops the load and fails t if any answer was wrong after a retry.
func (l *Load) Finish(t testing.TB, what string) {
	t.Helper()
	if example := l.Stop(); l.Failed.Load() > 0 {
		t.Fatalf("%s: %d of %d queries failed after a retry; e.g. %s", what, l.Failed.Load(), l.Asked.Load(), example)
	}
	t.Logf("%s: %d queries, none failed", what, l.Asked.Load())
}

// Stop stops the queries, waits for the last, and returns a wrong answer
// as an example ("" without one).
func (l *Load) Stop() string {
	l.stop.Store(true)
	l.wg.Wait()
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.example
}

// WebNamespaces creates n namespaces prefix0… with a ClusterIP service
// web in each, and returns each web name with its cluster IP: zones
// enough to spread over a few replicas.
func WebNamespaces(t testing.TB, cp *kubeapi.ControlPlane, prefix string, n int) map[string]string {
	t.Helper()
	names := map[string]string{}
	for i := range n {
		ns := fmt.Sprintf("%s%d", prefix, i)
		CreateNamespace(t, cp.Client, ns, nil)
		svc := CreateService(t, cp.Client, ClusterIPService(ns, "web"))
		names["web."+ns+".svc.cluster.local."] = svc.Spec.ClusterIP
	}
	return names
}
