package zonemanager

import (
	"fmt"
	"maps"
	"net/netip"
	"reflect"
	"slices"
	"testing"
	"time"

	"github.com/shardns/shardns/model"
	"github.com/shardns/shardns/zone"
)

// routed is what a plan sends each zone, in words: "svc <key>" for a
// Service or EndpointSlice, "imp <key>", "pod <key>", "ptr <key> ×n" (the
// object's n reverse records), "mesh <key> ×n", "file" for a zone file;
// "-" after the part for what removes the object from the zone.
func routed(p applyPlan) map[string][]string {
	out := map[string][]string{}
	for _, z := range p.zones {
		var parts []string
		b := z.apply
		change := func(part string, c model.Change) string {
			if c.Object == nil {
				part += "-"
			}
			return part + " " + c.Key.String()
		}
		for _, c := range b.services {
			parts = append(parts, change("svc", c.change))
		}
		for _, c := range b.imported {
			parts = append(parts, change("imp", c))
		}
		for _, c := range b.pods {
			parts = append(parts, change("pod", c))
		}
		for _, c := range b.ptrs {
			if len(c.ptrs) == 0 {
				parts = append(parts, "ptr- "+c.source.String())
			} else {
				parts = append(parts, fmt.Sprintf("ptr %s ×%d", c.source, len(c.ptrs)))
			}
		}
		for _, c := range b.mesh {
			if len(c.hosts) == 0 {
				parts = append(parts, "mesh- "+c.source.String())
			} else {
				parts = append(parts, fmt.Sprintf("mesh %s ×%d", c.source, len(c.hosts)))
			}
		}
		if b.file != nil {
			if b.file.zone == nil {
				parts = append(parts, "file-")
			} else {
				parts = append(parts, "file")
			}
		}
		out[z.key] = parts
	}
	return out
}

func routingConfig(domains zone.Domains) *zone.Config {
	cfg := &zone.Config{Domains: domains, TTL: 5, MeshZones: []string{"."}}
	cfg.Prepare()
	return cfg
}

func svc(ns, name, ip string) model.Change {
	s := &model.Service{Namespace: ns, Name: name, Type: model.ServiceClusterIP,
		ClusterIPs: []netip.Addr{netip.MustParseAddr(ip)}, Ports: []model.Port{{Name: "http", Protocol: "TCP", Port: 80}}}
	return model.Change{Key: s.Key(), Object: s}
}

func frozenSvc(t *testing.T, ns, name, ip string) model.Change {
	c := svc(ns, name, ip)
	f, ok := model.Freeze(c.Object)
	if !ok {
		t.Fatal("a service does not freeze")
	}
	return model.Change{Key: c.Key, Object: f}
}

func deleted(c model.Change) model.Change { return model.Change{Key: c.Key} }

func namespace(name string) model.Change {
	return model.Change{Key: model.Key{Kind: model.KindNamespace, Name: name}, Object: &model.Namespace{Name: name}}
}

func pod(ns, name, ip string) model.Change {
	p := &model.Pod{Namespace: ns, Name: name, IPs: []netip.Addr{netip.MustParseAddr(ip)}}
	return model.Change{Key: p.Key(), Object: p}
}

func entry(ns, name string, hosts ...string) model.Change {
	e := &model.ServiceEntry{Namespace: ns, Name: name, Hosts: hosts, Addresses: []netip.Addr{netip.MustParseAddr("240.0.0.1")}}
	return model.Change{Key: model.Key{Kind: model.KindServiceEntry, Namespace: ns, Name: name}, Object: e}
}

func fileZone(origin string) model.Change {
	return model.Change{Key: model.Key{Kind: model.KindZoneFile, Name: origin}, Object: &zone.FileZone{Origin: origin}}
}

func acceptAll(model.Change) bool { return true }

// batchOf is one batch routes.apply is given, and what it must plan.
type batchOf struct {
	changes []model.Change
	sharded bool
	live    bool
	accepts func(model.Change) bool // nil: every change
	// routed is routed(plan); emptied, dir and placed the plan's
	// emptied, dirChanged and placementStale.
	routed  map[string][]string
	emptied []string
	dir     bool
	placed  bool
}

