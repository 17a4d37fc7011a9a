package zonemanager_test

import (
	"context"
	"fmt"
	"net/netip"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/miekg/dns"

	"github.com/shardns/shardns/actors/zonemanager"
	ring "github.com/shardns/shardns/cluster"
	"github.com/shardns/shardns/internal/testutil"
	"github.com/shardns/shardns/model"
	"github.com/shardns/shardns/zone"
)

// What a gained zone's holders are asked and what their answer does (one
// that fails, one that holds nothing, a namespace handed over empty) is
// decided purely: TestHandoffToFetch, TestHandoffAnswered,
// TestHandoffShow, TestHandoffProvisional, TestExportOf, TestHeldEmpty
// and TestPlacement. The tests here run a handoff through the Manager.

// peerB plays replica b for the zones a gains from it: it hands over the
// service of each namespace, frozen, and one it knew of that the API
// server no longer has (gone, deleted while b's watch was down).
type peerB struct {
	mu    sync.Mutex
	asked map[string][]string // remote → zone keys
}

func (p *peerB) fetch(_ context.Context, remote, key, namespace string) ([]model.Change, error) {
	p.mu.Lock()
	if p.asked == nil {
		p.asked = map[string][]string{}
	}
	p.asked[remote] = append(p.asked[remote], key)
	p.mu.Unlock()
	var i int
	if _, err := fmt.Sscanf(namespace, "n%d", &i); err != nil {
		return nil, err
	}
	c, _ := svcOf(i)
	web, _ := model.Freeze(c.Object)
	gone := &model.Service{Namespace: namespace, Name: "gone", Type: model.ServiceClusterIP,
		ClusterIPs: []netip.Addr{netip.AddrFrom4([4]byte{10, 97, 0, byte(i + 1)})},
		Ports:      []model.Port{{Name: "http", Protocol: "TCP", Port: 80}}}
	goneFrozen, _ := model.Freeze(gone)
	return []model.Change{
		{Key: gone.Key(), Object: goneFrozen},
		{Key: c.Key, Object: web},
	}, nil
}

func (p *peerB) keys() map[string][]string {
	p.mu.Lock()
	defer p.mu.Unlock()
	out := map[string][]string{}
	for r, k := range p.asked {
		out[r] = slices.Clone(k)
	}
	return out
}

// gainFromB makes replica a of {a, b} alone: b left, and a gains its
// namespaces, which a's source (blocked) cannot list. It returns them.
func gainFromB(t *testing.T, r *shardedReplica) []int {
	t.Helper()
	var gained []int
	for i := range shardedNamespaces {
		if _, ns := svcOf(i); !(*r.owned.Load())(ns) {
			gained = append(gained, i)
		}
	}
	if len(gained) == 0 {
		t.Fatal("b owns nothing: the test checks nothing")
	}
	all := func(string) bool { return true }
	r.owned.Store(&all)
	r.system.Root.Send(r.manager, &zonemanager.RingChanged{Ring: ring.NewRing("a", []ring.Member{{Name: "a", Remote: "a:8090", Owner: true}}, 1)})
	return gained
}

// startHandingReplica is startShardedReplica with b at b:8090 on the ring
// and zones loaded from peer, with a grace long enough that only a
// source's stall starts the fetch.
func startHandingReplica(t *testing.T, peer *peerB) *shardedReplica {
	t.Helper()
	r := startShardedReplica(t, func(cfg *zonemanager.Config) {
		cfg.FetchZone = peer.fetch
		cfg.Grace = time.Minute
		cfg.Ring = ring.NewRing("a", []ring.Member{{Name: "a", Remote: "a:8090", Owner: true}, {Name: "b", Remote: "b:8090", Owner: true}}, 1)
	})
	return r
}

