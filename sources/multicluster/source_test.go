package multicluster

import (
	"fmt"
	"io"
	"log/slog"
	"sync/atomic"
	"testing"
	"time"

	"github.com/asynkron/protoactor-go/actor"
	"github.com/miekg/dns"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	discoveryfake "k8s.io/client-go/discovery/fake"
	dynamicfake "k8s.io/client-go/dynamic/fake"
	clienttesting "k8s.io/client-go/testing"
	"k8s.io/client-go/tools/cache"

	"github.com/shardns/shardns/actors/zonemanager"
	"github.com/shardns/shardns/internal/testutil"
	"github.com/shardns/shardns/model"
	"github.com/shardns/shardns/sources"
	"github.com/shardns/shardns/zone"
)

var quiet = slog.New(slog.NewTextHandler(io.Discard, nil))

// discoveryOf serves ServiceImports when served is set.
func discoveryOf(served bool) *discoveryfake.FakeDiscovery {
	d := &discoveryfake.FakeDiscovery{Fake: &clienttesting.Fake{}}
	if served {
		d.Resources = []*metav1.APIResourceList{{GroupVersion: ServiceImports.GroupVersion().String(),
			APIResources: []metav1.APIResource{{Name: ServiceImports.Resource, Namespaced: true, Kind: "ServiceImport"}}}}
	}
	return d
}

func object(apiVersion, kind, ns, name string, labels map[string]any, fields map[string]any) *unstructured.Unstructured {
	meta := map[string]any{"namespace": ns, "name": name, "resourceVersion": "1"}
	if labels != nil {
		meta["labels"] = labels
	}
	obj := map[string]any{"apiVersion": apiVersion, "kind": kind, "metadata": meta}
	for k, v := range fields {
		obj[k] = v
	}
	return &unstructured.Unstructured{Object: obj}
}

// serve runs the source and a zone manager serving clusterset.local from
// it, and returns how names answer.
func serve(t *testing.T, served bool, objs ...runtime.Object) func(name string) (int, []string) {
	t.Helper()
	client := dynamicfake.NewSimpleDynamicClientWithCustomListKinds(runtime.NewScheme(),
		map[schema.GroupVersionResource]string{ServiceImports: "ServiceImportList", EndpointSlices: "EndpointSliceList"}, objs...)
	cfg := &zone.Config{Domains: zone.Domains{Cluster: []string{"cluster.local."}, Multicluster: []string{"clusterset.local."}}, TTL: 5}
	cfg.Prepare()
	table := zone.NewTable(zone.NewDirectory(cfg, map[string]struct{}{}, false, 0))
	system := actor.NewActorSystem(actor.WithLoggerFactory(func(*actor.ActorSystem) *slog.Logger { return quiet }))
	t.Cleanup(system.Shutdown)
	var synced atomic.Bool
	manager := system.Root.Spawn(zonemanager.NewManagerProps(zonemanager.Config{Answer: cfg, Table: table,
		Sources: []string{SourceName}, Now: time.Now, Logger: quiet, Synced: &synced}))
	ns := &model.Namespace{Name: "shop"}
	system.Root.Send(manager, &zonemanager.Apply{Source: "kubernetes", Changes: []model.Change{{Key: ns.Key(), Object: ns}}})
	host := system.Root.Spawn(actor.PropsFromFunc(watchWhole(t, manager)))
	src := system.Root.Spawn(NewProps(Config{Client: client, Discovery: discoveryOf(served), Manager: manager,
		Kubernetes: host, Logger: quiet}))
	t.Cleanup(func() { system.Root.StopFuture(src).Wait() })
	testutil.Eventually(t, 5*time.Second, func() error {
		if !synced.Load() {
			return fmt.Errorf("the source did not sync")
		}
		return nil
	})
	return func(name string) (int, []string) {
		r := zone.Answer(cfg, table, zone.Question{Name: name, Type: dns.TypeA})
		var got []string
		for _, rr := range r.Answer {
			got = append(got, rr.(*dns.A).A.String())
		}
		return r.Rcode, got
	}
}

