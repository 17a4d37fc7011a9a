package zonemanager_test

import (
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/asynkron/protoactor-go/actor"
	"github.com/miekg/dns"

	"github.com/shardns/shardns/actors/zonemanager"
	"github.com/shardns/shardns/internal/testutil"
	"github.com/shardns/shardns/sources/manifest"
	"github.com/shardns/shardns/zone"
)

// cluster is a Manager fed by the manifest source from one file the test
// rewrites.
type cluster struct {
	file    string
	cfg     *zone.Config
	table   *zone.Table
	log     *testutil.SyncBuffer
	reverse bool // serve the reverse zones of in-addr.arpa. too
}

func service(name, ip string) string {
	return fmt.Sprintf("---\napiVersion: v1\nkind: Service\nmetadata: {name: %s, namespace: shop}\n"+
		"spec: {clusterIP: %s, clusterIPs: [%s], ports: [{name: http, port: 80, protocol: TCP}]}\n", name, ip, ip)
}

func (c *cluster) write(t *testing.T, services ...string) {
	t.Helper()
	doc := "apiVersion: v1\nkind: Namespace\nmetadata: {name: shop}\n" + strings.Join(services, "")
	// Renamed into place, so the source never reads a half-written file.
	tmp := c.file + ".new"
	if err := os.WriteFile(tmp, []byte(doc), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(tmp, c.file); err != nil {
		t.Fatal(err)
	}
}

// startCluster serves services through a Manager whose zone actors call
// fail before each batch.
func startCluster(t *testing.T, fail func(key string, names []string), services ...string) *cluster {
	t.Helper()
	c := &cluster{file: filepath.Join(t.TempDir(), "cluster.yaml"), log: &testutil.SyncBuffer{}}
	c.write(t, services...)
	c.serve(t, slog.New(slog.NewTextHandler(c.log, nil)), 20*time.Millisecond,
		func(cfg zonemanager.Hooked) zonemanager.Hooked { return zonemanager.WithFault(cfg, fail) })
	return c
}

// serve starts a Manager on a new table, configured by tune, and the
// manifest source re-reading c.file every interval, and returns once the
// manager has synced.
func (c *cluster) serve(t *testing.T, logger *slog.Logger, interval time.Duration,
	tune func(zonemanager.Hooked) zonemanager.Hooked) (*actor.ActorSystem, *actor.PID) {
	t.Helper()
	c.cfg = &zone.Config{Domains: zone.Domains{Cluster: []string{"cluster.local."}}, TTL: 5}
	if c.reverse {
		c.cfg.Domains.Reverse = []string{"in-addr.arpa."}
	}
	c.cfg.Prepare()
	c.table = zone.NewTable(zone.NewDirectory(c.cfg, map[string]struct{}{}, false, 0))
	system := actor.NewActorSystem(actor.WithLoggerFactory(func(*actor.ActorSystem) *slog.Logger { return logger }))
	var synced atomic.Bool
	manager := system.Root.Spawn(zonemanager.NewHookedManagerProps(tune(zonemanager.Hooked{Config: zonemanager.Config{Answer: c.cfg, Table: c.table,
		Sources: []string{manifest.SourceName}, Now: time.Now, Logger: logger, Synced: &synced}})))
	initial, err := manifest.Load(nil, []string{c.file})
	if err != nil {
		t.Fatal(err)
	}
	source := system.Root.Spawn(manifest.NewProps(manifest.Config{Files: []string{c.file}, Interval: interval,
		Manager: manager, Logger: logger}, initial))
	t.Cleanup(func() {
		system.Root.StopFuture(source).Wait()
		system.Root.StopFuture(manager).Wait()
		system.Shutdown()
	})
	testutil.Eventually(t, 10*time.Second, func() error {
		if !synced.Load() {
			return fmt.Errorf("not synced")
		}
		return nil
	})
	return system, manager
}

// check returns an error unless name.shop.svc.cluster.local has the A
// record ip.
func (c *cluster) check(name, ip string) error {
	q := zone.Question{Name: name + ".shop.svc.cluster.local.", Type: dns.TypeA}
	r := zone.Answer(c.cfg, c.table, q)
	if r.Rcode != dns.RcodeSuccess || len(r.Answer) != 1 {
		return fmt.Errorf("%s: rcode %s, %d records", q.Name, dns.RcodeToString[r.Rcode], len(r.Answer))
	}
	if a, ok := r.Answer[0].(*dns.A); !ok || a.A.String() != ip {
		return fmt.Errorf("%s: %v, want %s", q.Name, r.Answer[0], ip)
	}
	return nil
}

// asking queries names over and over until stopped and keeps the wrong
// answers.
type asking struct {
	stop    chan struct{}
	done    chan struct{}
	asked   atomic.Int64
	mu      sync.Mutex
	wrong   []string
	cluster *cluster
}

func (c *cluster) startAsking(names map[string]string) *asking {
	a := &asking{stop: make(chan struct{}), done: make(chan struct{}), cluster: c}
	go func() {
		defer close(a.done)
		for {
			select {
			case <-a.stop:
				return
			default:
			}
			for name, ip := range names {
				if err := c.check(name, ip); err != nil {
					a.mu.Lock()
					a.wrong = append(a.wrong, err.Error())
					a.mu.Unlock()
				}
				a.asked.Add(1)
			}
		}
	}()
	return a
}

func (a *asking) finish(t *testing.T) {
	t.Helper()
	close(a.stop)
	<-a.done
	if len(a.wrong) > 0 {
		t.Fatalf("%d wrong answers of %d, first: %s", len(a.wrong), a.asked.Load(), a.wrong[0])
	}
	if a.asked.Load() == 0 {
		t.Fatal("nothing was asked")
	}
}

func (c *cluster) eventually(t *testing.T, name, ip string) {
	t.Helper()
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("log:\n%s", c.log)
		}
	})
	testutil.Eventually(t, 10*time.Second, func() error { return c.check(name, ip) })
}