// The zones a replica gains while its source cannot list them load from
// the replica that held them, once the source says it stalls: their names
// are answered (and their reverse names, from this replica's share) while
// the source still lists nothing. When the source has listed at last,
// what the peer handed over and the API server no longer has is deleted.
func TestGainedZonesLoadFromTheReplicaThatHeldThem(t *testing.T) {
	peer := &peerB{}
	r := startHandingReplica(t, peer)
	gained := gainFromB(t, r)
	name := func(i int) string { return fmt.Sprintf("web.n%d.svc.cluster.local.", i) }
	gone := func(i int) string { return fmt.Sprintf("gone.n%d.svc.cluster.local.", i) }
	// Before the source stalls, b's zones are not asked of b (its list may
	// come), but their questions are: b left the ring, and answers them
	// in its lameduck.
	testutil.Eventually(t, 10*time.Second, func() error {
		for _, i := range gained {
			if resp := r.ask(name(i), dns.TypeA); !slices.Equal(resp.Remote, []string{"b"}) {
				return fmt.Errorf("%s before any load: rcode %s, remote %v; want it asked of b", name(i), dns.RcodeToString[resp.Rcode], resp.Remote)
			}
		}
		return nil
	})
	if asked := peer.keys(); len(asked) != 0 {
		t.Fatalf("b asked before the source stalled: %v", asked)
	}
	r.system.Root.Send(r.manager, &zonemanager.SourceStalled{Source: "kubernetes"})
	testutil.Eventually(t, 10*time.Second, func() error {
		for _, i := range gained {
			resp := r.ask(name(i), dns.TypeA)
			if resp.Rcode == dns.RcodeNameError {
				t.Fatalf("%s while it loads from b: NXDOMAIN", name(i))
			}
			if resp.Rcode != dns.RcodeSuccess || len(resp.Answer) != 1 {
				return fmt.Errorf("%s: rcode %s, %d records, remote %v, wait %v", name(i), dns.RcodeToString[resp.Rcode], len(resp.Answer), resp.Remote, resp.Wait)
			}
		}
		return nil
	})
	asked := peer.keys()
	if len(asked) != 1 || len(asked["b:8090"]) != len(gained) {
		t.Fatalf("asked %v; want each of the %d gained zones of b:8090 once", asked, len(gained))
	}
	for _, i := range gained {
		if resp := r.ask(gone(i), dns.TypeA); resp.Rcode != dns.RcodeSuccess || len(resp.Answer) != 1 {
			t.Fatalf("%s, as b handed it over: rcode %s, %d records", gone(i), dns.RcodeToString[resp.Rcode], len(resp.Answer))
		}
	}
	// The reverse zones are other actors (reversepool.go), fed from the same
	// handed-over objects by the message that fed the service zones; they
	// may apply it a moment after the service zones do.
	testutil.Eventually(t, 10*time.Second, func() error {
		for _, i := range gained {
			ptr := r.ask(fmt.Sprintf("%d.0.96.10.in-addr.arpa.", i+1), dns.TypePTR)
			if len(ptr.Answer) != 1 || ptr.Answer[0].(*dns.PTR).Ptr != name(i) {
				return fmt.Errorf("PTR of %s: rcode %s, %v", name(i), dns.RcodeToString[ptr.Rcode], ptr.Answer)
			}
		}
		return nil
	})

	// The source lists at last: every namespace's "web", no "gone".
	r.release <- struct{}{}
	testutil.Eventually(t, 10*time.Second, func() error {
		for _, i := range gained {
			if resp := r.ask(gone(i), dns.TypeA); resp.Rcode != dns.RcodeNameError {
				return fmt.Errorf("%s, gone from the source: rcode %s, %d records", gone(i), dns.RcodeToString[resp.Rcode], len(resp.Answer))
			}
		}
		return nil
	})
	for i := range shardedNamespaces {
		if resp := r.ask(name(i), dns.TypeA); resp.Rcode != dns.RcodeSuccess || len(resp.Answer) != 1 {
			t.Fatalf("%s after the list: rcode %s, %d records", name(i), dns.RcodeToString[resp.Rcode], len(resp.Answer))
		}
	}
}