// watchWhole stands in for the Kubernetes source, whose own tests run
// against a real API server: it watches the kinds asked for whole, as
// the Kubernetes source does where the API server does not shard.
func watchWhole(t *testing.T, manager *actor.PID) actor.ReceiveFunc {
	stop := make(chan struct{})
	t.Cleanup(func() { close(stop) })
	return func(ctx actor.Context) {
		msg, ok := ctx.Message().(*sources.WatchKinds)
		if !ok {
			return
		}
		root := ctx.ActorSystem().Root
		send := func(c model.Change) {
			root.Send(manager, &zonemanager.Apply{Source: "kubernetes", Changes: []model.Change{c}})
		}
		var synced []cache.InformerSynced
		for _, k := range msg.Kinds {
			informer := cache.NewSharedIndexInformer(k.ListWatch(func(*metav1.ListOptions) {}), k.Object(), 0, cache.Indexers{})
			if err := informer.SetTransform(k.Transform); err != nil {
				t.Error(err)
				return
			}
			reg, err := informer.AddEventHandler(k.Handler(send))
			if err != nil {
				t.Error(err)
				return
			}
			synced = append(synced, reg.HasSynced)
			go informer.Run(stop)
		}
		go func() {
			if cache.WaitForCacheSync(stop, synced...) {
				msg.Listed()
			}
		}()
	}
}

// An import's malformed address is skipped, the rest of it and every
// other import served; an imported slice answers for its headless import.
func TestSourceServesImports(t *testing.T) {
	const mcs = "multicluster.x-k8s.io/v1alpha1"
	port := []any{map[string]any{"name": "http", "protocol": "TCP", "port": int64(80)}}
	answer := serve(t, true,
		object(mcs, "ServiceImport", "shop", "web", nil, map[string]any{"spec": map[string]any{
			"type": "ClusterSetIP", "ips": []any{"10.42.0.300", "10.42.0.1"}, "ports": port}}),
		object(mcs, "ServiceImport", "shop", "db", nil, map[string]any{"spec": map[string]any{"type": "Headless", "ports": port}}),
		object(mcs, "ServiceImport", "shop", "broken", nil, map[string]any{"spec": map[string]any{"ips": "10.42.0.2"}}),
		object("discovery.k8s.io/v1", "EndpointSlice", "shop", "db-east", map[string]any{
			"multicluster.kubernetes.io/service-name": "db", "multicluster.kubernetes.io/source-cluster": "east"},
			map[string]any{"addressType": "IPv4", "ports": []any{map[string]any{"name": "http", "port": int64(80)}},
				"endpoints": []any{map[string]any{"addresses": []any{"172.20.0.1"}, "hostname": "db-0"}}}),
		object("discovery.k8s.io/v1", "EndpointSlice", "shop", "db-local", map[string]any{"kubernetes.io/service-name": "db"},
			map[string]any{"addressType": "IPv4", "endpoints": []any{map[string]any{"addresses": []any{"172.16.0.1"}}}}),
	)
	for name, want := range map[string]string{
		"web.shop.svc.clusterset.local.":                 "NOERROR [10.42.0.1]",
		"db.shop.svc.clusterset.local.":                  "NOERROR [172.20.0.1]",
		"db-0.east.db.shop.svc.clusterset.local.":        "NOERROR [172.20.0.1]",
		"broken.shop.svc.clusterset.local.":              "NXDOMAIN []",
		"172-16-0-1.local.db.shop.svc.clusterset.local.": "NXDOMAIN []",
	} {
		testutil.Eventually(t, 5*time.Second, func() error {
			rcode, got := answer(name)
			if s := fmt.Sprintf("%s %v", dns.RcodeToString[rcode], got); s != want {
				return fmt.Errorf("%s: %s, want %s", name, s, want)
			}
			return nil
		})
	}
}

// Without the ServiceImport resource the source counts as synced: a
// cluster without the MCS API's CRDs must not keep shardns unready.
func TestSourceWithoutServiceImports(t *testing.T) {
	answer := serve(t, false)
	if rcode, _ := answer("web.shop.svc.clusterset.local."); rcode != dns.RcodeNameError {
		t.Fatalf("rcode %s, want NXDOMAIN", dns.RcodeToString[rcode])
	}
}
