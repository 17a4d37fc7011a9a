package istio

import (
	"fmt"
	"maps"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/asynkron/protoactor-go/actor"
	"github.com/miekg/dns"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	dynamicfake "k8s.io/client-go/dynamic/fake"

	"github.com/shardns/shardns/actors/zonemanager"
	"github.com/shardns/shardns/internal/testutil"
	"github.com/shardns/shardns/zone"
)

// A tenant's ServiceEntries, through the source and a real zone manager:
// what every client is answered, and what the manager counts as skipped.
func TestTenantEntriesAnswerOnlyDelegatedNames(t *testing.T) {
	tenant := newEntry("tenant-a", "attack", "1", map[string]any{
		"hosts": hosts("*.com", "api.github.com", "*.global", "evil.test.global"), "addresses": hosts("6.6.6.6")})
	private := newEntry("tenant-a", "private", "1", map[string]any{
		"hosts": hosts("db.test.global"), "addresses": hosts("6.6.6.8"), "exportTo": hosts(".")})
	mesh := newEntry("default", "mesh", "1", map[string]any{"hosts": hosts("*.test.global"), "addresses": hosts("127.255.0.2")})
	cases := []struct {
		name      string
		zones     []string
		defaultTo []string
		answers   map[string]string // name → address; "" forwarded
		skipped   map[string]int
	}{
		{"default zones", []string{"global."}, nil,
			map[string]string{"example.com.": "", "api.github.com.": "", "x.global.": "",
				"evil.test.global.": "6.6.6.6", "service1.test.global.": "127.255.0.2", "db.test.global.": "127.255.0.2"},
			map[string]int{zone.SkipOutsideZones: 2, zone.SkipPublicSuffix: 1}},
		{"every name delegated", []string{"."}, nil,
			map[string]string{"example.com.": "", "api.github.com.": "6.6.6.6", "x.global.": "",
				"service1.test.global.": "127.255.0.2"},
			map[string]int{zone.SkipPublicSuffix: 2}},
		{"private by default", []string{"global."}, []string{"."},
			map[string]string{"evil.test.global.": "", "service1.test.global.": ""},
			map[string]int{zone.SkipOutsideZones: 2, zone.SkipPublicSuffix: 1}},
		{"exported to nobody", []string{"global."}, []string{"~"},
			map[string]string{"evil.test.global.": "", "service1.test.global.": "", "db.test.global.": ""},
			map[string]int{zone.SkipExportTo: 5}}, // every host but the private entry's, which names its own namespace
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			cfg := &zone.Config{Domains: zone.Domains{Cluster: []string{"cluster.local."}}, TTL: 5, MeshTTL: 30,
				MeshZones: c.zones, MeshExportTo: c.defaultTo}
			cfg.Prepare()
			client := dynamicfake.NewSimpleDynamicClientWithCustomListKinds(runtime.NewScheme(),
				map[schema.GroupVersionResource]string{gvr: "ServiceEntryList"}, tenant, private, mesh)
			table, skipped := startMeshSource(t, cfg, client)
			for name, want := range c.answers {
				testutil.Eventually(t, 5*time.Second, func() error { return answersA(cfg, table, name, want) })
			}
			testutil.Eventually(t, 5*time.Second, func() error {
				if got := skipped(); !maps.Equal(got, c.skipped) {
					return fmt.Errorf("skipped %v, want %v", got, c.skipped)
				}
				return nil
			})
		})
	}
}

// startMeshSource runs the source into a zone manager and returns the
// table the manager publishes and the skip counts it reported.
func startMeshSource(t *testing.T, cfg *zone.Config, client *dynamicfake.FakeDynamicClient) (*zone.Table, func() map[string]int) {
	var mu sync.Mutex
	skipped := map[string]int{}
	system := actor.NewActorSystem()
	table := zone.NewTable(zone.NewDirectory(cfg, map[string]struct{}{}, false, 0))
	var synced atomic.Bool
	manager := system.Root.Spawn(zonemanager.NewManagerProps(zonemanager.Config{Answer: cfg, Table: table,
		Sources: []string{SourceName}, Now: time.Now, Logger: quiet, Synced: &synced,
		Observer: meshSkipped{f: func(why string) { mu.Lock(); skipped[why]++; mu.Unlock() }}}))
	src := system.Root.Spawn(NewProps(Config{Client: client, Discovery: discoveryOf("v1"), Manager: manager, Logger: quiet}))
	t.Cleanup(func() {
		system.Root.StopFuture(src).Wait()
		system.Root.StopFuture(manager).Wait()
	})
	return table, func() map[string]int { mu.Lock(); defer mu.Unlock(); return maps.Clone(skipped) }
}

// answersA checks the A answer of name: want is its one address, or ""
// for a name that is not a mesh name (forwarded).
func answersA(cfg *zone.Config, v zone.Reader, name, want string) error {
	r := zone.Answer(cfg, v, zone.Question{Name: name, Type: dns.TypeA})
	switch {
	case want == "" && !r.External:
		return fmt.Errorf("%s answered %v, want it forwarded", name, r.Answer)
	case want != "" && (len(r.Answer) != 1 || r.Answer[0].(*dns.A).A.String() != want):
		return fmt.Errorf("%s: %v (external %v), want %s", name, r.Answer, r.External, want)
	}
	return nil
}

// meshSkipped is an Observer that hands why each host was skipped to f.
type meshSkipped struct {
	zonemanager.NopObserver
	f func(why string)
}

func (o meshSkipped) MeshSkipped(why string) { o.f(why) }
