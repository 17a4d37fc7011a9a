package zonemanager_test

import (
	"fmt"
	"io"
	"log/slog"
	"net/netip"
	"slices"
	"sync/atomic"
	"testing"
	"time"

	"github.com/asynkron/protoactor-go/actor"
	"github.com/miekg/dns"

	"github.com/shardns/shardns/actors/zonemanager"
	ring "github.com/shardns/shardns/cluster"
	"github.com/shardns/shardns/internal/testutil"
	"github.com/shardns/shardns/model"
	"github.com/shardns/shardns/zone"
)

// shardedSource plays a Kubernetes source with sharded watches: it holds
// the objects of the namespaces it is told to, and answers a replay only
// when the test releases it.
type shardedSource struct {
	manager *actor.PID
	held    func() []model.Change
	release chan struct{}
}

func (s *shardedSource) Receive(ctx actor.Context) {
	switch msg := ctx.Message().(type) {
	case *actor.Started:
		ctx.Send(s.manager, &zonemanager.IngestSharded{})
		ctx.Send(s.manager, &zonemanager.Apply{Source: "kubernetes", Changes: s.held()})
		ctx.Send(s.manager, &zonemanager.Synced{Source: "kubernetes", From: ctx.Self()})
	case *zonemanager.Replay:
		<-s.release // blocks the source: the list of a new watch is not done
		ctx.Send(s.manager, &zonemanager.Apply{Source: "kubernetes", Changes: s.held(), Replay: msg.ID})
		ctx.Send(s.manager, &zonemanager.ReplayDone{Source: "kubernetes", ID: msg.ID})
	}
}

// shardedReplica is replica "a" of ring {a, b} (replicationFactor 1) with
// sharded watches, serving 40 namespaces n0…n39, each with a service at
// 10.96.0.<i+1>, of which its source holds those a owns.
type shardedReplica struct {
	cfg     *zone.Config
	table   *zone.Table
	system  *actor.ActorSystem
	manager *actor.PID
	ring    *ring.Ring
	owned   atomic.Pointer[func(string) bool]
	release chan struct{}
	loaded  atomic.Bool
}

const shardedNamespaces = 40

func svcOf(i int) (model.Change, string) {
	ns := fmt.Sprintf("n%d", i)
	s := &model.Service{Namespace: ns, Name: "web", Type: model.ServiceClusterIP,
		ClusterIPs: []netip.Addr{netip.AddrFrom4([4]byte{10, 96, 0, byte(i + 1)})},
		Ports:      []model.Port{{Name: "http", Protocol: "TCP", Port: 80}}}
	return model.Change{Key: s.Key(), Object: s}, ns
}

func startShardedReplica(t *testing.T, tune ...func(*zonemanager.Config)) *shardedReplica {
	t.Helper()
	r := &shardedReplica{release: make(chan struct{}, 16)}
	r.cfg = &zone.Config{Domains: zone.Domains{Cluster: []string{"cluster.local."}, Reverse: []string{"in-addr.arpa."}}, TTL: 5}
	r.cfg.Prepare()
	r.table = zone.NewTable(zone.NewDirectory(r.cfg, map[string]struct{}{}, false, 0))
	r.ring = ring.NewRing("a", []ring.Member{{Name: "a", Owner: true}, {Name: "b", Owner: true}}, 1)
	owned := func(ns string) bool { return r.ring.Owns("a", zone.ServiceZoneKey(ns, "cluster.local.")) }
	r.owned.Store(&owned)
	logger := slog.New(slog.NewTextHandler(io.Discard, nil))
	r.system = actor.NewActorSystem(actor.WithLoggerFactory(func(*actor.ActorSystem) *slog.Logger { return logger }))
	var synced atomic.Bool
	cfg := zonemanager.Config{Answer: r.cfg, Table: r.table,
		Sources: []string{"kubernetes"}, Now: time.Now, Logger: logger, Synced: &synced,
		Self: "a", Ring: r.ring, Grace: 50 * time.Millisecond, Loaded: &r.loaded}
	for _, tune := range tune {
		tune(&cfg)
	}
	r.manager = r.system.Root.Spawn(zonemanager.NewManagerProps(cfg))
	held := func() []model.Change {
		var out []model.Change
		for i := range shardedNamespaces {
			c, ns := svcOf(i)
			out = append(out, model.Change{Key: model.Key{Kind: model.KindNamespace, Name: ns}, Object: &model.Namespace{Name: ns}})
			if (*r.owned.Load())(ns) {
				out = append(out, c)
			}
		}
		return out
	}
	source := r.system.Root.Spawn(actor.PropsFromProducer(func() actor.Actor {
		return &shardedSource{manager: r.manager, held: held, release: r.release}
	}))
	t.Cleanup(func() {
		close(r.release)
		r.system.Root.StopFuture(source).Wait()
		r.system.Root.StopFuture(r.manager).Wait()
		r.system.Shutdown()
	})
	testutil.Eventually(t, 10*time.Second, func() error {
		if !synced.Load() {
			return fmt.Errorf("not synced")
		}
		return nil
	})
	return r
}