// Which zones each change goes to, and what a batch does to the
// directory, the placement and the zones it empties, as sequences of
// batches on one routes.
func TestRoutesApply(t *testing.T) {
	kube := zone.Domains{Cluster: []string{"cluster.local."}, Reverse: []string{"in-addr.arpa."}}
	const shop, rev0, rev1 = "shop.svc.cluster.local.", "0.96.10.in-addr.arpa.", "1.96.10.in-addr.arpa."
	web, webMoved := svc("shop", "web", "10.96.0.10"), svc("shop", "web", "10.96.1.10")
	db := svc("shop", "db", "10.96.0.11")
	for _, tc := range []struct {
		name    string
		domains zone.Domains
		batches []batchOf
	}{
		{"a service goes to its service zone and its address's reverse zone", kube, []batchOf{
			{changes: []model.Change{web},
				routed: map[string][]string{rev0: {"ptr Service shop/web ×1"}, shop: {"svc Service shop/web"}}, placed: true},
		}},
		{"in every cluster domain", zone.Domains{Cluster: []string{"cluster.local.", "corp."}}, []batchOf{
			{changes: []model.Change{web},
				routed: map[string][]string{shop: {"svc Service shop/web"}, "shop.svc.corp.": {"svc Service shop/web"}}, placed: true},
		}},
		{"an address that moves leaves its old reverse zone, which empties", kube, []batchOf{
			{changes: []model.Change{web, db}, routed: map[string][]string{
				rev0: {"ptr Service shop/web ×1", "ptr Service shop/db ×1"}, shop: {"svc Service shop/web", "svc Service shop/db"}}, placed: true},
			{changes: []model.Change{webMoved}, routed: map[string][]string{
				rev0: {"ptr- Service shop/web"}, rev1: {"ptr Service shop/web ×1"}, shop: {"svc Service shop/web"}}, placed: true},
			{changes: []model.Change{deleted(db)}, routed: map[string][]string{
				rev0: {"ptr- Service shop/db"}, shop: {"svc- Service shop/db"}}, emptied: []string{rev0}, placed: true},
		}},
		{"the same zones again: nothing comes or goes", kube, []batchOf{
			{changes: []model.Change{web}, routed: map[string][]string{rev0: {"ptr Service shop/web ×1"}, shop: {"svc Service shop/web"}}, placed: true},
			{changes: []model.Change{web}, routed: map[string][]string{rev0: {"ptr Service shop/web ×1"}, shop: {"svc Service shop/web"}}},
		}},
		{"the last object's delete empties its zones", kube, []batchOf{
			{changes: []model.Change{web}, routed: map[string][]string{rev0: {"ptr Service shop/web ×1"}, shop: {"svc Service shop/web"}}, placed: true},
			{changes: []model.Change{deleted(web)}, routed: map[string][]string{rev0: {"ptr- Service shop/web"}, shop: {"svc- Service shop/web"}},
				emptied: []string{rev0, shop}, placed: true},
		}},
		{"a delete of an object never seen goes to the zones its key names, emptied", kube, []batchOf{
			{changes: []model.Change{deleted(web)}, routed: map[string][]string{shop: {"svc- Service shop/web"}},
				emptied: []string{shop}, placed: true},
		}},
		{"sharded: a reverse zone that comes or goes is not placed, a namespace is", kube, []batchOf{
			{changes: []model.Change{web}, sharded: true, routed: map[string][]string{rev0: {"ptr Service shop/web ×1"}, shop: {"svc Service shop/web"}}, placed: true},
			{changes: []model.Change{webMoved}, sharded: true, routed: map[string][]string{
				rev0: {"ptr- Service shop/web"}, rev1: {"ptr Service shop/web ×1"}, shop: {"svc Service shop/web"}}, emptied: []string{rev0}},
			{changes: []model.Change{namespace("late")}, sharded: true, routed: map[string][]string{}, dir: true, placed: true},
		}},
		{"a namespace changes the directory when it comes and goes only", kube, []batchOf{
			{changes: []model.Change{namespace("shop")}, routed: map[string][]string{}, dir: true},
			{changes: []model.Change{namespace("shop")}, routed: map[string][]string{}},
			{changes: []model.Change{deleted(namespace("shop"))}, routed: map[string][]string{}, dir: true},
		}},
		{"a change not for this replica goes nowhere", kube, []batchOf{
			{changes: []model.Change{web}, accepts: func(model.Change) bool { return false }, routed: map[string][]string{}},
		}},
		{"imports go to the first cluster domain's service zone, and empty it when they go", zone.Domains{
			Cluster: []string{"cluster.local.", "corp."}, Multicluster: []string{"clusterset.local."}}, []batchOf{
			{changes: []model.Change{imported("web")}, routed: map[string][]string{shop: {"imp ServiceImport shop/web"}}, placed: true},
			{changes: []model.Change{deleted(imported("web"))}, routed: map[string][]string{shop: {"imp- ServiceImport shop/web"}},
				emptied: []string{shop}, placed: true},
		}},
		{"imports without a multicluster zone go nowhere", kube, []batchOf{
			{changes: []model.Change{imported("web")}, routed: map[string][]string{}},
		}},
		{"pods go to their pod zone when pods are verified", zone.Domains{Cluster: []string{"cluster.local."}, PodZones: true}, []batchOf{
			{changes: []model.Change{pod("shop", "web-0", "10.1.0.7")},
				routed: map[string][]string{"shop.pod.cluster.local.": {"pod Pod shop/web-0"}}, placed: true},
		}},
		{"pods go nowhere otherwise", kube, []batchOf{
			{changes: []model.Change{pod("shop", "web-0", "10.1.0.7")}, routed: map[string][]string{}},
		}},
		{"a service entry's hosts go to their mesh zones, and leave those they no longer name", zone.Domains{Cluster: []string{"cluster.local."}}, []batchOf{
			{changes: []model.Change{entry("shop", "ext", "api.example.com", "db.example.org")}, routed: map[string][]string{
				"example.com.": {"mesh ServiceEntry shop/ext ×1"}, "example.org.": {"mesh ServiceEntry shop/ext ×1"}}, dir: true, placed: true},
			{changes: []model.Change{entry("shop", "ext", "api.example.com")}, routed: map[string][]string{
				"example.com.": {"mesh ServiceEntry shop/ext ×1"}, "example.org.": {"mesh- ServiceEntry shop/ext"}},
				emptied: []string{"example.org."}, dir: true, placed: true},
			{changes: []model.Change{entry("other", "ext", "api.example.com")}, routed: map[string][]string{
				"example.com.": {"mesh ServiceEntry other/ext ×1"}}},
		}},
		{"a zone file goes to its origin's zone and into the directory", kube, []batchOf{
			{changes: []model.Change{fileZone("example.net.")}, routed: map[string][]string{"example.net.": {"file"}}, dir: true, placed: true},
			{changes: []model.Change{fileZone("example.net.")}, routed: map[string][]string{"example.net.": {"file"}}},
			{changes: []model.Change{deleted(fileZone("example.net."))}, routed: map[string][]string{"example.net.": {"file-"}},
				emptied: []string{"example.net."}, dir: true, placed: true},
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := newRoutes(routingConfig(tc.domains), false)
			for i, b := range tc.batches {
				accepts := b.accepts
				if accepts == nil {
					accepts = acceptAll
				}
				p := r.apply(b.changes, accepts, b.sharded, b.live)
				if got := routed(p); !reflect.DeepEqual(got, b.routed) {
					t.Errorf("batch %d routed\n %q\nwant %q", i, got, b.routed)
				}
				if !slices.Equal(p.emptied, b.emptied) || p.dirChanged != b.dir || p.placementStale != b.placed {
					t.Errorf("batch %d: emptied %q, directory %v, placement %v; want %q, %v, %v",
						i, p.emptied, p.dirChanged, p.placementStale, b.emptied, b.dir, b.placed)
				}
			}
		})
	}
}

