package istio

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"slices"
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

	"github.com/shardns/shardns/actors/zonemanager"
	"github.com/shardns/shardns/internal/testutil"
	"github.com/shardns/shardns/model"
	"github.com/shardns/shardns/zone"
)

var quiet = slog.New(slog.NewTextHandler(io.Discard, nil))

func discoveryOf(versions ...string) *discoveryfake.FakeDiscovery {
	d := &discoveryfake.FakeDiscovery{Fake: &clienttesting.Fake{}}
	for _, v := range versions {
		d.Resources = append(d.Resources, &metav1.APIResourceList{GroupVersion: Group + "/" + v,
			APIResources: []metav1.APIResource{{Name: Resource, Namespaced: true, Kind: "ServiceEntry"}}})
	}
	return d
}

func TestPick(t *testing.T) {
	cases := []struct {
		served []string
		want   string
	}{
		{[]string{"v1alpha3", "v1beta1", "v1"}, "v1"},
		{[]string{"v1alpha3", "v1beta1"}, "v1beta1"},
		{[]string{"v1alpha3"}, "v1alpha3"},
		{nil, ""},
	}
	for _, c := range cases {
		gvr, err := Pick(discoveryOf(c.served...))
		if c.want == "" {
			if !errors.Is(err, errNotServed) {
				t.Errorf("served %v: %v, %v; want errNotServed", c.served, gvr, err)
			}
			continue
		}
		if err != nil || gvr != (schema.GroupVersionResource{Group: Group, Version: c.want, Resource: Resource}) {
			t.Errorf("served %v: %v, %v; want %s", c.served, gvr, err, c.want)
		}
	}
	// A group version without the resource does not count.
	d := discoveryOf()
	d.Resources = append(d.Resources, &metav1.APIResourceList{GroupVersion: Group + "/v1",
		APIResources: []metav1.APIResource{{Name: "gateways"}}})
	if _, err := Pick(d); !errors.Is(err, errNotServed) {
		t.Errorf("v1 without serviceentries: %v, want errNotServed", err)
	}
}

var gvr = schema.GroupVersionResource{Group: Group, Version: "v1", Resource: Resource}

func newEntry(ns, name, rv string, spec map[string]any) *unstructured.Unstructured {
	u := &unstructured.Unstructured{Object: map[string]any{"apiVersion": Group + "/v1", "kind": "ServiceEntry",
		"metadata": map[string]any{"namespace": ns, "name": name, "resourceVersion": rv}, "spec": spec}}
	return u
}

func hosts(h ...string) []any {
	out := make([]any, len(h))
	for i, s := range h {
		out[i] = s
	}
	return out
}