// finishReplay lets the source answer the replay it holds, and waits
// until the zones it loads are visible. Some must be loading when it is
// called: the wait would otherwise end before the replay does.
func (r *shardedReplica) finishReplay(t *testing.T) {
	t.Helper()
	loading := func() []string {
		return slices.DeleteFunc(r.table.Keys(), func(key string) bool { return !r.table.Loading(key) })
	}
	if len(loading()) == 0 {
		t.Fatal("no zone is loading: nothing tells when the replay ends")
	}
	r.release <- struct{}{}
	testutil.Eventually(t, 10*time.Second, func() error {
		if keys := loading(); len(keys) > 0 {
			return fmt.Errorf("zones still loading: %v", keys)
		}
		return nil
	})
}

func (r *shardedReplica) ask(name string, qtype uint16) zone.Response {
	return zone.Answer(r.cfg, r.table, zone.Question{Name: name, Type: qtype})
}

// A replica with sharded watches answers its own namespaces, sends the
// others' to their owner although it never saw their zones, and holds the
// reverse records of its own namespaces only, asking the other replicas
// for the rest.
func TestShardedReplicaPlacesUnknownNamespaces(t *testing.T) {
	r := startShardedReplica(t)
	mine, theirs := 0, 0
	for i := range shardedNamespaces {
		_, ns := svcOf(i)
		resp := r.ask("web."+ns+".svc.cluster.local.", dns.TypeA)
		ptr := r.ask(fmt.Sprintf("%d.0.96.10.in-addr.arpa.", i+1), dns.TypePTR)
		if r.ring.Owns("a", ns+".svc.cluster.local.") {
			mine++
			if resp.Rcode != dns.RcodeSuccess || len(resp.Answer) != 1 {
				t.Errorf("%s (owned): rcode %s, %d records", ns, dns.RcodeToString[resp.Rcode], len(resp.Answer))
			}
			if want := "web." + ns + ".svc.cluster.local."; len(ptr.Answer) != 1 || ptr.Answer[0].(*dns.PTR).Ptr != want {
				t.Errorf("%s: PTR of its service: %+v", ns, ptr)
			}
			continue
		}
		theirs++
		if !slices.Equal(resp.Remote, []string{"b"}) {
			t.Errorf("%s (b's): answered here with rcode %s, remote %v; want it asked of b", ns, dns.RcodeToString[resp.Rcode], resp.Remote)
		}
		if !ptr.FanOut || !slices.Equal(ptr.Remote, []string{"b"}) {
			t.Errorf("%s: PTR of b's service: rcode %s, remote %v, fan-out %v; want it asked of b", ns, dns.RcodeToString[ptr.Rcode], ptr.Remote, ptr.FanOut)
		}
	}
	if mine == 0 || theirs == 0 {
		t.Fatalf("a owns %d namespaces and b %d: the test checks nothing", mine, theirs)
	}
}