func imported(name string) model.Change {
	s := &model.ServiceImport{Namespace: "shop", Name: name, IPs: []netip.Addr{netip.MustParseAddr("10.42.0.1")}}
	return model.Change{Key: s.Key(), Object: s}
}

// Frozen objects route as what they thaw to: the zones keep the frozen
// form, the reverse records come from the thawed object. One that does
// not thaw is taken for a delete and named.
func TestRoutesApplyThawsFrozenObjects(t *testing.T) {
	r := newRoutes(routingConfig(zone.Domains{Cluster: []string{"cluster.local."}, Reverse: []string{"in-addr.arpa."}}), false)
	web := frozenSvc(t, "shop", "web", "10.96.0.10")
	p := r.apply([]model.Change{web}, acceptAll, false, true)
	if _, frozen := p.zones[1].apply.services[0].change.Object.(model.Frozen); !frozen || len(p.zones[0].apply.ptrs[0].ptrs) != 1 {
		t.Fatalf("routed %q; want the frozen service in its zone and its PTR", routed(p))
	}
	broken := model.Change{Key: web.Key, Object: model.Frozen("not an encoding")}
	p = r.apply([]model.Change{broken}, acceptAll, false, true)
	if len(p.unthawed) != 1 || p.unthawed[0].key != web.Key || p.unthawed[0].err == nil {
		t.Errorf("unthawed %+v, want the service with its error", p.unthawed)
	}
	if got := routed(p)["0.96.10.in-addr.arpa."]; !slices.Equal(got, []string{"ptr- Service shop/web"}) {
		t.Errorf("its reverse zone got %q, want its PTR removed", got)
	}
}

