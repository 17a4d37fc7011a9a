package zonemanager_test

import (
	"fmt"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/miekg/dns"

	"github.com/shardns/shardns/actors/zonemanager"
	ring "github.com/shardns/shardns/cluster"
	"github.com/shardns/shardns/internal/testutil"
	"github.com/shardns/shardns/model"
	"github.com/shardns/shardns/zone"
)

// What a replica that announces itself while others are still syncing
// defers, and what it loads when they never announce, is decided purely:
// TestPendingWaitStep, TestSpawnFor, TestStateStepApplied (a deferred
// zone is never spawned), TestStateStepPendingGaveUp and TestPlacement.
// The tests here run the wait through the Manager with sharded watches,
// where the sources' watches follow it too.

// shardedTogether is startShardedReplica with "a" and "b" started
// together, neither announced: the source holds what a's Interest serves,
// as the Kubernetes source with sharded watches does.
func shardedTogether(t *testing.T, pendingWait time.Duration) (*shardedReplica, *zonemanager.Interest) {
	t.Helper()
	interest := &zonemanager.Interest{}
	r := startShardedReplica(t, func(cfg *zonemanager.Config) {
		cfg.Ring = ring.NewRing("a", []ring.Member{{Name: "a"}, {Name: "b", Pending: true}}, 1)
		cfg.Interest, cfg.PendingWait, cfg.Grace = interest, pendingWait, time.Second
	})
	served := func(ns string) bool { return interest.Serves(model.KindService, ns) }
	r.owned.Store(&served)
	return r, interest
}

// With sharded watches, a replica that announces itself while another
// that started with it is still syncing does not widen its watches to
// the namespaces it owns until the other announces (that list of the
// whole cluster was its memory's peak): their names are SERVFAIL, never
// NXDOMAIN, it is not ready, and once the other announces it serves its
// share and sends the rest there.
func TestShardedAnnouncedReplicaKeepsItsWatchesNarrow(t *testing.T) {
	r, interest := shardedTogether(t, time.Hour)
	mine, theirs := []string{}, []string{}
	for i := range shardedNamespaces {
		_, ns := svcOf(i)
		if r.ring.Owns("a", zone.ServiceZoneKey(ns, "cluster.local.")) {
			mine = append(mine, ns)
		} else {
			theirs = append(theirs, ns)
		}
	}
	if len(mine) == 0 || len(theirs) == 0 {
		t.Fatalf("a keeps %v and b takes %v: the test checks nothing", mine, theirs)
	}
	r.loaded.Store(false) // as the node does when it announces
	r.system.Root.Send(r.manager, &zonemanager.RingChanged{Ring: ring.NewRing("a", []ring.Member{{Name: "a", Owner: true}, {Name: "b", Pending: true}}, 1)})
	r.release <- struct{}{} // the replay of the ring change, from the narrow watches
	testutil.Eventually(t, 10*time.Second, func() error {
		for _, ns := range mine {
			if resp := r.ask("web."+ns+".svc.cluster.local.", dns.TypeA); resp.Rcode != dns.RcodeSuccess || len(resp.Answer) != 1 {
				return fmt.Errorf("%s (a's): rcode %s, %d records", ns, dns.RcodeToString[resp.Rcode], len(resp.Answer))
			}
		}
		return nil
	})
	for _, ns := range theirs {
		if interest.Serves(model.KindService, ns) {
			t.Fatalf("%s, b's once it announces: watched while b is still syncing", ns)
		}
		for _, name := range []string{"web." + ns + ".svc.cluster.local.", "absent." + ns + ".svc.cluster.local."} {
			if resp := r.ask(name, dns.TypeA); resp.Rcode != dns.RcodeServerFailure || len(resp.Remote) > 0 {
				t.Fatalf("%s (b's, deferred): rcode %s, remote %v; want SERVFAIL", name, dns.RcodeToString[resp.Rcode], resp.Remote)
			}
		}
	}
	if r.loaded.Load() {
		t.Fatal("loaded while zones it owns wait for b")
	}

	r.system.Root.Send(r.manager, &zonemanager.RingChanged{Ring: r.ring})
	r.release <- struct{}{}
	testutil.Eventually(t, 10*time.Second, func() error {
		if !r.loaded.Load() {
			return fmt.Errorf("not loaded after b announced")
		}
		for _, ns := range theirs {
			if resp := r.ask("web."+ns+".svc.cluster.local.", dns.TypeA); !slices.Equal(resp.Remote, []string{"b"}) {
				return fmt.Errorf("%s (b's): rcode %s, remote %v; want it asked of b", ns, dns.RcodeToString[resp.Rcode], resp.Remote)
			}
		}
		return nil
	})
}