// Zones a ring change gives a replica with sharded watches stay hidden
// until its source's new watch has listed them (the replay it answers
// last): meanwhile their names get SERVFAIL when no one else holds them
// (b is found down), never NXDOMAIN, and the replica stays ready for the
// zones it serves. Zones it takes away are forgotten after their grace,
// reverse records included.
func TestShardedReplicaGainsAndForgets(t *testing.T) {
	r := startShardedReplica(t)
	var gained []int
	for i := range shardedNamespaces {
		if _, ns := svcOf(i); !(*r.owned.Load())(ns) {
			gained = append(gained, i)
		}
	}
	all := func(string) bool { return true }
	r.owned.Store(&all)
	r.system.Root.Send(r.manager, &zonemanager.RingChanged{Ring: ring.NewRing("a", []ring.Member{{Name: "a", Owner: true}, {Name: "b", Owner: true, Down: true}}, 1)})
	// The new watch lists half the gained namespaces before the replay
	// ends; the others come with the replay only.
	var listed []model.Change
	for _, i := range gained[:len(gained)/2] {
		c, _ := svcOf(i)
		listed = append(listed, c)
	}
	r.system.Root.Send(r.manager, &zonemanager.Apply{Source: "kubernetes", Changes: listed})
	testutil.Eventually(t, 10*time.Second, func() error {
		if r.table.SlotOf(fmt.Sprintf("n%d.svc.cluster.local.", gained[0])) == nil {
			return fmt.Errorf("the listed zones are not spawned yet")
		}
		return nil
	})
	if !r.loaded.Load() {
		t.Fatal("a ring change's replay made the replica unready while it serves its own zones")
	}
	for _, i := range gained[:len(gained)/2] {
		_, ns := svcOf(i)
		if resp := r.ask("web."+ns+".svc.cluster.local.", dns.TypeA); resp.Rcode != dns.RcodeServerFailure {
			t.Fatalf("%s while loading: rcode %s, %d records; want SERVFAIL", ns, dns.RcodeToString[resp.Rcode], len(resp.Answer))
		}
	}
	r.finishReplay(t)
	for i := range shardedNamespaces {
		_, ns := svcOf(i)
		if resp := r.ask("web."+ns+".svc.cluster.local.", dns.TypeA); resp.Rcode != dns.RcodeSuccess || len(resp.Answer) != 1 {
			t.Fatalf("%s once loaded: rcode %s, %d records, remote %v", ns, dns.RcodeToString[resp.Rcode], len(resp.Answer), resp.Remote)
		}
	}

	// Back to {a, b}: what b owns again is forgotten here after the grace.
	owned := func(ns string) bool { return r.ring.Owns("a", zone.ServiceZoneKey(ns, "cluster.local.")) }
	r.owned.Store(&owned)
	r.system.Root.Send(r.manager, &zonemanager.RingChanged{Ring: r.ring})
	r.release <- struct{}{}
	testutil.Eventually(t, 10*time.Second, func() error {
		for _, i := range gained {
			_, ns := svcOf(i)
			if r.table.SlotOf(ns+".svc.cluster.local.") != nil {
				return fmt.Errorf("%s: zone still held", ns)
			}
			ptr := r.ask(fmt.Sprintf("%d.0.96.10.in-addr.arpa.", i+1), dns.TypePTR)
			if !ptr.FanOut || len(ptr.Answer) != 0 {
				return fmt.Errorf("%s: its PTR is still answered here: %v", ns, ptr.Answer)
			}
		}
		return nil
	})
	for i := range shardedNamespaces {
		_, ns := svcOf(i)
		resp := r.ask("web."+ns+".svc.cluster.local.", dns.TypeA)
		if owned(ns) != (len(resp.Answer) == 1) || !owned(ns) && !slices.Equal(resp.Remote, []string{"b"}) {
			t.Fatalf("%s after the release: rcode %s, %d records, remote %v", ns, dns.RcodeToString[resp.Rcode], len(resp.Answer), resp.Remote)
		}
	}
}