// The autopath index follows the pods' addresses; an address a newer pod
// took stays that pod's when the older one goes.
func TestRoutesApplyIndexesPods(t *testing.T) {
	r := newRoutes(routingConfig(zone.Domains{Cluster: []string{"cluster.local."}}), true)
	for i, tc := range []struct {
		changes []model.Change
		want    []podAddress
	}{
		{[]model.Change{pod("Shop", "web-0", "10.1.0.7")}, []podAddress{{netip.MustParseAddr("10.1.0.7"), "shop"}}},
		{[]model.Change{pod("Shop", "web-0", "10.1.0.8")},
			[]podAddress{{ip: netip.MustParseAddr("10.1.0.7")}, {netip.MustParseAddr("10.1.0.8"), "shop"}}},
		{[]model.Change{pod("blog", "new", "10.1.0.8")}, []podAddress{{netip.MustParseAddr("10.1.0.8"), "blog"}}},
		{[]model.Change{deleted(pod("Shop", "web-0", "10.1.0.8"))}, nil},
		{[]model.Change{deleted(pod("blog", "new", "10.1.0.8"))}, []podAddress{{ip: netip.MustParseAddr("10.1.0.8")}}},
	} {
		if got := r.apply(tc.changes, acceptAll, false, true).pods; !reflect.DeepEqual(got, tc.want) {
			t.Errorf("batch %d: index changes %v, want %v", i, got, tc.want)
		}
	}
}

// Skipped mesh hosts are reported for live changes, not for a replay's,
// which sends what was reported already.
func TestRoutesApplyReportsSkippedHostsOfLiveChanges(t *testing.T) {
	r := newRoutes(routingConfig(zone.Domains{Cluster: []string{"cluster.local."}}), false)
	hidden := entry("shop", "ext", "api.example.com")
	hidden.Object.(*model.ServiceEntry).ExportTo = []string{"~"}
	if p := r.apply([]model.Change{hidden}, acceptAll, false, false); len(p.skipped) != 0 {
		t.Errorf("a replay reported %v", p.skipped)
	}
	p := r.apply([]model.Change{hidden}, acceptAll, false, true)
	if len(p.skipped) != 1 || p.skipped[0].entry != hidden.Key || p.skipped[0].host.Host != "api.example.com" {
		t.Errorf("skipped %+v, want api.example.com of %s", p.skipped, hidden.Key)
	}
}

