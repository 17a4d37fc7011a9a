package functional

import (
	"fmt"
	"io"
	"maps"
	"net/http"
	"slices"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/shardns/shardns/integration/harness"
	"github.com/shardns/shardns/integration/kubeapi"
	"github.com/shardns/shardns/internal/testutil"
)

// A node-local process replaced three times in a row beside itself, as
// a DaemonSet rolled with maxSurge 1 and maxUnavailable 0 replaces it:
// the new process binds the same DNS and HTTP address while the old one
// serves, the old one is told to stop only once the new one's /ready
// (asked at the shared HTTP address) says 200, and a client asking
// without pause and without a retry loses no query and gets no wrong
// answer. Every name asked is
// either cached or asked of an owner through the process that answers.
func TestNodeLocalRolledBesideItself(t *testing.T) {
	cp := kubeapi.Shared(t)
	names := harness.WebNamespaces(t, cp, "roll", 3)
	a := harness.StartReplica(t, cp, harness.ReplicaOptions{Name: "r0", RF: 2, Cluster: harness.FastGossip})
	b := harness.StartReplica(t, cp, harness.ReplicaOptions{Name: "r1", Seeds: []string{a.Gossip}, RF: 2, Cluster: harness.FastGossip})
	harness.Settled(t, []*harness.Replica{a, b}, 2)
	seed := harness.RemoteOf(t, a)
	dnsAddr := fmt.Sprintf("127.0.0.1:%d", harness.FreePort(t))
	httpAddr := fmt.Sprintf("127.0.0.1:%d", harness.FreePort(t))
	start := func() *harness.Process {
		p := harness.Start(t, harness.Options{Config: fmt.Sprintf(`
mode: nodelocal
dns: {listen: [%q]}
http: {listen: %q, lameduck: 1s}
forward: {upstreams: []}
cluster:
  nodeName: nl
  replicas: [%q]
  remote: "127.0.0.1:0"
  gossip: fast
`, dnsAddr, httpAddr, seed)})

		waitStatus(t, httpAddr, 200)
		return p
	}
	old := start()
	s := startSteady(dnsAddr, names)
	defer s.finish(t, "stopped early")
	s.enough(t, 200)
	for round := range 3 {
		next := start() // ready: the shared HTTP address answers for it
		asked := s.asked.Load()
		old.Cmd.Process.Signal(syscall.SIGTERM)
		err := <-old.Done
		old.Done <- err // for the test's cleanup
		if err != nil {
			t.Fatalf("round %d: the old process exited with %v", round, err)
		}
		// The survivor takes the address back from the program the old
		// one left, before a later rollout replaces it in turn.
		next.WaitLog(t, "its address is this process's alone", 10*time.Second)
		s.enough(t, asked+200)
		old = next
	}
	s.finish(t, "three rollouts of the node-local process")
}

// waitStatus waits until http://addr/ready answers code, asked as
// kubelet probes: a new connection each time, which the kernel gives the
// process the shared address steers it to (a kept-alive one stays with
// the process that accepted it).
func waitStatus(t *testing.T, addr string, code int) {
	t.Helper()
	probe := &http.Client{Transport: &http.Transport{DisableKeepAlives: true}, Timeout: 2 * time.Second}
	testutil.Eventually(t, 30*time.Second, func() error {
		resp, err := probe.Get("http://" + addr + "/ready")
		if err != nil {
			return err
		}
		io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		if resp.StatusCode != code {
			return fmt.Errorf("/ready = %d, want %d", resp.StatusCode, code)
		}
		return nil
	})
}

// steady asks addr without pause from two clients, one query at a time
// each and no retry: names asked once (each reaches an owner) and names
// of names (cached after their first answer).
type steady struct {
	stop     atomic.Bool
	wg       sync.WaitGroup
	asked    atomic.Int64
	failed   atomic.Int64
	mu       sync.Mutex
	examples []string // the first failures, with their time
}

func startSteady(addr string, names map[string]string) *steady {
	s := &steady{}
	known := slices.Sorted(maps.Keys(names))
	for c := range 2 {
		s.wg.Go(func() {
			for i := 0; !s.stop.Load(); i++ {
				err := harness.NXDomain(addr, fmt.Sprintf("miss%d-%d.roll%d.svc.cluster.local.", c, i, i%3))
				if name := known[i%len(known)]; err == nil {
					err = harness.AnswerIs(addr, name, names[name])
				}
				s.asked.Add(2)
				if err != nil {
					s.failed.Add(1)
					s.mu.Lock()
					if len(s.examples) < 5 {
						s.examples = append(s.examples, time.Now().Format("15:04:05.000")+" "+err.Error())
					}
					s.mu.Unlock()
				}
			}
		})
	}
	return s
}

// enough waits until n questions were asked.
func (s *steady) enough(t *testing.T, n int64) {
	t.Helper()
	testutil.Eventually(t, 60*time.Second, func() error {
		if asked := s.asked.Load(); asked < n {
			return fmt.Errorf("%d questions asked, waiting for %d", asked, n)
		}
		return nil
	})
}

func (s *steady) finish(t *testing.T, what string) {
	t.Helper()
	if s.stop.Swap(true) {
		return
	}
	s.wg.Wait()
	if s.failed.Load() > 0 {
		t.Fatalf("%s: %d of %d queries failed (no retry); first %q", what, s.failed.Load(), s.asked.Load(), s.examples)
	}
	t.Logf("%s: %d queries, none lost, wrong or SERVFAIL", what, s.asked.Load())
}