// A replica hands a namespace without objects over as empty only when it
// knows: it owns the namespace with nothing left to list, or lost it so
// and is still in the grace period of that ring change. A namespace it is
// still listing, or has never heard of, or whose grace has ended, it does
// not hold.
func TestExportOfANamespaceWithoutObjects(t *testing.T) {
	var now atomic.Pointer[time.Time]
	start := time.Now()
	now.Store(&start)
	r := startShardedReplica(t, func(cfg *zonemanager.Config) {
		cfg.Grace = time.Minute
		cfg.Now = func() time.Time { return *now.Load() }
	})
	mine, theirs := "", ""
	var namespaces []model.Change
	for i := range shardedNamespaces {
		ns := fmt.Sprintf("e%d", i)
		namespaces = append(namespaces, model.Change{Key: model.Key{Kind: model.KindNamespace, Name: ns}, Object: &model.Namespace{Name: ns}})
		if r.ring.Owns("a", zone.ServiceZoneKey(ns, "cluster.local.")) {
			mine = ns
		} else {
			theirs = ns
		}
	}
	if mine == "" || theirs == "" {
		t.Fatal("a owns all or no namespace: the test checks nothing")
	}
	r.system.Root.Send(r.manager, &zonemanager.Apply{Source: "kubernetes", Changes: namespaces})
	export := func(ns string) *zonemanager.ZoneExport {
		t.Helper()
		res, err := r.system.Root.RequestFuture(r.manager, &zonemanager.ExportZone{Key: zone.ServiceZoneKey(ns, "cluster.local."), MaxBytes: 1 << 10}, 5*time.Second).Result()
		if err != nil {
			t.Fatal(err)
		}
		return res.(*zonemanager.ZoneExport)
	}
	emptyHeld := func(e *zonemanager.ZoneExport) bool { return e.Held && e.Done && len(e.Objects) == 0 }
	if e := export(mine); !emptyHeld(e) {
		t.Fatalf("%s, owned without objects: %+v; want held, empty", mine, e)
	}
	for _, ns := range []string{theirs, "nosuch"} {
		if e := export(ns); e.Held {
			t.Fatalf("%s exported: %+v", ns, e)
		}
	}
	// b leaves: a gains theirs, which its source has not listed yet, and
	// keeps mine.
	r.system.Root.Send(r.manager, &zonemanager.RingChanged{Ring: ring.NewRing("a", []ring.Member{{Name: "a", Owner: true}}, 1)})
	if e := export(theirs); e.Held {
		t.Fatalf("%s, gained and not listed: %+v", theirs, e)
	}
	r.release <- struct{}{}
	testutil.Eventually(t, 10*time.Second, func() error {
		if e := export(theirs); !emptyHeld(e) {
			return fmt.Errorf("%s, once listed: %+v; want held, empty", theirs, e)
		}
		return nil
	})
	// a leaves the owners: it vouches for both through its grace, no longer.
	r.system.Root.Send(r.manager, &zonemanager.RingChanged{Ring: ring.NewRing("a", []ring.Member{{Name: "a"}, {Name: "c", Owner: true}}, 1)})
	for _, ns := range []string{mine, theirs} {
		if e := export(ns); !emptyHeld(e) {
			t.Fatalf("%s, lost in the grace: %+v; want held, empty", ns, e)
		}
	}
	later := start.Add(2 * time.Minute)
	now.Store(&later)
	for _, ns := range []string{mine, theirs} {
		if e := export(ns); e.Held {
			t.Fatalf("%s after the grace: %+v", ns, e)
		}
	}
}

