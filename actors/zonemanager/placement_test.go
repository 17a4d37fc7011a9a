package zonemanager_test

import (
	"fmt"
	"io"
	"log/slog"
	"maps"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/asynkron/protoactor-go/actor"
	"github.com/miekg/dns"

	"github.com/shardns/shardns/actors/zonemanager"
	ring "github.com/shardns/shardns/cluster"
	"github.com/shardns/shardns/internal/testutil"
	"github.com/shardns/shardns/zone"
)

// A replica that announces itself as an owner is not loaded until the
// zones it gains answer.
func TestLoadedOnlyOnceGainedZonesAnswer(t *testing.T) {
	c := &cluster{file: filepath.Join(t.TempDir(), "cluster.yaml")}
	var services []string
	for i := range 200 {
		services = append(services, service(fmt.Sprintf("s%d", i), fmt.Sprintf("10.96.%d.%d", i/200, i%200+1)))
	}
	c.write(t, services...)
	var loaded atomic.Bool
	joining := ring.NewRing("a", []ring.Member{{Name: "a"}}, 1)
	system, manager := c.serve(t, slog.New(slog.NewTextHandler(io.Discard, nil)), time.Hour, func(cfg zonemanager.Hooked) zonemanager.Hooked {
		cfg.Self, cfg.Ring, cfg.Loaded, cfg.Grace = "a", joining, &loaded, time.Second
		return cfg
	})
	if err := c.check("s7", "10.96.0.8"); err == nil {
		t.Fatal("a replica that owns nothing answers from its own state")
	}

	// The node marks itself not loaded as it announces; the manager
	// turns it loaded once the gained zone has published.
	loaded.Store(false)
	system.Root.Send(manager, &zonemanager.RingChanged{Ring: ring.NewRing("a", []ring.Member{{Name: "a", Owner: true}}, 1)})
	testutil.Eventually(t, 10*time.Second, func() error {
		if !loaded.Load() {
			return fmt.Errorf("the gained zone has not loaded")
		}
		return nil
	})
	if err := c.check("s7", "10.96.0.8"); err != nil {
		t.Fatalf("loaded, but the gained zone does not answer: %v", err)
	}
	// A ring change that gains nothing leaves the replica loaded:
	// TestStateStep (CheckLoaded).
}

