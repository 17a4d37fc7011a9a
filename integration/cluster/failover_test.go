package cluster

import (
	"fmt"
	"math/rand/v2"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/miekg/dns"

	"github.com/shardns/shardns/integration/harness"
	"github.com/shardns/shardns/integration/kubeapi"
	"github.com/shardns/shardns/internal/testutil"
)

// servedServiceZones counts the service zones a replica answers from its
// own state.
func servedServiceZones(t *testing.T, r *harness.Replica) int {
	ring, err := r.Ring(t)
	if err != nil {
		t.Fatal(err)
	}
	n := 0
	for _, z := range ring.Served {
		if strings.Contains(z, ".svc.") {
			n++
		}
	}
	return n
}

// TestKillWindow is part of `make bench`: three replica processes on a
// real apiserver with 2,000 services (10 endpoints each, 50 namespaces),
// replicationFactor 1; a steady 1,000 queries a second (the five
// questions per service of TestDNSPerf, shuffled: each comes back to a
// replica after its TTL, so nearly every query of a zone held elsewhere
// reaches its owner) to two of them, one client attempt each; then the
// third is killed (kill -9: its host closes its ports at once) or stopped
// (SIGSTOP: it falls silent, as behind a lost network, and only gossip can
// tell). For each scenario it prints how long queries failed (first to
// last SERVFAIL, by the time they were sent), the counts, and how slow
// the answers after the failure were; it fails only on a wrong answer, an
// NXDOMAIN for a name that exists, or zones moving under load before the
// failure (a false failover). It runs only with SHARDNS_BENCH=1.
func TestKillWindow(t *testing.T) {
	cp, client := harness.BenchControlPlane(t)
	start := time.Now()
	lines := harness.GenerateCluster(t, client, 50, 2000, 10)
	t.Logf("generated 2000 services and 20000 endpoints in %v", time.Since(start).Round(time.Second))
	qs := make([]loadQuestion, 0, len(lines))
	for _, l := range lines {
		name, typ, _ := strings.Cut(l, " ")
		qs = append(qs, loadQuestion{name: dns.Fqdn(name), qtype: dns.StringToType[typ]})
	}
	rand.New(rand.NewPCG(1, 2)).Shuffle(len(qs), func(i, j int) { qs[i], qs[j] = qs[j], qs[i] })

	for _, sc := range []struct {
		name   string
		signal syscall.Signal
		extra  string // cluster configuration
	}{
		{"kill -9, default configuration", syscall.SIGKILL, ""},
		{"SIGSTOP, default configuration", syscall.SIGSTOP, ""},
		{"SIGSTOP, failureDetection 250ms × 3", syscall.SIGSTOP, "failureDetection: {probeInterval: 250ms, suspicionMult: 3}"},
	} {
		t.Run(sc.name, func(t *testing.T) { killWindow(t, cp, qs, sc.name, sc.signal, sc.extra) })
	}
}

// killWindow runs one scenario of TestKillWindow.
func killWindow(t *testing.T, cp *kubeapi.ControlPlane, qs []loadQuestion, name string, signal syscall.Signal, extra string) {
	var rs []*harness.Replica
	for i := range 3 {
		var seeds []string
		if i > 0 {
			seeds = []string{rs[0].Gossip}
		}
		rs = append(rs, harness.StartReplica(t, cp, harness.ReplicaOptions{Name: fmt.Sprintf("k%d", i), Seeds: seeds, RF: 1, Cluster: extra}))
	}
	harness.Settled(t, rs, 3)
	victim, survivors := rs[2], rs[:2]
	targets := []string{survivors[0].Addr, survivors[1].Addr}
	t.Logf("the replica to stop serves %d of the 50 service zones", servedServiceZones(t, victim))
	qs = slices.Clone(qs) // baseline fills in the answers of this cluster
	baseline(t, targets, qs)
	handoffs := func() float64 {
		sum := 0.0
		for _, r := range survivors {
			sum += harness.ScrapeLabelled(t, r.HTTP, "shardns_cluster_handoffs_total", "")
		}
		return sum
	}
	before := handoffs()

	const warm, after = 10 * time.Second, 20 * time.Second
	l := startKillLoad(targets, 1000, func(i int) loadQuestion { return qs[i%len(qs)] })
	time.Sleep(warm) // the load runs meanwhile: nothing to wait for
	if h := handoffs(); h != before {
		t.Errorf("zones moved under load before any replica failed: %.0f handoffs", h-before)
	}
	victim.Cmd.Process.Signal(signal)
	failed := time.Since(l.start)
	removed := make(chan time.Duration, 1)
	go func() { // when gossip has taken the victim out of both rings
		for time.Since(l.start) < failed+after {
			if n0, n1 := ringSize(survivors[0]), ringSize(survivors[1]); n0 == 2 && n1 == 2 {
				removed <- time.Since(l.start) - failed
				return
			}
			time.Sleep(50 * time.Millisecond)
		}
	}()
	time.Sleep(after)
	rep := l.finish()
	victim.Cmd.Process.Kill() // a stopped process ignores the SIGTERM of the cleanup

	t.Logf("%s; one of 3 replicas (rf 1) under 1000 queries/s: %s", name, rep)
	if from, length, ok := rep.window(failed, answeredServfail); ok {
		t.Logf("SERVFAIL window: %.2f s (first sent %+.2f s from the failure, last %+.2f s)",
			length.Seconds(), from.Seconds(), (from + length).Seconds())
	} else {
		t.Logf("SERVFAIL window: 0 s (no SERVFAIL)")
	}
	if from, length, ok := rep.window(failed, answeredServfail, answeredNot); ok {
		t.Logf("window of SERVFAIL or no answer: %.2f s (from %+.2f s from the failure)", length.Seconds(), from.Seconds())
	}
	p50, p99, slowest := rep.latency(failed, 5*time.Second)
	t.Logf("answers to queries sent in the 5 s after the failure: p50 %.1f ms, p99 %.1f ms, slowest %.0f ms",
		harness.Millis(p50), harness.Millis(p99), harness.Millis(slowest))
	select {
	case d := <-removed:
		t.Logf("gossip removed the failed replica %.2f s after the failure", d.Seconds())
	default:
		t.Logf("gossip had not removed the failed replica %v after the failure", after)
	}
	for o, e := range rep.example {
		if e != "" && o != answeredRight {
			t.Logf("e.g. %s", e)
		}
	}
	if rep.wrong() > 0 {
		t.Errorf("%d wrong answers", rep.wrong())
	}
}

