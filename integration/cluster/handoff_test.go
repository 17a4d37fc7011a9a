package cluster

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/netip"
	"sync/atomic"
	"testing"
	"time"

	"github.com/asynkron/protoactor-go/actor"
	"github.com/asynkron/protoactor-go/remote"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/shardns/shardns/actors/dispatch"
	"github.com/shardns/shardns/actors/zonemanager"
	"github.com/shardns/shardns/internal/testutil"
	"github.com/shardns/shardns/model"
	"github.com/shardns/shardns/zone"
)

// startRemoteSystem is an actor system with remote on a loopback port,
// and its handoff actors. Two of them in one process race in protoactor-go
// (each remote's Start sets gRPC's global logger while the other's server
// logs): this test lives in the integration tier, which runs without the
// race detector.
func startRemoteSystem(t *testing.T, manager dispatch.Exporter) (*actor.ActorSystem, *dispatch.Handoff, string) {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	port := l.Addr().(*net.TCPAddr).Port
	l.Close()
	logger := slog.New(slog.NewTextHandler(io.Discard, nil))
	system := actor.NewActorSystem(actor.WithLoggerFactory(func(*actor.ActorSystem) *slog.Logger { return logger }))
	r := remote.NewRemote(system, remote.Configure("127.0.0.1", port))
	r.Start()
	t.Cleanup(func() { r.Shutdown(true); system.Shutdown() })
	dropped := prometheus.NewCounterVec(prometheus.CounterOpts{Name: "dropped"}, []string{"mailbox"})
	h, err := dispatch.StartHandoff(system, manager, dispatch.Counters{MailboxDropped: dropped})
	if err != nil {
		t.Fatal(err)
	}
	return system, h, fmt.Sprintf("127.0.0.1:%d", port)
}

// A zone larger than many pages crosses from one replica's zone manager to
// another over protoactor-go remote whole: every Service and EndpointSlice
// once, as the holder has it; a zone not held there is ErrNotHeld.
func TestHandoffFetchesAZoneOfManyPages(t *testing.T) {
	var managerPID atomic.Pointer[actor.PID]
	holder, _, holderAddr := startRemoteSystem(t, func() *actor.PID { return managerPID.Load() })
	_, asker, _ := startRemoteSystem(t, func() *actor.PID { return nil })

	cfg := &zone.Config{Domains: zone.Domains{Cluster: []string{"cluster.local."}, Reverse: []string{"in-addr.arpa."}}, TTL: 5}
	cfg.Prepare()
	table := zone.NewTable(zone.NewDirectory(cfg, map[string]struct{}{}, false, 0))
	var synced atomic.Bool
	pid := holder.Root.Spawn(zonemanager.NewManagerProps(zonemanager.Config{Answer: cfg, Table: table, Now: time.Now,
		Logger: slog.New(slog.NewTextHandler(io.Discard, nil)), Synced: &synced}))
	managerPID.Store(pid)

	const services = 3000 // with their slices, about 4 pages
	want := map[model.Key]model.Frozen{}
	var changes []model.Change
	add := func(obj any, key model.Key) {
		changes = append(changes, model.Change{Key: key, Object: obj})
		f, _ := model.Freeze(obj)
		want[key] = f
	}
	for i := range services {
		s := &model.Service{Namespace: "big", Name: fmt.Sprintf("svc-%04d", i), Type: model.ServiceClusterIP,
			ClusterIPs: []netip.Addr{netip.AddrFrom4([4]byte{10, 96, byte(i >> 8), byte(i)})},
			Ports:      []model.Port{{Name: "http", Protocol: "TCP", Port: 80}}}
		add(s, s.Key())
		es := &model.EndpointSlice{Namespace: "big", Name: s.Name + "-x1", ServiceName: s.Name,
			Ports: []model.Port{{Name: "http", Protocol: "TCP", Port: 8080}}}
		for j := range 10 {
			es.Endpoints = append(es.Endpoints, model.Endpoint{Ready: true, Hostname: fmt.Sprintf("pod-%d", j),
				TargetPodName: fmt.Sprintf("%s-pod-%d", s.Name, j), Addresses: []netip.Addr{netip.AddrFrom4([4]byte{10, 1, byte(i >> 4), byte(i<<4 | j)})}})
		}
		add(es, es.Key())
	}
	holder.Root.Send(pid, &zonemanager.Apply{Source: "kubernetes", Changes: changes})
	bytes := 0
	for _, f := range want {
		bytes += len(f)
	}
	if bytes < 3*dispatch.StatePageBytes {
		t.Fatalf("the zone holds %d bytes of objects: fewer than three pages, the test checks little", bytes)
	}

	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	var got []model.Change
	testutil.Eventually(t, 10*time.Second, func() error {
		var err error
		got, err = asker.Fetch(ctx, holderAddr, "big.svc.cluster.local.", "big")
		if err == nil && len(got) < len(want) {
			err = fmt.Errorf("%d of %d objects: the zone is still loading", len(got), len(want))
		}
		return err
	})
	if len(got) != len(want) {
		t.Fatalf("fetched %d objects, want %d", len(got), len(want))
	}
	for _, c := range got {
		f, ok := c.Object.(model.Frozen)
		if !ok || want[c.Key] != f {
			t.Fatalf("%s fetched twice, or not as the holder has it (%T)", c.Key, c.Object)
		}
		delete(want, c.Key)
	}
	if _, err := asker.Fetch(ctx, holderAddr, "small.svc.cluster.local.", "small"); !errors.Is(err, zonemanager.ErrNotHeld) {
		t.Fatalf("a zone the holder does not have: %v, want ErrNotHeld", err)
	}
	if _, err := asker.Fetch(ctx, holderAddr, "0.96.10.in-addr.arpa.", ""); !errors.Is(err, zonemanager.ErrNotHeld) {
		t.Fatalf("a reverse zone: %v, want ErrNotHeld", err)
	}
}