// A replica leaving the ring widens its watches first (IngestWide): from
// then on it keeps every namespace's changes, so its reverse zones hold
// every name. Should the ring then leave it alone (every replica stopping
// at once), the zones it gains load from its source, their names wait
// for the load (Wait, not a bare SERVFAIL), and afterwards every name and
// every reverse name is answered here.
func TestWidenedReplicaAnswersAloneOnceLoaded(t *testing.T) {
	r := startShardedReplica(t)
	r.system.Root.Send(r.manager, &zonemanager.IngestWide{})
	var listed []model.Change
	var theirs []int
	for i := range shardedNamespaces {
		c, ns := svcOf(i)
		listed = append(listed, c)
		if !(*r.owned.Load())(ns) {
			theirs = append(theirs, i)
		}
	}
	r.system.Root.Send(r.manager, &zonemanager.Apply{Source: "kubernetes", Changes: listed}) // the wide watch's list
	ptrOf := func(i int) string { return fmt.Sprintf("%d.0.96.10.in-addr.arpa.", i+1) }
	testutil.Eventually(t, 10*time.Second, func() error {
		for _, i := range theirs {
			if ptr := r.ask(ptrOf(i), dns.TypePTR); len(ptr.Answer) != 1 {
				return fmt.Errorf("PTR of b's n%d: rcode %s, fan-out %v; want it held here", i, dns.RcodeToString[ptr.Rcode], ptr.FanOut)
			}
		}
		return nil
	})

	all := func(string) bool { return true }
	r.owned.Store(&all)
	r.system.Root.Send(r.manager, &zonemanager.RingChanged{Ring: ring.NewRing("a", []ring.Member{{Name: "a", Owner: true}}, 1)})
	name := func(i int) string { return fmt.Sprintf("web.n%d.svc.cluster.local.", i) }
	testutil.Eventually(t, 10*time.Second, func() error {
		if resp := r.ask(name(theirs[0]), dns.TypeA); !resp.Wait || resp.Rcode != dns.RcodeServerFailure {
			return fmt.Errorf("%s while loading: rcode %s, wait %v", name(theirs[0]), dns.RcodeToString[resp.Rcode], resp.Wait)
		}
		return nil
	})
	r.finishReplay(t)
	for i := range shardedNamespaces {
		if resp := r.ask(name(i), dns.TypeA); resp.Rcode != dns.RcodeSuccess || len(resp.Answer) != 1 {
			t.Errorf("%s alone: rcode %s, %d records, remote %v", name(i), dns.RcodeToString[resp.Rcode], len(resp.Answer), resp.Remote)
		}
		if ptr := r.ask(ptrOf(i), dns.TypePTR); ptr.FanOut || len(ptr.Answer) != 1 || ptr.Answer[0].(*dns.PTR).Ptr != name(i) {
			t.Errorf("PTR of n%d alone: rcode %s, fan-out %v, %v", i, dns.RcodeToString[ptr.Rcode], ptr.FanOut, ptr.Answer)
		}
	}
}

// Which namespaces' zones a replica with sharded watches sends elsewhere
// and which it denies (a namespace created later, one it owns without
// objects) is decided purely: TestRoutesApply (a namespace that comes
// makes the placement stale) and TestPlacement.