// A zone actor that panics on a change loses that change; its supervisor
// restarts it, and it rebuilds from the sources, so the change is served,
// and so is a later one. Queries never get a wrong answer meanwhile.
func TestRestartedZoneRebuildsFromSources(t *testing.T) {
	var failed atomic.Bool
	c := startCluster(t, func(key string, names []string) {
		if slices.Contains(names, "cart") && failed.CompareAndSwap(false, true) {
			panic("injected fault")
		}
	}, service("web", "10.96.0.10"), service("api", "10.96.0.11"))
	c.eventually(t, "web", "10.96.0.10")
	a := c.startAsking(map[string]string{"web": "10.96.0.10", "api": "10.96.0.11"})

	c.write(t, service("web", "10.96.0.10"), service("api", "10.96.0.11"), service("cart", "10.96.0.12"))
	c.eventually(t, "cart", "10.96.0.12")
	if !failed.Load() {
		t.Fatal("the zone actor did not fail on the change")
	}
	if !strings.Contains(c.log.String(), "zone rebuilt from the sources") {
		t.Fatalf("no rebuild logged:\n%s", c.log)
	}
	c.write(t, service("web", "10.96.0.10"), service("api", "10.96.0.11"), service("cart", "10.96.0.12"),
		service("orders", "10.96.0.13"))
	c.eventually(t, "orders", "10.96.0.13")
	a.finish(t)
}

// A change that makes the zone actor panic every time is not replayed into
// it again and again: after one rebuild the zone resumes from its last
// snapshot, keeps answering, and takes later changes, however often the
// change comes back.
func TestZoneFailingAgainIsNotRebuiltInALoop(t *testing.T) {
	var failures atomic.Int32
	c := startCluster(t, func(key string, names []string) {
		if slices.Contains(names, "poison") {
			failures.Add(1)
			panic("injected fault")
		}
	}, service("web", "10.96.0.10"))
	c.eventually(t, "web", "10.96.0.10")
	a := c.startAsking(map[string]string{"web": "10.96.0.10"})

	c.write(t, service("web", "10.96.0.10"), service("poison", "10.96.0.66"))
	testutil.Eventually(t, 10*time.Second, func() error {
		if !strings.Contains(c.log.String(), "failed again soon after a rebuild") {
			return fmt.Errorf("%d failures, no second failure logged", failures.Load())
		}
		return nil
	})
	if n := failures.Load(); n != 2 {
		t.Fatalf("the zone actor failed %d times, want 2: the live change and its one replay", n)
	}
	// More failures than a supervisor usually tolerates in a minute.
	for i := range 12 {
		before := failures.Load()
		c.write(t, service("web", "10.96.0.10"), service("poison", fmt.Sprintf("10.96.1.%d", i)))
		testutil.Eventually(t, 10*time.Second, func() error {
			if failures.Load() == before {
				return fmt.Errorf("change %d of the poison service did not reach the zone", i)
			}
			return nil
		})
	}
	// Poison unchanged, so cart comes in a batch of its own.
	c.write(t, service("web", "10.96.0.10"), service("poison", "10.96.1.11"), service("cart", "10.96.0.12"))
	c.eventually(t, "cart", "10.96.0.12")
	a.finish(t)
}

// checkPTR returns an error unless the reverse name of ip has the one PTR
// name.shop.svc.cluster.local.
func (c *cluster) checkPTR(ip, name string) error {
	rev, err := dns.ReverseAddr(ip)
	if err != nil {
		return err
	}
	r := zone.Answer(c.cfg, c.table, zone.Question{Name: rev, Type: dns.TypePTR})
	if r.Rcode != dns.RcodeSuccess || len(r.Answer) != 1 {
		return fmt.Errorf("%s: rcode %s, %d records", rev, dns.RcodeToString[r.Rcode], len(r.Answer))
	}
	if p, ok := r.Answer[0].(*dns.PTR); !ok || p.Ptr != name+".shop.svc.cluster.local." {
		return fmt.Errorf("%s: %v, want %s", rev, r.Answer[0], name)
	}
	return nil
}

