package zonemanager_test

import (
	"fmt"
	"io"
	"log/slog"
	"net/netip"
	"sync/atomic"
	"testing"
	"time"

	"github.com/asynkron/protoactor-go/actor"
	"github.com/miekg/dns"

	"github.com/shardns/shardns/actors/zonemanager"
	"github.com/shardns/shardns/internal/testutil"
	"github.com/shardns/shardns/model"
	"github.com/shardns/shardns/zone"
)

// Services and EndpointSlices come frozen from the Kubernetes source: the
// zones built from them answer their names, SRV records and PTRs, an
// update replaces what the old version served, and deletes remove it.
func TestFrozenChangesAnswer(t *testing.T) {
	cfg, table, system, manager := startKubernetesZones(t)
	frozen := func(obj interface{ Key() model.Key }) model.Change {
		f, ok := model.Freeze(obj)
		if !ok {
			t.Fatalf("%T does not freeze", obj)
		}
		return model.Change{Key: obj.Key(), Object: f}
	}
	http := model.Port{Name: "http", Protocol: "TCP", Port: 80}
	svc := &model.Service{Namespace: "shop", Name: "db", Type: model.ServiceHeadless, Ports: []model.Port{http}}
	slice := func(ip string) *model.EndpointSlice {
		return &model.EndpointSlice{Namespace: "shop", Name: "db-x", ServiceName: "db", Ports: []model.Port{http},
			Endpoints: []model.Endpoint{{Ready: true, Hostname: "db-0", Addresses: []netip.Addr{netip.MustParseAddr(ip)}}}}
	}
	apply := func(changes ...model.Change) {
		system.Root.Send(manager, &zonemanager.Apply{Source: "kubernetes", Changes: changes})
	}
	apply(model.Change{Key: model.Key{Kind: model.KindNamespace, Name: "shop"}, Object: &model.Namespace{Name: "shop"}},
		frozen(svc), frozen(slice("10.1.0.5")))
	system.Root.Send(manager, &zonemanager.Synced{Source: "kubernetes"})

	answers := func(name string, qtype uint16, want string) error {
		r := zone.Answer(cfg, table, zone.Question{Name: name, Type: qtype})
		if r.Rcode != dns.RcodeSuccess || len(r.Answer) != 1 {
			return fmt.Errorf("%s %s: rcode %s, %d answers, want %s", name, dns.TypeToString[qtype], dns.RcodeToString[r.Rcode], len(r.Answer), want)
		}
		var got string
		switch rr := r.Answer[0].(type) {
		case *dns.A:
			got = rr.A.String()
		case *dns.SRV:
			got = fmt.Sprintf("%d %s", rr.Port, rr.Target)
		case *dns.PTR:
			got = rr.Ptr
		}
		if got != want {
			return fmt.Errorf("%s %s = %s, want %s", name, dns.TypeToString[qtype], got, want)
		}
		return nil
	}
	all := func(checks ...func() error) func() error {
		return func() error {
			for _, check := range checks {
				if err := check(); err != nil {
					return err
				}
			}
			return nil
		}
	}
	testutil.Eventually(t, 10*time.Second, all(
		func() error { return answers("db.shop.svc.cluster.local.", dns.TypeA, "10.1.0.5") },
		func() error {
			return answers("_http._tcp.db.shop.svc.cluster.local.", dns.TypeSRV, "80 db-0.db.shop.svc.cluster.local.")
		},
		func() error { return answers("5.0.1.10.in-addr.arpa.", dns.TypePTR, "db-0.db.shop.svc.cluster.local.") },
	))

	apply(frozen(slice("10.1.0.6")))
	testutil.Eventually(t, 10*time.Second, all(
		func() error { return answers("db.shop.svc.cluster.local.", dns.TypeA, "10.1.0.6") },
		func() error { return answers("6.0.1.10.in-addr.arpa.", dns.TypePTR, "db-0.db.shop.svc.cluster.local.") },
		func() error {
			if r := zone.Answer(cfg, table, zone.Question{Name: "5.0.1.10.in-addr.arpa.", Type: dns.TypePTR}); r.Rcode != dns.RcodeNameError {
				return fmt.Errorf("the old address's PTR: rcode %s, want NXDOMAIN", dns.RcodeToString[r.Rcode])
			}
			return nil
		},
	))

	apply(model.Change{Key: svc.Key()}, model.Change{Key: slice("10.1.0.6").Key()})
	testutil.Eventually(t, 10*time.Second, func() error {
		for _, q := range []zone.Question{{Name: "db.shop.svc.cluster.local.", Type: dns.TypeA}, {Name: "6.0.1.10.in-addr.arpa.", Type: dns.TypePTR}} {
			if r := zone.Answer(cfg, table, q); r.Rcode != dns.RcodeNameError {
				return fmt.Errorf("%s after the deletes: rcode %s, want NXDOMAIN", q.Name, dns.RcodeToString[r.Rcode])
			}
		}
		return nil
	})
}

// startKubernetesZones starts a zone manager fed by one source, the
// kubernetes one, publishing to a table of the cluster.local and
// in-addr.arpa zones.
func startKubernetesZones(t *testing.T) (*zone.Config, *zone.Table, *actor.ActorSystem, *actor.PID) {
	t.Helper()
	return startZones(t, zone.Domains{Cluster: []string{"cluster.local."}, Reverse: []string{"in-addr.arpa."}})
}

// startZones is startKubernetesZones serving domains.
func startZones(t *testing.T, domains zone.Domains) (*zone.Config, *zone.Table, *actor.ActorSystem, *actor.PID) {
	t.Helper()
	cfg := &zone.Config{Domains: domains, TTL: 5}
	cfg.Prepare()
	table := zone.NewTable(zone.NewDirectory(cfg, map[string]struct{}{}, false, 0))
	logger := slog.New(slog.NewTextHandler(io.Discard, nil))
	system := actor.NewActorSystem(actor.WithLoggerFactory(func(*actor.ActorSystem) *slog.Logger { return logger }))
	t.Cleanup(system.Shutdown)
	var synced atomic.Bool
	manager := system.Root.Spawn(zonemanager.NewManagerProps(zonemanager.Config{Answer: cfg, Table: table,
		Sources: []string{"kubernetes"}, Now: time.Now, Logger: logger, Synced: &synced}))
	return cfg, table, system, manager
}