// The directory's namespaces, mesh names and file origins are copies:
// later batches do not change one published.
func TestRoutesDirectory(t *testing.T) {
	r := newRoutes(routingConfig(zone.Domains{Cluster: []string{"cluster.local."}}), false)
	r.apply([]model.Change{namespace("shop"), entry("shop", "ext", "api.example.com"), fileZone("example.net.")}, acceptAll, false, true)
	ns, mesh, files := r.directory()
	r.apply([]model.Change{namespace("blog"), deleted(fileZone("example.net."))}, acceptAll, false, true)
	for _, tc := range []struct {
		name      string
		got, want map[string]struct{}
	}{
		{"namespaces", ns, map[string]struct{}{"shop": {}}},
		{"mesh names", mesh, map[string]struct{}{"api.example.com.": {}}},
		{"file origins", files, map[string]struct{}{"example.net.": {}}},
	} {
		if !maps.Equal(tc.got, tc.want) {
			t.Errorf("%s %v, want %v", tc.name, tc.got, tc.want)
		}
	}
}

// Which zone actors a routed batch spawns, reaches and stops, as Step
// decides it.
func TestStateStepApplied(t *testing.T) {
	b := func(key string) zoneBatch { return zoneBatch{key: key, apply: &zoneApply{}} }
	rev := zoneBatch{key: "0.96.10.in-addr.arpa.", reverse: true, apply: &zoneApply{}}
	send := func(zones ...zoneBatch) SendBatches { return SendBatches{Zones: zones} }
	run, fresh, theirs, wait, loading, gone := b("run."), b("fresh."), b("theirs."), b("wait."), b("loading."), b("gone.")
	f := facts{owned: []string{"run.", "fresh.", "wait.", rev.key, "loading."}, active: []string{"run."}, deferred: []string{"wait."}}
	replaying := func() replayState {
		return replayState{id: 3, keys: map[string]bool{"loading.": true}, waiting: map[string]bool{"kubernetes": true}}
	}
	for _, tc := range []struct {
		name     string
		replay   replayState
		msg      applied
		want     []Effect
		joined   []string // zones the batch added to the replay under way
		graceFor []string // zones in their grace before the batch
	}{
		{name: "live: a running zone is told, an owned one spawned first; another's and a deferred one are left",
			msg:  applied{zones: []zoneBatch{fresh, run, theirs, wait}},
			want: []Effect{SpawnZone{Key: "fresh."}, send(fresh, run)}},
		{name: "sharded, while a replay lists: a new namespace zone hides until it ends, a reverse zone does not",
			replay: replaying(), msg: applied{zones: []zoneBatch{fresh, rev}, sharded: true},
			want:   []Effect{SpawnZone{Key: "fresh.", Hidden: true}, SpawnZone{Key: rev.key}, send(fresh, rev)},
			joined: []string{"fresh."}},
		{name: "unsharded, while a replay loads: a new zone serves at once",
			replay: replaying(), msg: applied{zones: []zoneBatch{fresh}},
			want: []Effect{SpawnZone{Key: "fresh."}, send(fresh)}},
		{name: "a replay's batch fills only the zones it loads",
			replay: replaying(), msg: applied{zones: []zoneBatch{loading, fresh, run}, replay: 3},
			want: []Effect{SpawnZone{Key: "loading."}, send(loading)}},
		{name: "sharded: a replay's batch also fills the owned zones it lists first, hidden",
			replay: replaying(), msg: applied{zones: []zoneBatch{fresh, run, theirs}, replay: 3, sharded: true},
			want:   []Effect{SpawnZone{Key: "fresh.", Hidden: true}, send(fresh)},
			joined: []string{"fresh."}},
		{name: "sharded: an older replay's batch fills nothing new",
			replay: replaying(), msg: applied{zones: []zoneBatch{fresh}, replay: 2, sharded: true}},
		{name: "emptied zones stop behind their last batch; their grace ends",
			msg:      applied{zones: []zoneBatch{run, gone}, emptied: []string{"run.", "gone."}},
			graceFor: []string{"run."},
			want:     []Effect{send(run), StopZone{Key: "run."}, ObserveGrace{}}},
		{name: "a zone spawned by the batch that empties it stops too",
			msg:  applied{zones: []zoneBatch{fresh}, emptied: []string{"fresh."}},
			want: []Effect{SpawnZone{Key: "fresh."}, send(fresh), StopZone{Key: "fresh."}}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s := newState(time.Second, nil)
			s.replay = tc.replay
			for _, key := range tc.graceFor {
				s.grace[key] = true
			}
			before := maps.Clone(s.replay.keys)
			if got := s.Step(f, tc.msg); !reflect.DeepEqual(got, tc.want) {
				t.Errorf("got  %#v\nwant %#v", got, tc.want)
			}
			var joined []string
			for key := range s.replay.keys {
				if !before[key] {
					joined = append(joined, key)
				}
			}
			if slices.Sort(joined); !slices.Equal(joined, tc.joined) {
				t.Errorf("joined the replay: %q, want %q", joined, tc.joined)
			}
		})
	}
}