// How long gained zones took to load is reported, and a load longer than
// half the handoff grace, after which the replicas that lost the zones
// drop them, is logged as a warning that says what to raise.
func TestGainLoadIsReported(t *testing.T) {
	c := &cluster{file: filepath.Join(t.TempDir(), "cluster.yaml")}
	c.write(t, service("s1", "10.96.0.2"))
	var logs testutil.SyncBuffer
	loads := make(chan time.Duration, 4)
	joining := ring.NewRing("a", []ring.Member{{Name: "a"}}, 1)
	system, manager := c.serve(t, slog.New(slog.NewTextHandler(&logs, nil)), time.Hour, func(cfg zonemanager.Hooked) zonemanager.Hooked {
		// Any load takes more than half of a nanosecond.
		cfg.Self, cfg.Ring, cfg.Grace = "a", joining, time.Nanosecond
		cfg.Observer = &observed{gainLoaded: func(took time.Duration) { loads <- took }}
		return cfg
	})
	system.Root.Send(manager, &zonemanager.RingChanged{Ring: ring.NewRing("a", []ring.Member{{Name: "a", Owner: true}}, 1)})
	select {
	case took := <-loads:
		if took <= 0 {
			t.Errorf("the gained zones' load is reported as %v", took)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("the gained zones' load was not reported")
	}
	if err := c.check("s1", "10.96.0.2"); err != nil {
		t.Fatalf("reported loaded, but the gained zone does not answer: %v", err)
	}
	// The warning is logged before the load is reported.
	if !strings.Contains(logs.String(), "raise cluster.handoffGrace") {
		t.Errorf("no warning that the load outlasted half the grace; log:\n%s", logs.String())
	}
}

// servedAlone serves namespaces n0… with services s0… (s<i> in
// n<i mod namespaces>, at 10.96.<i>.1) from replica "a" alone, with a
// handoff grace of 50 ms and the config changes of tune, and returns the
// ring that shares them with "b".
func servedAlone(t *testing.T, namespaces, services int, tune ...func(zonemanager.Hooked) zonemanager.Hooked) (*cluster, *actor.ActorSystem, *actor.PID, *ring.Ring) {
	t.Helper()
	c := &cluster{file: filepath.Join(t.TempDir(), "cluster.yaml")}
	var docs []string
	for i := range namespaces {
		docs = append(docs, fmt.Sprintf("---\napiVersion: v1\nkind: Namespace\nmetadata: {name: n%d}\n", i))
	}
	for i := range services {
		doc := service(fmt.Sprintf("s%d", i), fmt.Sprintf("10.96.%d.1", i))
		docs = append(docs, strings.Replace(doc, "namespace: shop", fmt.Sprintf("namespace: n%d", i%namespaces), 1))
	}
	c.write(t, docs...)
	alone := ring.NewRing("a", []ring.Member{{Name: "a", Owner: true}}, 1)
	system, manager := c.serve(t, slog.New(slog.NewTextHandler(io.Discard, nil)), time.Hour, func(cfg zonemanager.Hooked) zonemanager.Hooked {
		cfg.Self, cfg.Ring, cfg.Grace = "a", alone, 50*time.Millisecond
		for _, tune := range tune {
			cfg = tune(cfg)
		}
		return cfg
	})
	return c, system, manager, ring.NewRing("a", []ring.Member{{Name: "a", Owner: true}, {Name: "b", Owner: true}}, 1)
}

// The zones a handoff releases leave memory: each lost zone's last
// snapshot is collected once its actor has stopped.
func TestReleasedZonesAreFreed(t *testing.T) {
	c, system, manager, shared := servedAlone(t, 20, 200)
	var mu sync.Mutex
	held := map[string]bool{} // lost zones whose snapshot is still in memory
	for _, key := range c.table.Keys() {
		if shared.Owns("a", key) {
			continue
		}
		held[key] = true
		runtime.AddCleanup(c.table.SlotOf(key).Load(), func(key string) {
			mu.Lock()
			defer mu.Unlock()
			delete(held, key)
		}, key)
	}
	if len(held) == 0 {
		t.Fatal("the second replica takes no zone: the test checks nothing")
	}
	system.Root.Send(manager, &zonemanager.RingChanged{Ring: shared})
	testutil.Eventually(t, 10*time.Second, func() error {
		for _, key := range c.table.Keys() {
			if !shared.Owns("a", key) {
				return fmt.Errorf("lost zone %s is still served", key)
			}
		}
		return nil
	})
	testutil.Eventually(t, 10*time.Second, func() error {
		runtime.GC()
		mu.Lock()
		defer mu.Unlock()
		if len(held) > 0 {
			return fmt.Errorf("released zones still in memory: %v", slices.Sorted(maps.Keys(held)))
		}
		return nil
	})
}

// A reload stops the zones of the replaced core over its retired table:
// queries that began on that core still get the answers it held.
func TestRetiredTableKeepsAnswersAfterZonesStop(t *testing.T) {
	c := &cluster{file: filepath.Join(t.TempDir(), "cluster.yaml")}
	c.write(t, service("web", "10.96.0.1"), service("db", "10.96.0.2"))
	system, manager := c.serve(t, slog.New(slog.NewTextHandler(io.Discard, nil)), time.Hour,
		func(cfg zonemanager.Hooked) zonemanager.Hooked { return cfg })
	for name, ip := range map[string]string{"web": "10.96.0.1", "db": "10.96.0.2"} {
		if err := c.check(name, ip); err != nil {
			t.Fatal(err)
		}
	}
	c.table.Retire()
	if err := system.Root.StopFuture(manager).Wait(); err != nil {
		t.Fatal(err)
	}
	for name, ip := range map[string]string{"web": "10.96.0.1", "db": "10.96.0.2"} {
		if err := c.check(name, ip); err != nil {
			t.Fatalf("after the zones stopped: %v", err)
		}
	}
}

// When a replica stops the zones it handed over, the zones it keeps are
// built again into new memory: same serial, same answers.
func TestKeptZonesAreRepackedWhenLostOnesStop(t *testing.T) {
	c, system, manager, shared := servedAlone(t, 10, 10)
	before := map[string]*zone.Snapshot{}
	lost := 0
	for _, key := range c.table.Keys() {
		if shared.Owns("a", key) {
			before[key] = c.table.SlotOf(key).Load()
		} else {
			lost++
		}
	}
	if len(before) == 0 || lost == 0 {
		t.Fatalf("the ring keeps %d zones and hands over %d: the test checks nothing", len(before), lost)
	}
	system.Root.Send(manager, &zonemanager.RingChanged{Ring: shared})
	testutil.Eventually(t, 10*time.Second, func() error {
		for key, old := range before {
			now := c.table.SlotOf(key).Load()
			if now == old {
				return fmt.Errorf("kept zone %s still has the snapshot built before the handoff", key)
			}
			if now.Serial != old.Serial {
				return fmt.Errorf("kept zone %s: serial %d, was %d", key, now.Serial, old.Serial)
			}
		}
		return nil
	})
	for i := range 10 {
		ns := fmt.Sprintf("n%d", i)
		if !shared.Owns("a", zone.ServiceZoneKey(ns, "cluster.local.")) {
			continue
		}
		q := zone.Question{Name: fmt.Sprintf("s%d.%s.svc.cluster.local.", i, ns), Type: dns.TypeA}
		r := zone.Answer(c.cfg, c.table, q)
		if r.Rcode != dns.RcodeSuccess || len(r.Answer) != 1 || r.Answer[0].(*dns.A).A.String() != fmt.Sprintf("10.96.%d.1", i) {
			t.Fatalf("%s after the repack: %v", q.Name, r.Answer)
		}
	}
}

// A release ends (Observer.Settled, when the node returns freed memory) only
// once every kept zone was built again after all the lost zones had
// stopped: that rebuild fills the holes the stopped zones left, so the
// memory of the first rebuild is freed whole.
func TestReleaseBuildsKeptZonesAgainAfterLostOnesStop(t *testing.T) {
	var mu sync.Mutex
	var table *zone.Table
	var lost []string
	releasing := false
	rebuiltAfterStop := map[string]bool{}
	settled := make(chan map[string]bool, 1)
	c, system, manager, shared := servedAlone(t, 10, 10, func(cfg zonemanager.Hooked) zonemanager.Hooked {
		cfg = zonemanager.WithRepacked(cfg, func(key string) {
			mu.Lock()
			defer mu.Unlock()
			if !releasing {
				return
			}
			for _, k := range lost {
				if table.SlotOf(k) != nil {
					return // a lost zone has not stopped yet
				}
			}
			rebuiltAfterStop[key] = true
		})
		cfg.Observer = &observed{loading: func() {
			mu.Lock()
			defer mu.Unlock()
			releasing = true
		}, settled: func() {
			mu.Lock()
			defer mu.Unlock()
			if releasing {
				select {
				case settled <- maps.Clone(rebuiltAfterStop):
				default:
				}
			}
		}}
		return cfg
	})
	var kept []string
	mu.Lock()
	table = c.table
	for _, key := range c.table.Keys() {
		if shared.Owns("a", key) {
			kept = append(kept, key)
		} else {
			lost = append(lost, key)
		}
	}
	mu.Unlock()
	if len(kept) == 0 || len(lost) == 0 {
		t.Fatalf("the ring keeps %d zones and hands over %d: the test checks nothing", len(kept), len(lost))
	}
	system.Root.Send(manager, &zonemanager.RingChanged{Ring: shared})
	select {
	case rebuilt := <-settled:
		for _, key := range kept {
			if !rebuilt[key] {
				t.Errorf("the release settled before kept zone %s was built again after the lost zones stopped", key)
			}
		}
	case <-time.After(10 * time.Second):
		t.Fatal("the release did not settle")
	}
}