// A replica exports the zones it holds page by page, in (kind, name)
// order, every object once; not the zones it does not hold, nor reverse
// zones, which every replica builds from its own namespaces.
func TestExportZonePages(t *testing.T) {
	r := startShardedReplica(t)
	mine, theirs := "", ""
	for i := range shardedNamespaces {
		if _, ns := svcOf(i); (*r.owned.Load())(ns) {
			mine = ns
		} else {
			theirs = ns
		}
	}
	if mine == "" || theirs == "" {
		t.Fatal("a owns all or nothing: the test checks nothing")
	}
	// Four more services and their slices in the zone a holds.
	var changes []model.Change
	var want []string
	for i := range 4 {
		s := &model.Service{Namespace: mine, Name: fmt.Sprintf("s%d", i), Type: model.ServiceClusterIP,
			ClusterIPs: []netip.Addr{netip.AddrFrom4([4]byte{10, 98, 0, byte(i + 1)})}}
		es := &model.EndpointSlice{Namespace: mine, Name: fmt.Sprintf("s%d-abc", i), ServiceName: s.Name,
			Endpoints: []model.Endpoint{{Addresses: []netip.Addr{netip.AddrFrom4([4]byte{10, 1, 0, byte(i + 1)})}, Ready: true}}}
		changes = append(changes, model.Change{Key: s.Key(), Object: s}, model.Change{Key: es.Key(), Object: es})
		want = append(want, fmt.Sprintf("%d/%s", model.KindService, s.Name), fmt.Sprintf("%d/%s", model.KindEndpointSlice, es.Name))
	}
	want = append(want, fmt.Sprintf("%d/web", model.KindService))
	slices.Sort(want)
	r.system.Root.Send(r.manager, &zonemanager.Apply{Source: "kubernetes", Changes: changes})
	export := func(key string, kind model.Kind, after string) *zonemanager.ZoneExport {
		t.Helper()
		res, err := r.system.Root.RequestFuture(r.manager, &zonemanager.ExportZone{Key: key, AfterKind: kind, AfterName: after, MaxBytes: 1}, 5*time.Second).Result()
		if err != nil {
			t.Fatal(err)
		}
		return res.(*zonemanager.ZoneExport)
	}
	key := zone.ServiceZoneKey(mine, "cluster.local.")
	testutil.Eventually(t, 5*time.Second, func() error {
		if e := export(key, model.KindService, "s3"); !e.Held || len(e.Objects) == 0 || e.Objects[0].Name != "web" {
			return fmt.Errorf("s3 not applied yet: %+v", e)
		}
		return nil
	})
	var got []string
	var kind model.Kind
	after := ""
	for pages := 0; ; pages++ {
		if pages > 2*len(want) {
			t.Fatalf("no last page after %d pages: %v", pages, got)
		}
		e := export(key, kind, after)
		if !e.Held || len(e.Objects) != 1 {
			t.Fatalf("page after %d/%s: %+v; want one object (MaxBytes 1)", kind, after, e)
		}
		o := e.Objects[0]
		if o.Frozen.Kind() != o.Kind {
			t.Fatalf("%s: a %s frozen as a %s", o.Name, o.Kind, o.Frozen.Kind())
		}
		got = append(got, fmt.Sprintf("%d/%s", o.Kind, o.Name))
		kind, after = o.Kind, o.Name
		if e.Done {
			break
		}
	}
	if !slices.Equal(got, want) {
		t.Fatalf("exported %v, want %v", got, want)
	}
	for _, key := range []string{zone.ServiceZoneKey(theirs, "cluster.local."), "0.96.10.in-addr.arpa.", "nosuch.svc.cluster.local."} {
		if e := export(key, 0, ""); e.Held || len(e.Objects) != 0 {
			t.Errorf("%s exported: %+v", key, e)
		}
	}
}

// A gained zone is asked of the replicas that held it, those still on the
// ring first (one that left may have been killed): with
// replicationFactor 2, the owner that kept it before the one that is gone;
// never this replica, nor one found down.
func TestHoldersOfAGainedZone(t *testing.T) {
	member := func(name string, down bool) ring.Member {
		return ring.Member{Name: name, Remote: name + ":8090", Owner: true, Down: down}
	}
	old := ring.NewRing("g", []ring.Member{member("a", false), member("b", false), member("c", false), member("g", false)}, 2)
	// A zone a and b owned, which g gains from either.
	key := ""
	for i := 0; key == ""; i++ {
		k := fmt.Sprintf("n%d.svc.cluster.local.", i)
		if slices.Equal(old.Order(k), []string{"a", "b", "g", "c"}) {
			key = k
		}
	}
	for _, tc := range []struct {
		name string
		now  []ring.Member
		want []string
	}{
		{"a gone", []ring.Member{member("b", false), member("c", false), member("g", false)}, []string{"b", "a"}},
		{"a found down", []ring.Member{member("a", true), member("b", false), member("c", false), member("g", false)}, []string{"b"}},
		// c gains it too: asked first, it says it does not hold it.
		{"both gone", []ring.Member{member("c", false), member("g", false)}, []string{"c", "a", "b"}},
	} {
		now := ring.NewRing("g", tc.now, 2)
		if !now.Owns("g", key) {
			t.Fatalf("%s: g does not gain %s", tc.name, key)
		}
		names, remotes := zonemanager.Holders("g", key, old, now)
		if !slices.Equal(names, tc.want) {
			t.Errorf("%s: holders %v, want %v", tc.name, names, tc.want)
		}
		for i, n := range names {
			if remotes[i] != n+":8090" {
				t.Errorf("%s: %s at %s", tc.name, n, remotes[i])
			}
		}
	}
}
