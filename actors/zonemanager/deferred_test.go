package zonemanager_test

import (
	"fmt"
	"io"
	"log/slog"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/miekg/dns"

	"github.com/shardns/shardns/actors/zonemanager"
	ring "github.com/shardns/shardns/cluster"
	"github.com/shardns/shardns/internal/testutil"
	"github.com/shardns/shardns/model"
	"github.com/shardns/shardns/zone"
)

// startedTogether is replica "a" of a ring where "b" has joined too and
// neither has announced itself, serving namespaces n0…n19 (service web in
// each, at 10.96.<i>.1), with pendingWait for the wait on b.
type startedTogether struct {
	c       *cluster
	send    func(*ring.Ring)
	loaded  atomic.Bool
	settled *ring.Ring // both owners
}

const togetherNamespaces = 20

func startTogether(t *testing.T, pendingWait time.Duration) *startedTogether {
	t.Helper()
	s := &startedTogether{c: &cluster{file: filepath.Join(t.TempDir(), "cluster.yaml")}}
	var docs []string
	for i := range togetherNamespaces {
		docs = append(docs, fmt.Sprintf("---\napiVersion: v1\nkind: Namespace\nmetadata: {name: n%d}\n", i))
		doc := service("web", fmt.Sprintf("10.96.%d.1", i))
		docs = append(docs, strings.Replace(doc, "namespace: shop", fmt.Sprintf("namespace: n%d", i), 1))
	}
	s.c.write(t, docs...)
	joining := ring.NewRing("a", []ring.Member{{Name: "a"}, {Name: "b", Pending: true}}, 1)
	system, manager := s.c.serve(t, slog.New(slog.NewTextHandler(io.Discard, nil)), time.Hour, func(cfg zonemanager.Hooked) zonemanager.Hooked {
		cfg.Self, cfg.Ring, cfg.Loaded, cfg.Grace, cfg.PendingWait = "a", joining, &s.loaded, time.Second, pendingWait
		return cfg
	})
	s.send = func(r *ring.Ring) { system.Root.Send(manager, &zonemanager.RingChanged{Ring: r}) }
	s.settled = ring.NewRing("a", []ring.Member{{Name: "a", Owner: true}, {Name: "b", Owner: true}}, 1)
	return s
}

// answersWeb reports whether a answers web.n<i> from its own zones.
func (s *startedTogether) answersWeb(i int) error {
	q := zone.Question{Name: fmt.Sprintf("web.n%d.svc.cluster.local.", i), Type: dns.TypeA}
	r := zone.Answer(s.c.cfg, s.c.table, q)
	if r.Rcode != dns.RcodeSuccess || len(r.Answer) != 1 {
		return fmt.Errorf("%s: rcode %s, %d records", q.Name, dns.RcodeToString[r.Rcode], len(r.Answer))
	}
	if want := fmt.Sprintf("10.96.%d.1", i); r.Answer[0].(*dns.A).A.String() != want {
		return fmt.Errorf("%s: %v, want %s", q.Name, r.Answer[0], want)
	}
	return nil
}

// kept are the namespaces a keeps once b owns zones too, and the others.
func (s *startedTogether) kept(t *testing.T) (kept, others []int) {
	for i := range togetherNamespaces {
		if s.settled.Owns("a", fmt.Sprintf("n%d.svc.cluster.local.", i)) {
			kept = append(kept, i)
		} else {
			others = append(others, i)
		}
	}
	if len(kept) == 0 || len(others) == 0 {
		t.Fatalf("a keeps %v and b takes %v: the test checks nothing", kept, others)
	}
	return kept, others
}

// A replica that announces itself while another that started with it is
// still syncing loads only the zones it keeps once both own zones, and is
// not loaded (ready) until the other has announced; it never builds the
// other's zones.
func TestAnnouncedReplicaLeavesPendingOnesTheirZones(t *testing.T) {
	s := startTogether(t, time.Hour)
	kept, others := s.kept(t)
	s.loaded.Store(false) // as the node does when it announces
	s.send(ring.NewRing("a", []ring.Member{{Name: "a", Owner: true}, {Name: "b", Pending: true}}, 1))
	testutil.Eventually(t, 10*time.Second, func() error {
		for _, i := range kept {
			if err := s.answersWeb(i); err != nil {
				return err
			}
		}
		return nil
	})
	for _, i := range others {
		if s.answersWeb(i) == nil || s.c.table.SlotOf(fmt.Sprintf("n%d.svc.cluster.local.", i)) != nil {
			t.Fatalf("n%d, b's once it announces, was built while b was still syncing", i)
		}
	}
	if s.loaded.Load() {
		t.Fatal("loaded while zones it owns wait for b")
	}

	s.send(s.settled)
	testutil.Eventually(t, 10*time.Second, func() error {
		if !s.loaded.Load() {
			return fmt.Errorf("not loaded after b announced")
		}
		return nil
	})
	for _, i := range others {
		if s.c.table.SlotOf(fmt.Sprintf("n%d.svc.cluster.local.", i)) != nil {
			t.Fatalf("n%d, b's, built after b announced", i)
		}
	}
}

// A pending replica that does not announce within the wait (it crashed
// while listing) leaves its zones to the replica that owns them: it loads
// them, and is loaded.
func TestAnnouncedReplicaLoadsWhatPendingOnesNeverTake(t *testing.T) {
	s := startTogether(t, 200*time.Millisecond)
	s.loaded.Store(false)
	s.send(ring.NewRing("a", []ring.Member{{Name: "a", Owner: true}, {Name: "b", Pending: true}}, 1))
	testutil.Eventually(t, 10*time.Second, func() error {
		if !s.loaded.Load() {
			return fmt.Errorf("not loaded after the wait for b")
		}
		for i := range togetherNamespaces {
			if err := s.answersWeb(i); err != nil {
				return err
			}
		}
		return nil
	})
}

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