// The source feeds a real zone manager: entries made, changed and deleted
// through the (fake) API are answered, and a broken update keeps the last
// good version serving.
func TestSourceFeedsMeshZones(t *testing.T) {
	cfg := &zone.Config{Domains: zone.Domains{Cluster: []string{"cluster.local."}, Reverse: []string{"in-addr.arpa."}},
		TTL: 5, MeshTTL: 30, MeshZones: []string{"global.", "example.com."}}
	cfg.Prepare()
	client := dynamicfake.NewSimpleDynamicClientWithCustomListKinds(runtime.NewScheme(),
		map[schema.GroupVersionResource]string{gvr: "ServiceEntryList"},
		newEntry("ns1", "global", "1", map[string]any{"hosts": hosts("*.test.global"), "addresses": hosts("127.255.0.2")}))
	system := actor.NewActorSystem()
	table := zone.NewTable(zone.NewDirectory(cfg, map[string]struct{}{}, false, 0))
	var synced atomic.Bool
	manager := system.Root.Spawn(zonemanager.NewManagerProps(zonemanager.Config{Answer: cfg, Table: table,
		Sources: []string{SourceName}, Now: time.Now, Logger: quiet, Synced: &synced}))
	src := system.Root.Spawn(NewProps(Config{Client: client, Discovery: discoveryOf("v1beta1", "v1"),
		Manager: manager, Logger: quiet}))
	t.Cleanup(func() {
		system.Root.StopFuture(src).Wait()
		system.Root.StopFuture(manager).Wait()
	})
	answers := func(name string, want ...string) {
		t.Helper()
		testutil.Eventually(t, 5*time.Second, func() error {
			r := zone.Answer(cfg, table, zone.Question{Name: name, Type: dns.TypeA})
			var got []string
			for _, rr := range r.Answer {
				got = append(got, rr.(*dns.A).A.String())
			}
			if len(want) == 0 && !r.External {
				return fmt.Errorf("%s answered %+v, want it forwarded", name, r)
			}
			if len(want) > 0 && !slices.Equal(got, want) {
				return fmt.Errorf("%s: %v, want %v", name, got, want)
			}
			return nil
		})
	}
	answers("service1.test.global.", "127.255.0.2")
	testutil.Eventually(t, 5*time.Second, func() error {
		if !synced.Load() {
			return errors.New("not synced")
		}
		return nil
	})

	res := client.Resource(gvr).Namespace("ns1")
	ctx := context.Background()
	if _, err := res.Create(ctx, newEntry("ns1", "db", "2", map[string]any{"hosts": hosts("db.example.com")}), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	answers("db.example.com.") // no address: not a mesh name
	if _, err := res.Update(ctx, newEntry("ns1", "db", "3", map[string]any{"hosts": hosts("db.example.com"),
		"addresses": hosts("10.1.0.1")}), metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	answers("db.example.com.", "10.1.0.1")
	if _, err := res.Update(ctx, newEntry("ns1", "db", "4", map[string]any{"hosts": hosts("db.example.com"),
		"addresses": hosts("not an address")}), metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	if _, err := res.Update(ctx, newEntry("ns1", "global", "5", map[string]any{"hosts": hosts("*.test.global"),
		"addresses": hosts("127.255.0.3")}), metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	answers("service1.test.global.", "127.255.0.3")
	answers("db.example.com.", "10.1.0.1") // the broken version was not applied
	if err := res.Delete(ctx, "db", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	answers("db.example.com.")
	answers("service1.test.global.", "127.255.0.3")
}

// probe stands in for the zone manager and records what a source sends.
type probe struct{ got chan any }

func (p *probe) Receive(ctx actor.Context) {
	switch m := ctx.Message().(type) {
	case *zonemanager.Apply, *zonemanager.Synced, *zonemanager.ReplayDone:
		p.got <- m
	}
}

func startProbe(t *testing.T, system *actor.ActorSystem) (*actor.PID, chan any) {
	got := make(chan any, 100)
	pid := system.Root.Spawn(actor.PropsFromProducer(func() actor.Actor { return &probe{got: got} }))
	t.Cleanup(func() { system.Root.StopFuture(pid).Wait() })
	return pid, got
}

func next[T any](t *testing.T, got chan any) T {
	t.Helper()
	timeout := time.After(5 * time.Second)
	for {
		select {
		case m := <-got:
			if v, ok := m.(T); ok {
				return v
			}
		case <-timeout:
			var zero T
			t.Fatalf("no %T within 5s", zero)
			return zero
		}
	}
}

// A replay sends every entry of the cache, then ReplayDone; no-op updates
// (same resourceVersion, or only fields DNS does not read) send nothing.
func TestSourceReplayAndNoOps(t *testing.T) {
	client := dynamicfake.NewSimpleDynamicClientWithCustomListKinds(runtime.NewScheme(),
		map[schema.GroupVersionResource]string{gvr: "ServiceEntryList"},
		newEntry("a", "one", "1", map[string]any{"hosts": hosts("one.example"), "addresses": hosts("10.0.0.1")}),
		newEntry("b", "two", "1", map[string]any{"hosts": hosts("two.example"), "addresses": hosts("10.0.0.2")}),
		newEntry("b", "broken", "1", map[string]any{"hosts": "two.example"}))
	system := actor.NewActorSystem()
	pid, got := startProbe(t, system)
	src := system.Root.Spawn(NewProps(Config{Client: client, Discovery: discoveryOf("v1"), Manager: pid, Logger: quiet}))
	t.Cleanup(func() { system.Root.StopFuture(src).Wait() })
	next[*zonemanager.Synced](t, got)

	system.Root.Send(src, &zonemanager.Replay{ID: 7})
	apply := next[*zonemanager.Apply](t, got)
	for apply.Replay != 7 {
		apply = next[*zonemanager.Apply](t, got)
	}
	var keys []string
	for _, c := range apply.Changes {
		keys = append(keys, c.Key.String())
	}
	slices.Sort(keys)
	if !slices.Equal(keys, []string{"ServiceEntry a/one", "ServiceEntry b/two"}) {
		t.Errorf("replay sent %v", keys)
	}
	if d := next[*zonemanager.ReplayDone](t, got); d.ID != 7 || d.Source != SourceName {
		t.Errorf("ReplayDone = %+v", d)
	}

	res := client.Resource(gvr).Namespace("a")
	ctx := context.Background()
	spec := map[string]any{"hosts": hosts("one.example"), "addresses": hosts("10.0.0.1")}
	if _, err := res.Update(ctx, newEntry("a", "one", "1", spec), metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	spec["ports"] = []any{map[string]any{"number": int64(80), "name": "http"}}
	if _, err := res.Update(ctx, newEntry("a", "one", "2", spec), metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	spec["addresses"] = hosts("10.0.0.9")
	if _, err := res.Update(ctx, newEntry("a", "one", "3", spec), metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	apply = next[*zonemanager.Apply](t, got)
	e, ok := apply.Changes[0].Object.(*model.ServiceEntry)
	if !ok || e.ResourceVersion != "3" {
		t.Fatalf("first change after the no-ops: %+v, want version 3", apply.Changes[0])
	}
}

// Without the ServiceEntry resource the source counts as synced: a
// cluster without Istio must not keep shardns unready.
func TestSourceWithoutIstio(t *testing.T) {
	system := actor.NewActorSystem()
	pid, got := startProbe(t, system)
	client := dynamicfake.NewSimpleDynamicClient(runtime.NewScheme())
	src := system.Root.Spawn(NewProps(Config{Client: client, Discovery: discoveryOf(), Manager: pid, Logger: quiet}))
	t.Cleanup(func() { system.Root.StopFuture(src).Wait() })
	if s := next[*zonemanager.Synced](t, got); s.Source != SourceName {
		t.Errorf("Synced = %+v", s)
	}
	system.Root.Send(src, &zonemanager.Replay{ID: 1})
	if a := next[*zonemanager.Apply](t, got); len(a.Changes) != 0 || a.Replay != 1 {
		t.Errorf("replay without a watch: %+v", a)
	}
}