// ringSize is the number of members r sees, or -1 when it does not say.
func ringSize(r *harness.Replica) int {
	ring, err := r.Ring(nil)
	if err != nil {
		return -1
	}
	return len(ring.Members)
}

// Three replica processes, replicationFactor 1, default failure
// detection, under load without client retries: after kill -9 of the
// replica holding the most service zones, every name is answered right
// again by the other two, the killed replica is found down by its closed
// remote port, and no answer was ever wrong or NXDOMAIN for a name that
// exists, neither while its zones move nor when gossip drops it later
// (SERVFAIL and timeouts are allowed).
func TestClusterKillRF1AnswersRecover(t *testing.T) {
	cp := kubeapi.Shared(t)
	names := harness.WebNamespaces(t, cp, "kill", 9)
	var rs []*harness.Replica
	for i := range 3 {
		var seeds []string
		if i > 0 {
			seeds = []string{rs[0].Gossip}
		}
		rs = append(rs, harness.StartReplica(t, cp, harness.ReplicaOptions{Name: fmt.Sprintf("kr%d", i), Seeds: seeds, RF: 1, Cluster: "handoffGrace: 5s"}))
	}
	harness.Settled(t, rs, 3)
	slices.SortFunc(rs, func(a, b *harness.Replica) int { return servedServiceZones(t, b) - servedServiceZones(t, a) })
	victim, survivors := rs[0], rs[1:]
	if servedServiceZones(t, victim) == 0 {
		t.Fatal("no replica serves a service zone")
	}
	targets := []string{survivors[0].Addr, survivors[1].Addr}

	var qs []loadQuestion
	for name := range names {
		qs = append(qs, loadQuestion{name: name, qtype: dns.TypeA})
	}
	baseline(t, targets, qs)
	const nx = "NXDOMAIN " // canonical: no answer records
	// Every other question is a name asked once, so no cache on the way
	// hides a failure: NXDOMAIN is its right answer.
	next := func(i int) loadQuestion {
		if i%2 == 0 {
			return qs[(i/2)%len(qs)]
		}
		return loadQuestion{name: fmt.Sprintf("miss%d.kill%d.svc.cluster.local.", i, i%9), qtype: dns.TypeA, want: nx}
	}
	l := startKillLoad(targets, 300, next)
	testutil.Eventually(t, 10*time.Second, func() error {
		if n := len(l.finishedSoFar()); n < 300 {
			return fmt.Errorf("%d answers so far", n)
		}
		return nil
	})
	victim.Cmd.Process.Kill()
	testutil.Eventually(t, 60*time.Second, func() error {
		for _, r := range survivors {
			for _, q := range qs {
				if err := harness.AnswerIs(r.Addr, q.name, names[q.name]); err != nil {
					return err
				}
			}
		}
		return nil
	})
	harness.Settled(t, survivors, 2) // gossip drops the killed replica: the ring changes again
	rep := l.finish()
	t.Logf("kill -9 with rf 1: %s", rep)
	found := 0.0
	for _, r := range survivors {
		found += harness.Scrape(t, r.HTTP, "shardns_cluster_members_down_total")
	}
	if found == 0 {
		t.Error("no survivor found the killed replica's remote port closed")
	}
	if rep.wrong() > 0 {
		t.Fatalf("%d answers were wrong; e.g. %s %s", rep.wrong(), rep.example[answeredNXDOMAIN], rep.example[answeredWrong])
	}
}