// Zones a replica gains from one that left the ring (not found down: a
// replica in its lameduck) are asked of that replica while they load
// here, and served here once loaded.
func TestZonesOfALeftOwnerAreAskedOfItWhileTheyLoad(t *testing.T) {
	r := startShardedReplica(t, func(cfg *zonemanager.Config) { cfg.Grace = time.Minute })
	gained := gainFromB(t, r)
	testutil.Eventually(t, 10*time.Second, func() error {
		for _, i := range gained {
			_, ns := svcOf(i)
			if resp := r.ask("web."+ns+".svc.cluster.local.", dns.TypeA); !slices.Equal(resp.Remote, []string{"b"}) {
				return fmt.Errorf("%s while loading: rcode %s, asked of %q; want b", ns, dns.RcodeToString[resp.Rcode], resp.Remote)
			}
		}
		return nil
	})
	// The new watch lists them; the replay's end shows them.
	var listed []model.Change
	for _, i := range gained {
		c, _ := svcOf(i)
		listed = append(listed, c)
	}
	r.system.Root.Send(r.manager, &zonemanager.Apply{Source: "kubernetes", Changes: listed})
	testutil.Eventually(t, 10*time.Second, func() error {
		if r.table.SlotOf(fmt.Sprintf("n%d.svc.cluster.local.", gained[len(gained)-1])) == nil {
			return fmt.Errorf("the listed zones are not spawned yet")
		}
		return nil
	})
	r.finishReplay(t)
	for _, i := range gained {
		_, ns := svcOf(i)
		if resp := r.ask("web."+ns+".svc.cluster.local.", dns.TypeA); resp.Rcode != dns.RcodeSuccess || len(resp.Answer) != 1 {
			t.Fatalf("%s once loaded: rcode %s, %d records, asked of %q", ns, dns.RcodeToString[resp.Rcode], len(resp.Answer), resp.Remote)
		}
	}
}

// A replica that gains none of the zones of an owner that left asks that
// owner for them after their new owner, which says it does not hold
// them while it loads them: the others after it in the ring's order
// never held them.
func TestZonesOfALeftOwnerAreAskedOfItByEveryReplica(t *testing.T) {
	r := startShardedReplica(t, func(cfg *zonemanager.Config) { cfg.Grace = time.Minute })
	two := r.ring
	three := ring.NewRing("a", []ring.Member{{Name: "a", Owner: true}, {Name: "b", Owner: true}, {Name: "c", Owner: true}}, 1)
	ownedIn := func(rg *ring.Ring) func(string) bool {
		return func(ns string) bool { return rg.Owns("a", zone.ServiceZoneKey(ns, "cluster.local.")) }
	}
	var cToB []string // namespaces c owned that b gains when c leaves
	for i := range shardedNamespaces {
		_, ns := svcOf(i)
		if key := zone.ServiceZoneKey(ns, "cluster.local."); three.Owns("c", key) && two.Owns("b", key) {
			cToB = append(cToB, ns)
		}
	}
	if len(cToB) == 0 {
		t.Fatal("no zone goes from c to b: the test checks nothing")
	}
	joined := ownedIn(three)
	r.owned.Store(&joined)
	r.system.Root.Send(r.manager, &zonemanager.RingChanged{Ring: three})
	testutil.Eventually(t, 10*time.Second, func() error {
		if resp := r.ask("web."+cToB[0]+".svc.cluster.local.", dns.TypeA); !slices.Equal(resp.Remote, []string{"c", "b"}) {
			return fmt.Errorf("%s with c on the ring: asked of %q, want [c b]", cToB[0], resp.Remote)
		}
		return nil
	})
	// c leaves in its lameduck: b loads its zones, and until then only c
	// answers them.
	left := ownedIn(two)
	r.owned.Store(&left)
	r.system.Root.Send(r.manager, &zonemanager.RingChanged{Ring: two})
	testutil.Eventually(t, 10*time.Second, func() error {
		for _, ns := range cToB {
			if resp := r.ask("web."+ns+".svc.cluster.local.", dns.TypeA); !slices.Equal(resp.Remote, []string{"b", "c"}) {
				return fmt.Errorf("%s once c left: asked of %q, want [b c]", ns, resp.Remote)
			}
		}
		return nil
	})
}