// With sharded watches, a pending replica that does not announce within
// the wait leaves its namespaces to the replica that owns them: its
// watches widen to them, it loads them, and is loaded.
func TestShardedAnnouncedReplicaWidensWhenPendingOnesNeverTake(t *testing.T) {
	r, interest := shardedTogether(t, 200*time.Millisecond)
	r.loaded.Store(false)
	r.system.Root.Send(r.manager, &zonemanager.RingChanged{Ring: ring.NewRing("a", []ring.Member{{Name: "a", Owner: true}, {Name: "b", Pending: true}}, 1)})
	r.release <- struct{}{} // the ring change's replay
	r.release <- struct{}{} // the replay once the wait has ended
	testutil.Eventually(t, 10*time.Second, func() error {
		if !r.loaded.Load() {
			return fmt.Errorf("not loaded after the wait for b")
		}
		for i := range shardedNamespaces {
			_, ns := svcOf(i)
			if !interest.Serves(model.KindService, ns) {
				return fmt.Errorf("%s is not watched after the wait", ns)
			}
			if resp := r.ask("web."+ns+".svc.cluster.local.", dns.TypeA); resp.Rcode != dns.RcodeSuccess || len(resp.Answer) != 1 {
				return fmt.Errorf("%s: rcode %s, %d records, remote %v", ns, dns.RcodeToString[resp.Rcode], len(resp.Answer), resp.Remote)
			}
		}
		return nil
	})
}

// The zones a replica loads once replicas still syncing did not announce
// in time are a load like a ring change's: the node runs the collector
// tight from its start (Observer.Loading) until it is over (Observer.Settled). Left
// out, six replicas starting on 100k services built those zones with
// the collector at its usual target and peaked 40% higher.
func TestDeferredLoadIsALoad(t *testing.T) {
	var mu sync.Mutex
	var events []string
	note := func(e string) func() {
		return func() {
			mu.Lock()
			defer mu.Unlock()
			events = append(events, e)
		}
	}
	interest := &zonemanager.Interest{}
	r := startShardedReplica(t, func(cfg *zonemanager.Config) {
		cfg.Ring = ring.NewRing("a", []ring.Member{{Name: "a"}, {Name: "b", Pending: true}}, 1)
		cfg.Interest, cfg.PendingWait, cfg.Grace = interest, 200*time.Millisecond, time.Second
		cfg.Observer = &observed{loading: note("loading"), settled: note("settled")}
	})
	served := func(ns string) bool { return interest.Serves(model.KindService, ns) }
	r.owned.Store(&served)
	r.loaded.Store(false)
	r.system.Root.Send(r.manager, &zonemanager.RingChanged{Ring: ring.NewRing("a", []ring.Member{{Name: "a", Owner: true}, {Name: "b", Pending: true}}, 1)})
	r.release <- struct{}{} // the ring change's replay
	r.release <- struct{}{} // the replay once the wait has ended
	testutil.Eventually(t, 10*time.Second, func() error {
		mu.Lock()
		defer mu.Unlock()
		if !r.loaded.Load() {
			return fmt.Errorf("not loaded after the wait for b")
		}
		loads := 0
		for _, e := range events {
			if e == "loading" {
				loads++
			}
		}
		if loads < 2 || events[len(events)-1] != "settled" {
			return fmt.Errorf("events %v: want a load for each replay, the last one settled", events)
		}
		return nil
	})
}