// Reverse zones share pool actors: one that panics on a change takes its
// pool down, and with it every zone the pool runs. The pool is restarted
// with them all, each serving its last snapshot while the Manager rebuilds
// them in one replay, so the lost change is served, so is a later change
// of another zone of the pool, and no reverse name gets a wrong answer
// meanwhile.
func TestRestartedReversePoolRebuildsItsZones(t *testing.T) {
	var armed, failed atomic.Bool
	c := &cluster{file: filepath.Join(t.TempDir(), "cluster.yaml"), log: &testutil.SyncBuffer{}, reverse: true}
	initial := []string{service("web", "10.96.0.10"), service("api", "10.96.1.11"), service("db", "10.96.2.12")}
	c.write(t, initial...)
	c.serve(t, slog.New(slog.NewTextHandler(c.log, nil)), 20*time.Millisecond, func(cfg zonemanager.Hooked) zonemanager.Hooked {
		return zonemanager.WithReversePools(zonemanager.WithFault(cfg, func(key string, _ []string) {
			if key == "0.96.10.in-addr.arpa." && armed.Load() && failed.CompareAndSwap(false, true) {
				panic("injected fault")
			}
		}), 1)
	})
	served := map[string]string{"10.96.0.10": "web", "10.96.1.11": "api", "10.96.2.12": "db"}
	for ip, name := range served {
		testutil.Eventually(t, 10*time.Second, func() error { return c.checkPTR(ip, name) })
	}
	armed.Store(true)

	stop, done := make(chan struct{}), make(chan []string)
	go func() {
		var wrong []string
		for asked := 0; ; asked++ {
			select {
			case <-stop:
				if asked == 0 {
					wrong = append(wrong, "nothing was asked")
				}
				done <- wrong
				return
			default:
			}
			for ip, name := range served {
				if err := c.checkPTR(ip, name); err != nil {
					wrong = append(wrong, err.Error())
				}
			}
		}
	}()
	c.write(t, append(initial, service("cart", "10.96.0.13"))...)
	testutil.Eventually(t, 10*time.Second, func() error { return c.checkPTR("10.96.0.13", "cart") })
	if !failed.Load() {
		t.Fatal("the reverse zone did not fail on the change")
	}
	for _, want := range []string{"reverse zone pool restarted", "zone rebuilt from the sources"} {
		if !strings.Contains(c.log.String(), want) {
			t.Fatalf("%q not logged:\n%s", want, c.log)
		}
	}
	c.write(t, append(initial, service("cart", "10.96.0.13"), service("orders", "10.96.1.14"))...)
	testutil.Eventually(t, 10*time.Second, func() error { return c.checkPTR("10.96.1.14", "orders") })
	close(stop)
	if wrong := <-done; len(wrong) > 0 {
		t.Fatalf("%d wrong answers, first: %s\nlog:\n%s", len(wrong), wrong[0], c.log)
	}
}

// A reverse zone whose last address goes stops, in its pool, and its slot
// leaves the table: the name is NXDOMAIN, the zone's neighbours in the
// pool stay.
func TestPooledReverseZoneStopsWithItsLastAddress(t *testing.T) {
	c := &cluster{file: filepath.Join(t.TempDir(), "cluster.yaml"), log: &testutil.SyncBuffer{}, reverse: true}
	c.write(t, service("web", "10.96.0.10"), service("api", "10.96.1.11"))
	c.serve(t, slog.New(slog.NewTextHandler(c.log, nil)), 20*time.Millisecond,
		func(cfg zonemanager.Hooked) zonemanager.Hooked { return zonemanager.WithReversePools(cfg, 1) })
	testutil.Eventually(t, 10*time.Second, func() error { return c.checkPTR("10.96.1.11", "api") })

	c.write(t, service("web", "10.96.0.10"))
	testutil.Eventually(t, 10*time.Second, func() error {
		if slices.Contains(c.table.Keys(), "1.96.10.in-addr.arpa.") {
			return fmt.Errorf("the emptied zone's slot is still in the table: %v", c.table.Keys())
		}
		return nil
	})
	r := zone.Answer(c.cfg, c.table, zone.Question{Name: "11.1.96.10.in-addr.arpa.", Type: dns.TypePTR})
	if r.Rcode != dns.RcodeNameError {
		t.Fatalf("the removed address: rcode %s, want NXDOMAIN", dns.RcodeToString[r.Rcode])
	}
	if err := c.checkPTR("10.96.0.10", "web"); err != nil {
		t.Fatal(err)
	}
}
