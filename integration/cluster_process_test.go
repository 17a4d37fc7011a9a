package integration

import (
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"os"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/miekg/dns"

	"github.com/shardns/shardns/httpapi"
	"github.com/shardns/shardns/integration/kubeapi"
	"github.com/shardns/shardns/internal/testutil"
)

// replicaProcess is a shardns binary that is one replica of a cluster.
type replicaProcess struct {
	*process
	http   string
	gossip string
}

func startReplicaProcess(t *testing.T, cp *kubeapi.ControlPlane, name string, seeds []string) *replicaProcess {
	return startReplicaProcessRF(t, cp, name, seeds, 2)
}

func startReplicaProcessRF(t *testing.T, cp *kubeapi.ControlPlane, name string, seeds []string, rf int) *replicaProcess {
	t.Helper()
	return startReplicaProcessWith(t, cp, name, seeds, rf, "gossip: fast\n  handoffGrace: 5s")
}

// startReplicaProcessWith starts a replica whose cluster section ends with
// extra (indented by two spaces after its first line).
func startReplicaProcessWith(t *testing.T, cp *kubeapi.ControlPlane, name string, seeds []string, rf int, extra string) *replicaProcess {
	t.Helper()
	return startReplicaProcessLameduck(t, cp, name, seeds, rf, extra, 0)
}

// startReplicaProcessLameduck is startReplicaProcessWith with an
// http.lameduck: how long the replica answers after SIGTERM.
func startReplicaProcessLameduck(t *testing.T, cp *kubeapi.ControlPlane, name string, seeds []string, rf int, extra string, lameduck time.Duration) *replicaProcess {
	t.Helper()
	return startReplicaProcessKube(t, cp, name, seeds, rf, extra, lameduck, "")
}

// startReplicaProcessKube is startReplicaProcessLameduck whose kubernetes
// section also holds kube, flow-style keys (e.g. `external: {zones:
// [example.org]}`), for the features a replica serves beside the cluster
// names.
func startReplicaProcessKube(t *testing.T, cp *kubeapi.ControlPlane, name string, seeds []string, rf int, extra string, lameduck time.Duration, kube string) *replicaProcess {
	t.Helper()
	if kube != "" {
		kube = ", " + kube
	}
	return launchReplica(t, name, seeds, func(join, gossip string, remote int) (*process, error) {
		return tryStartShardns(t, fmt.Sprintf(`
dns: {listen: ["127.0.0.1:0"]}
http: {listen: "127.0.0.1:0", lameduck: %s, pprof: %t}
kubernetes: {enabled: true, kubeconfig: %q%s}
forward: {upstreams: []}
cluster:
  nodeName: %s
  %s
  bind: %q
  remote: "127.0.0.1:%d"
  replicationFactor: %d
  %s
`, lameduck, profiled(), cp.Kubeconfig, kube, name, join, gossip, remote, rf, extra))
	})
}

// launchReplica starts a replica process through start, which is
// given its cluster.join line (`enabled: true`, or a join of the first of
// seeds), its gossip address and its remote port. The ports are chosen
// here, as the other replicas must know them; ones taken by another
// process before the replica binds them are chosen again.
func launchReplica(t *testing.T, name string, seeds []string, start func(join, gossip string, remote int) (*process, error)) *replicaProcess {
	t.Helper()
	join := "enabled: true"
	if len(seeds) > 0 && seeds[0] != "" {
		join = fmt.Sprintf("join: [%q]", seeds[0])
	}
	for attempt := 1; ; attempt++ {
		gossip := fmt.Sprintf("127.0.0.1:%d", freeTCPPort(t))
		p, err := start(join, gossip, freeTCPPort(t))
		if errors.Is(err, errPortTaken) && attempt < 3 {
			t.Logf("%s: %v; choosing others", name, err)
			continue
		}
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		return &replicaProcess{process: p, http: p.httpAddr(t), gossip: gossip}
	}
}

// profiled reports whether replicas serve profiles: with
// SHARDNS_PROFILE_DIR, which keeps them. Otherwise they run as deployed,
// without http.pprof, and so without sampling their heap (see
// node.sampleHeap), which the memory benches' RSS would count.
func profiled() bool { return os.Getenv("SHARDNS_PROFILE_DIR") != "" }

func (r *replicaProcess) ring(t *testing.T) (httpapi.Ring, error) {
	resp, err := http.Get("http://" + r.http + "/debug/ring")
	if err != nil {
		return httpapi.Ring{}, err
	}
	defer resp.Body.Close()
	var ring httpapi.Ring
	return ring, json.NewDecoder(resp.Body).Decode(&ring)
}

