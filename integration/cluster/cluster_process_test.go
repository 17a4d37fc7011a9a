package cluster

import (
	"fmt"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/shardns/shardns/integration/harness"
	"github.com/shardns/shardns/integration/kubeapi"
	"github.com/shardns/shardns/internal/testutil"
)

// Three replica processes on one real apiserver, replicationFactor 2:
// a kill -9 under load fails no query (after one client retry), the ring
// recovers within 10 s, and a fourth replica joins under load without a
// wrong answer.
func TestClusterProcessesKillAndJoin(t *testing.T) {
	cp := kubeapi.Shared(t)
	names := harness.WebNamespaces(t, cp, "proc", 6)
	a := harness.StartReplica(t, cp, harness.ReplicaOptions{Name: "r0", RF: 2, Cluster: harness.FastGossip})
	b := harness.StartReplica(t, cp, harness.ReplicaOptions{Name: "r1", Seeds: []string{a.Gossip}, RF: 2, Cluster: harness.FastGossip})
	c := harness.StartReplica(t, cp, harness.ReplicaOptions{Name: "r2", Seeds: []string{a.Gossip}, RF: 2, Cluster: harness.FastGossip})
	harness.Settled(t, []*harness.Replica{a, b, c}, 3)
	for _, r := range []*harness.Replica{a, b, c} {
		for name, ip := range names {
			if err := harness.AnswerIs(r.Addr, name, ip); err != nil {
				t.Fatal(err)
			}
		}
	}

	var targets atomic.Value
	targets.Store([]string{a.Addr, b.Addr})
	l := harness.StartLoad(func() []string { return targets.Load().([]string) }, names)
	c.Cmd.Process.Kill()
	start := time.Now()
	harness.Settled(t, []*harness.Replica{a, b}, 2)
	if took := time.Since(start); took > 10*time.Second {
		t.Fatalf("ownership restored after %v, want within 10s", took)
	}
	l.Finish(t, "kill -9 of one replica")

	l = harness.StartLoad(func() []string { return targets.Load().([]string) }, names)
	d := harness.StartReplica(t, cp, harness.ReplicaOptions{Name: "r3", Seeds: []string{a.Gossip}, RF: 2, Cluster: harness.FastGossip})
	harness.Settled(t, []*harness.Replica{a, b, d}, 3)
	targets.Store([]string{a.Addr, b.Addr, d.Addr})
	l.Finish(t, "a fourth replica joining")
}

// Every replica stopped at once, as when the StatefulSet is deleted or
// scaled to zero: each leaves the ring at the start of its lameduck and
// sees the others leave, while clients (kube-proxy has not dropped the
// endpoints yet) still ask all of them. Until their lameducks end, the
// replicas must keep answering every name right.
func TestClusterStopAllAtOnce(t *testing.T) {
	cp := kubeapi.Shared(t)
	names := harness.WebNamespaces(t, cp, "stopall", 6)
	const lameduck = 15 * time.Second
	extra := "gossip: fast\n  handoffGrace: 5s"
	a := harness.StartReplica(t, cp, harness.ReplicaOptions{Name: "r0", RF: 2, Cluster: extra, Lameduck: lameduck})
	b := harness.StartReplica(t, cp, harness.ReplicaOptions{Name: "r1", Seeds: []string{a.Gossip}, RF: 2, Cluster: extra, Lameduck: lameduck})
	c := harness.StartReplica(t, cp, harness.ReplicaOptions{Name: "r2", Seeds: []string{a.Gossip}, RF: 2, Cluster: extra, Lameduck: lameduck})
	rs := []*harness.Replica{a, b, c}
	harness.Settled(t, rs, 3)

	l := harness.StartLoad(func() []string { return []string{a.Addr, b.Addr, c.Addr} }, names)
	for _, r := range rs {
		if err := r.Cmd.Process.Signal(syscall.SIGTERM); err != nil {
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
			ring, err := r.Ring(t)
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
		if harness.MustMetrics(t, r.HTTP).Sum("shardns_kubernetes_sharded_watch") != 0 {
			t.Errorf("%s left without watching every namespace, though every replica was stopping", r.HTTP)
		}
	}
	for _, r := range rs {
		for name, ip := range names {
			if err := harness.AnswerIs(r.Addr, name, ip); err != nil {
				t.Errorf("after every replica left the ring: %v", err)
			}
			if err := harness.PointsTo(r.Addr, ip, name); err != nil {
				t.Errorf("after every replica left the ring: %v", err)
			}
		}
	}
	if took := time.Since(stopped); took >= lameduck {
		t.Fatalf("the checks took %v, longer than the lameduck: they prove nothing", took)
	}
	l.Finish(t, "every replica stopping at once")
}
