package functional

import (
	"context"
	"fmt"
	"log/slog"
	"net"
	"net/netip"
	"sync/atomic"
	"testing"
	"time"

	"github.com/asynkron/protoactor-go/actor"
	"github.com/asynkron/protoactor-go/remote"
	"github.com/miekg/dns"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/shardns/shardns/actors/dispatch"
	"github.com/shardns/shardns/actors/zonemanager"
	"github.com/shardns/shardns/cluster/trust"
	"github.com/shardns/shardns/cluster/wire"
	"github.com/shardns/shardns/integration/harness"
	"github.com/shardns/shardns/internal/testutil"
	"github.com/shardns/shardns/model"
	"github.com/shardns/shardns/query"
	"github.com/shardns/shardns/zone"
)

// coherentProcess is an actor system with remote on a loopback port behind
// the remote port's guard (plain text), its dispatch actors, and its side
// of the coherence protocol applying what owners tell into fresh.
type coherentProcess struct {
	system *actor.ActorSystem
	client *dispatch.Client
	co     *dispatch.Coherence
	fresh  *query.Freshness
	addr   string
}

// startCoherentProcess starts one; two in one process race in
// protoactor-go's remote (see startRemoteSystem), so this test lives in
// the integration tier.
func startCoherentProcess(t *testing.T, nodeLocal bool, source dispatch.Source) *coherentProcess {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	port := l.Addr().(*net.TCPAddr).Port
	l.Close()
	p := &coherentProcess{addr: fmt.Sprintf("127.0.0.1:%d", port), fresh: query.NewFreshness(time.Minute, time.Now)}
	p.system = actor.NewActorSystem(actor.WithLoggerFactory(func(*actor.ActorSystem) *slog.Logger { return harness.DiscardLog }))
	guard, err := trust.NewGuard(trust.GuardConfig{Admitted: func(netip.Addr) bool { return true },
		Routes: dispatch.Routes(nodeLocal), Rejections: trust.NewRejections(func(string) {}, harness.DiscardLog, time.Now),
		Limits: trust.Limits{MessageBytes: dispatch.MaxMessageBytes}})
	if err != nil {
		t.Fatal(err)
	}
	r := remote.NewRemote(p.system, remote.Configure("127.0.0.1", port, remote.WithServerOptions(guard.ServerOptions()...),
		remote.WithDialOptions(guard.DialOptions()...)))
	r.Start()
	t.Cleanup(func() { r.Shutdown(true); p.system.Shutdown() })
	counters := dispatch.Counters{
		MailboxDropped: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "dropped"}, []string{"mailbox"}),
		RepliesDropped: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "replies"}, []string{"reason"}),
	}
	if p.client, err = dispatch.Start(p.system, source, nil, counters); err != nil {
		t.Fatal(err)
	}
	p.co, err = p.client.StartCoherence(dispatch.CoherenceConfig{Now: time.Now, Lost: p.fresh.ForgetAll,
		Apply: func(changes []*wire.ZoneChange) {
			cs := make([]query.Change, len(changes))
			for i, ch := range changes {
				cs[i] = query.Change{Zone: ch.Zone, Labels: ch.Labels, All: ch.All}
			}
			p.fresh.Forget(cs)
		}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(p.co.Stop)
	return p
}

// An owner's change reaches, over actor remote and through both guards,
// the record of a node-local process that asked about the zone: its
// answers of the changed service, asked before the change, are outdated
// there; those of another service are not.
func TestOwnerChangeReachesAsker(t *testing.T) {
	cfg := &zone.Config{Domains: zone.Domains{Cluster: []string{"cluster.local."}}, TTL: 30}
	cfg.Prepare()
	table := zone.NewTable(zone.NewDirectory(cfg, map[string]struct{}{}, false, 0))
	owner := startCoherentProcess(t, false, func() (*zone.Config, zone.Reader) { return cfg, table })
	// The zone's first build (every name) is told to nobody: the test
	// asks once it has, as a client would any time later.
	var asking atomic.Bool
	var synced atomic.Bool
	manager := owner.system.Root.Spawn(zonemanager.NewManagerProps(zonemanager.Config{Answer: cfg, Table: table,
		Sources: []string{"kubernetes"}, Now: time.Now, Logger: harness.DiscardLog, Synced: &synced,
		Observer: publishedTo{f: func(p zonemanager.Published) {
			if asking.Load() {
				owner.co.Published(p)
			}
		}}}))
	service := func(name, ip string) model.Change {
		s := &model.Service{Namespace: "shop", Name: name, ClusterIPs: []netip.Addr{netip.MustParseAddr(ip)},
			Ports: []model.Port{{Name: "http", Protocol: "TCP", Port: 80}}}
		f, ok := model.Freeze(s)
		if !ok {
			t.Fatalf("service %s does not freeze", name)
		}
		return model.Change{Key: s.Key(), Object: f}
	}
	ns := &model.Namespace{Name: "shop"}
	owner.system.Root.Send(manager, &zonemanager.Apply{Source: "kubernetes", Changes: []model.Change{{Key: ns.Key(), Object: ns},
		service("web", "10.96.0.1"), service("db", "10.96.0.2")}})
	owner.system.Root.Send(manager, &zonemanager.Synced{Source: "kubernetes"})
	testutil.Eventually(t, 10*time.Second, func() error {
		if !synced.Load() {
			return fmt.Errorf("the owner has not synced")
		}
		return nil
	})

	asker := startCoherentProcess(t, true, func() (*zone.Config, zone.Reader) { return nil, nil })
	const zoneKey = "shop.svc.cluster.local."
	asking.Store(true)
	asked := time.Now()
	for _, name := range []string{"web.shop.svc.cluster.local.", "db.shop.svc.cluster.local."} {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		m, _, err := asker.client.Ask(ctx, owner.addr, zoneKey, name, dns.TypeA, zone.Topology{})
		cancel()
		if err != nil || len(m.Answer) != 1 {
			t.Fatalf("asking the owner for %s: %v %v", name, m, err)
		}
	}
	owner.system.Root.Send(manager, &zonemanager.Apply{Source: "kubernetes", Changes: []model.Change{service("web", "10.96.0.9")}})
	testutil.Eventually(t, 5*time.Second, func() error {
		if asker.fresh.Current(zoneKey, "web.shop.svc.cluster.local.", asked) {
			return fmt.Errorf("the answer of web asked before its change is still current at the asker")
		}
		return nil
	})
	if !asker.fresh.Current(zoneKey, "db.shop.svc.cluster.local.", asked) {
		t.Error("the answer of db, which did not change, is outdated")
	}
}

// publishedTo is an Observer that hands what zone actors publish to f.
type publishedTo struct {
	zonemanager.NopObserver
	f func(zonemanager.Published)
}

func (o publishedTo) Published(p zonemanager.Published) { o.f(p) }