// settled waits until every replica is ready and sees want members.
func settled(t *testing.T, rs []*replicaProcess, want int) {
	t.Helper()
	settledWithin(t, rs, want, 30*time.Second)
}

// settledWithin is settled with its bound: replicas that list a large
// cluster all at once take longer to be ready.
func settledWithin(t *testing.T, rs []*replicaProcess, want int, timeout time.Duration) {
	t.Helper()
	testutil.Eventually(t, timeout, func() error {
		for _, r := range rs {
			if code := httpStatus(t, "http://"+r.http+"/ready"); code != 200 {
				return fmt.Errorf("%s /ready = %d", r.http, code)
			}
			ring, err := r.ring(t)
			if err != nil {
				return err
			}
			if len(ring.Members) != want {
				return fmt.Errorf("%s sees %d members, want %d", ring.Self, len(ring.Members), want)
			}
		}
		return nil
	})
}

// load queries the replicas in turn until stopped, allowing each query
// one client retry (as resolvers do), and counts wrong answers.
type load struct {
	stop    atomic.Bool
	wg      sync.WaitGroup
	asked   atomic.Int64
	failed  atomic.Int64
	mu      sync.Mutex
	example string
}

func startLoad(targets func() []string, names map[string]string) *load {
	l := &load{}
	l.wg.Go(func() {
		for i := 0; !l.stop.Load(); i++ {
			ts := targets()
			addr := ts[i%len(ts)]
			// Names asked once each reach an owner every time: no cache
			// on the way can hide a failure.
			for j := range 6 {
				l.asked.Add(1)
				miss := fmt.Sprintf("miss%d.proc%d.svc.cluster.local.", i, j)
				if err := nxdomain(addr, miss); err != nil {
					if err = nxdomain(addr, miss); err != nil {
						l.failed.Add(1)
						l.mu.Lock()
						l.example = err.Error()
						l.mu.Unlock()
					}
				}
			}
			for name, ip := range names {
				l.asked.Add(1)
				if err := answerIs(addr, name, ip); err != nil {
					if err = answerIs(addr, name, ip); err != nil {
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

func answerIs(addr, name, ip string) error {
	r, err := testutil.Exchange(addr, "udp", name, dns.TypeA)
	if err != nil {
		return err
	}
	if r.Rcode != dns.RcodeSuccess || len(r.Answer) != 1 || r.Answer[0].(*dns.A).A.String() != ip {
		return fmt.Errorf("%s from %s: %s %v", name, addr, dns.RcodeToString[r.Rcode], r.Answer)
	}
	return nil
}

// pointsTo checks that the reverse name of ip answers name alone.
func pointsTo(addr, ip, name string) error {
	rev, err := dns.ReverseAddr(ip)
	if err != nil {
		return err
	}
	r, err := testutil.Exchange(addr, "udp", rev, dns.TypePTR)
	if err != nil {
		return err
	}
	if r.Rcode != dns.RcodeSuccess || len(r.Answer) != 1 || r.Answer[0].(*dns.PTR).Ptr != name {
		return fmt.Errorf("PTR %s from %s: %s %v, want %s", rev, addr, dns.RcodeToString[r.Rcode], r.Answer, name)
	}
	return nil
}

func nxdomain(addr, name string) error {
	r, err := testutil.Exchange(addr, "udp", name, dns.TypeA)
	if err != nil {
		return err
	}
	if r.Rcode != dns.RcodeNameError {
		return fmt.Errorf("%s from %s: %s, want NXDOMAIN", name, addr, dns.RcodeToString[r.Rcode])
	}
	return nil
}

func (l *load) finish(t *testing.T, what string) {
	t.Helper()
	l.stop.Store(true)
	l.wg.Wait()
	if l.failed.Load() > 0 {
		t.Fatalf("%s: %d of %d queries failed after a retry; e.g. %s", what, l.failed.Load(), l.asked.Load(), l.example)
	}
	t.Logf("%s: %d queries, none failed", what, l.asked.Load())
}

// Three replica processes on one real apiserver, replicationFactor 2:
// a kill -9 under load fails no query (after one client retry), the ring
// recovers within 10 s, and a fourth replica joins under load without a
// wrong answer.
func TestClusterProcessesKillAndJoin(t *testing.T) {
	cp := kubeapi.Shared(t)
	names := webNamespaces(t, cp, "proc", 6)
	a := startReplicaProcess(t, cp, "r0", nil)
	b := startReplicaProcess(t, cp, "r1", []string{a.gossip})
	c := startReplicaProcess(t, cp, "r2", []string{a.gossip})
	settled(t, []*replicaProcess{a, b, c}, 3)
	for _, r := range []*replicaProcess{a, b, c} {
		for name, ip := range names {
			if err := answerIs(r.addr, name, ip); err != nil {
				t.Fatal(err)
			}
		}
	}

	var targets atomic.Value
	targets.Store([]string{a.addr, b.addr})
	l := startLoad(func() []string { return targets.Load().([]string) }, names)
	c.cmd.Process.Kill()
	start := time.Now()
	settled(t, []*replicaProcess{a, b}, 2)
	if took := time.Since(start); took > 10*time.Second {
		t.Fatalf("ownership restored after %v, want within 10s", took)
	}
	l.finish(t, "kill -9 of one replica")

	l = startLoad(func() []string { return targets.Load().([]string) }, names)
	d := startReplicaProcess(t, cp, "r3", []string{a.gossip})
	settled(t, []*replicaProcess{a, b, d}, 3)
	targets.Store([]string{a.addr, b.addr, d.addr})
	l.finish(t, "a fourth replica joining")
}

// Every replica stopped at once, as when the StatefulSet is deleted or
// scaled to zero: each leaves the ring at the start of its lameduck and
// sees the others leave, while clients (kube-proxy has not dropped the
// endpoints yet) still ask all of them. Until their lameducks end, the
// replicas must keep answering every name right.
func TestClusterStopAllAtOnce(t *testing.T) {
	cp := kubeapi.Shared(t)
	names := webNamespaces(t, cp, "stopall", 6)
	const lameduck = 15 * time.Second
	extra := "gossip: fast\n  handoffGrace: 5s"
	a := startReplicaProcessLameduck(t, cp, "r0", nil, 2, extra, lameduck)
	b := startReplicaProcessLameduck(t, cp, "r1", []string{a.gossip}, 2, extra, lameduck)
	c := startReplicaProcessLameduck(t, cp, "r2", []string{a.gossip}, 2, extra, lameduck)
	rs := []*replicaProcess{a, b, c}
	settled(t, rs, 3)

	l := startLoad(func() []string { return []string{a.addr, b.addr, c.addr} }, names)
	for _, r := range rs {
		if err := r.cmd.Process.Signal(syscall.SIGTERM); err != nil {
			t.Fatal(err)
		}
	}
	stopped := time.Now()
	// Every replica has left the ring (its own ring no longer lists it
	// among others), and at least one has seen every other leave: it is
	// alone, and answers every zone itself. Not every replica sees every
	// leave: the last to leave has no one left to gossip its leave to, so
	// the others may keep it as the owner of everything, and ask it. A
	// leave broadcast can also time out on a loaded machine, so gossip
	// gets two thirds of the lameduck.
	testutil.Eventually(t, lameduck*2/3, func() error {
		alone := 0
		for _, r := range rs {
			ring, err := r.ring(t)
			if err != nil {
				return err
			}
			var others []string
			listed := false
			for _, m := range ring.Members {
				if m.Name == ring.Self {
					listed = true
				} else {
					others = append(others, m.Name)
				}
			}
			switch {
			case len(others) == 0:
				alone++
			case listed:
				return fmt.Errorf("%s has not left yet: it lists itself with %v", ring.Self, others)
			}
		}
		if alone == 0 {
			return fmt.Errorf("no replica has seen every other leave")
		}
		return nil
	})
	// Each saw the others say they were leaving, and took every object
	// before it left.
	for _, r := range rs {
		if mustMetrics(t, r.http).sum("shardns_kubernetes_sharded_watch") != 0 {
			t.Errorf("%s left without watching every namespace, though every replica was stopping", r.http)
		}
	}
	for _, r := range rs {
		for name, ip := range names {
			if err := answerIs(r.addr, name, ip); err != nil {
				t.Errorf("after every replica left the ring: %v", err)
			}
			if err := pointsTo(r.addr, ip, name); err != nil {
				t.Errorf("after every replica left the ring: %v", err)
			}
		}
	}
	if took := time.Since(stopped); took >= lameduck {
		t.Fatalf("the checks took %v, longer than the lameduck: they prove nothing", took)
	}
	l.finish(t, "every replica stopping at once")
}

// webNamespaces creates n namespaces prefix0… with a ClusterIP service
// web in each, and returns each web name with its cluster IP: zones
// enough to spread over a few replicas.
func webNamespaces(t *testing.T, cp *kubeapi.ControlPlane, prefix string, n int) map[string]string {
	t.Helper()
	names := map[string]string{}
	for i := range n {
		ns := fmt.Sprintf("%s%d", prefix, i)
		mkNamespace(t, cp.Client, ns, nil)
		svc := mkService(t, cp.Client, clusterIPService(ns, "web"))
		names["web."+ns+".svc.cluster.local."] = svc.Spec.ClusterIP
	}
	return names
}
