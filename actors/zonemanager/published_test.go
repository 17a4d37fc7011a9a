package zonemanager_test

import (
	"fmt"
	"io"
	"log/slog"
	"net/netip"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/asynkron/protoactor-go/actor"

	"github.com/shardns/shardns/actors/zonemanager"
	"github.com/shardns/shardns/internal/testutil"
	"github.com/shardns/shardns/model"
	"github.com/shardns/shardns/zone"
)

// publications records what zone actors report to the Observer.
type publications struct {
	mu  sync.Mutex
	all []zonemanager.Published
}

func (p *publications) add(x zonemanager.Published) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.all = append(p.all, x)
}

// of returns what was reported for key so far.
func (p *publications) of(key string) []zonemanager.Published {
	p.mu.Lock()
	defer p.mu.Unlock()
	var out []zonemanager.Published
	for _, x := range p.all {
		if x.Zone == key {
			out = append(out, x)
		}
	}
	return out
}

// next waits for the report of key after the n it had, and returns it.
func (p *publications) next(t *testing.T, key string, n int) zonemanager.Published {
	t.Helper()
	var got zonemanager.Published
	testutil.Eventually(t, 10*time.Second, func() error {
		reports := p.of(key)
		if len(reports) <= n {
			return fmt.Errorf("%s: %d reports, waiting for report %d", key, len(reports), n+1)
		}
		got = reports[n]
		return nil
	})
	return got
}

func startObservedZones(t *testing.T, seen *publications) (*actor.ActorSystem, *actor.PID) {
	t.Helper()
	cfg := &zone.Config{Domains: zone.Domains{Cluster: []string{"cluster.local."}, Reverse: []string{"in-addr.arpa."}}, TTL: 5}
	cfg.Prepare()
	table := zone.NewTable(zone.NewDirectory(cfg, map[string]struct{}{}, false, 0))
	logger := slog.New(slog.NewTextHandler(io.Discard, nil))
	system := actor.NewActorSystem(actor.WithLoggerFactory(func(*actor.ActorSystem) *slog.Logger { return logger }))
	t.Cleanup(system.Shutdown)
	var synced atomic.Bool
	manager := system.Root.Spawn(zonemanager.NewManagerProps(zonemanager.Config{Answer: cfg, Table: table,
		Sources: []string{"kubernetes"}, Now: time.Now, Logger: logger, Synced: &synced,
		Observer: &observed{published: seen.add}}))
	return system, manager
}

func frozen(t *testing.T, obj interface{ Key() model.Key }, trigger time.Time) model.Change {
	t.Helper()
	f, ok := model.Freeze(obj)
	if !ok {
		t.Fatalf("%T does not freeze", obj)
	}
	return model.Change{Key: obj.Key(), Object: f, Trigger: trigger}
}

// A service zone reports the labels of the services a batch changed, with
// the earliest trigger of its changes; a zone built whole (its first
// build) and a reverse zone report every name.
func TestPublishReportsChangedLabels(t *testing.T) {
	var seen publications
	system, manager := startObservedZones(t, &seen)
	const key = "shop.svc.cluster.local."
	svc := func(name string, ip byte) *model.Service {
		return &model.Service{Namespace: "shop", Name: name, Ports: []model.Port{{Name: "http", Protocol: "TCP", Port: 80}},
			ClusterIPs: []netip.Addr{netip.AddrFrom4([4]byte{10, 96, 0, ip})}}
	}
	slice := func(service string, ip byte) *model.EndpointSlice {
		return &model.EndpointSlice{Namespace: "shop", Name: service + "-a", ServiceName: service,
			Endpoints: []model.Endpoint{{Ready: true, Addresses: []netip.Addr{netip.AddrFrom4([4]byte{10, 1, 0, ip})}}}}
	}
	ns := &model.Namespace{Name: "shop"}
	t0 := time.Unix(1000, 0)
	system.Root.Send(manager, &zonemanager.Apply{Source: "kubernetes", Changes: []model.Change{{Key: ns.Key(), Object: ns},
		frozen(t, svc("web", 1), time.Time{}), frozen(t, svc("db", 2), time.Time{}), frozen(t, slice("web", 1), time.Time{})}})
	system.Root.Send(manager, &zonemanager.Synced{Source: "kubernetes"})

	for _, tc := range []struct {
		name    string
		changes []model.Change
		want    zonemanager.Published
	}{
		{"first build", nil, zonemanager.Published{Zone: key, All: true}},
		{"one slice", []model.Change{frozen(t, slice("web", 7), t0)},
			zonemanager.Published{Zone: key, Labels: []string{"web"}, Trigger: t0}},
		{"a service goes, another changes, earliest trigger kept",
			[]model.Change{{Key: model.Key{Kind: model.KindService, Namespace: "shop", Name: "db"}, Trigger: t0.Add(time.Second)},
				frozen(t, svc("Web", 9), t0.Add(-time.Second)), frozen(t, svc("api", 3), time.Time{})},
			zonemanager.Published{Zone: key, Labels: []string{"api", "db", "web"}, Trigger: t0.Add(-time.Second)}},
	} {
		n := len(seen.of(key))
		if tc.changes != nil {
			system.Root.Send(manager, &zonemanager.Apply{Source: "kubernetes", Changes: tc.changes})
		} else {
			n = 0
		}
		got := seen.next(t, key, n)
		if got.Zone != tc.want.Zone || got.All != tc.want.All || !slices.Equal(got.Labels, tc.want.Labels) ||
			!got.Trigger.Equal(tc.want.Trigger) {
			t.Errorf("%s: reported %+v, want %+v", tc.name, got, tc.want)
		}
	}
	// The slice's address has its reverse zone, built whole each time.
	if got := seen.next(t, "0.1.10.in-addr.arpa.", 0); !got.All {
		t.Errorf("reverse zone reported %+v, want every name", got)
	}
}

// A kept zone built again into new memory (a repack) changed nothing:
// it reports nothing. A zone handed over reports every name as it stops.
func TestRepackReportsNothing(t *testing.T) {
	var seen publications
	var repacked sync.Map
	c, system, manager, shared := servedAlone(t, 10, 10, func(cfg zonemanager.Hooked) zonemanager.Hooked {
		cfg.Observer = &observed{published: seen.add}
		return zonemanager.WithRepacked(cfg, func(key string) { repacked.Store(key, true) })
	})
	var kept, lost []string
	for _, key := range c.table.Keys() {
		if shared.Owns("a", key) {
			kept = append(kept, key)
		} else {
			lost = append(lost, key)
		}
	}
	before := map[string]int{}
	for _, key := range kept {
		before[key] = len(seen.of(key))
	}
	system.Root.Send(manager, &zonemanager.RingChanged{Ring: shared})
	testutil.Eventually(t, 10*time.Second, func() error {
		for _, key := range kept {
			if _, ok := repacked.Load(key); !ok {
				return fmt.Errorf("kept zone %s not repacked yet", key)
			}
		}
		return nil
	})
	for _, key := range kept {
		if n := len(seen.of(key)); n != before[key] {
			t.Errorf("kept zone %s: %d reports after its repack, had %d", key, n, before[key])
		}
	}
	testutil.Eventually(t, 10*time.Second, func() error {
		for _, key := range lost {
			reports := seen.of(key)
			if len(reports) == 0 || !reports[len(reports)-1].All {
				return fmt.Errorf("lost zone %s last reported %+v, want every name", key, reports)
			}
		}
		return nil
	})
}