// Which changes a replica with sharded watches takes, and which objects
// it forgets once it holds no zone of their namespace.
func TestAcceptsAndReleased(t *testing.T) {
	domains := &zone.Domains{Cluster: []string{"cluster.local."}, PodZones: true}
	f := facts{owned: []string{"mine.svc.cluster.local.", "mine.pod.cluster.local.", "waits.svc.cluster.local."},
		deferred: []string{"waits.svc.cluster.local."}, active: []string{"lost.svc.cluster.local."}}
	sharded := watched{sharded: true}
	for _, tc := range []struct {
		name string
		w    watched
		c    model.Change
		want bool
	}{
		{"unsharded: every change", watched{}, svc("theirs", "web", "10.96.0.1"), true},
		{"sharded: its own namespace's", sharded, svc("mine", "web", "10.96.0.1"), true},
		{"sharded: a namespace it lost, in the grace", sharded, svc("lost", "web", "10.96.0.1"), true},
		{"sharded: another's namespace (a narrowing watch)", sharded, svc("theirs", "web", "10.96.0.1"), false},
		{"sharded: a namespace deferred to a replica still syncing", sharded, svc("waits", "web", "10.96.0.1"), false},
		{"sharded: a delete, always", sharded, deleted(svc("theirs", "web", "10.96.0.1")), true},
		{"sharded: another's pod", sharded, pod("theirs", "web-0", "10.1.0.1"), false},
		{"sharded: another's pod, autopath indexing every pod", watched{sharded: true, allPods: true}, pod("theirs", "web-0", "10.1.0.1"), true},
		{"widened before leaving: every change", watched{sharded: true, wide: true}, svc("theirs", "web", "10.96.0.1"), true},
	} {
		if got := accepts(f, domains, tc.w, tc.c); got != tc.want {
			t.Errorf("%s: accepts = %v, want %v", tc.name, got, tc.want)
		}
	}

	known := []model.Key{svc("mine", "web", "10.96.0.1").Key, svc("lost", "web", "10.96.0.1").Key, svc("theirs", "web", "10.96.0.1").Key,
		pod("theirs", "web-0", "10.1.0.1").Key, {Kind: model.KindServiceEntry, Namespace: "theirs", Name: "ext"}}
	forgotten := func(w watched) []string {
		var out []string
		for _, c := range released(f, domains, w, slices.Values(known)) {
			if c.Object != nil {
				t.Errorf("%s released as %v, not deleted", c.Key, c.Object)
			}
			out = append(out, c.Key.String())
		}
		slices.Sort(out)
		return out
	}
	for _, tc := range []struct {
		name string
		w    watched
		want []string
	}{
		{"sharded: the objects of namespaces it holds no zone of", sharded, []string{"Pod theirs/web-0", "Service theirs/web"}},
		{"autopath watches every pod", watched{sharded: true, allPods: true}, []string{"Service theirs/web"}},
		{"unsharded: the sources send deletes", watched{}, nil},
		{"widened: it keeps everything", watched{sharded: true, wide: true}, nil},
	} {
		if got := forgotten(tc.w); !slices.Equal(got, tc.want) {
			t.Errorf("%s: forgets %q, want %q", tc.name, got, tc.want)
		}
	}
}
