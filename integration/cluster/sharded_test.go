package cluster

import (
	"fmt"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	discoveryv1 "k8s.io/api/discovery/v1"

	"github.com/miekg/dns"

	"github.com/shardns/shardns/cluster"
	"github.com/shardns/shardns/integration/harness"
	"github.com/shardns/shardns/integration/kubeapi"
	"github.com/shardns/shardns/internal/testutil"
)

// shardedCluster is namespaces prefix0… on cp, each with a ClusterIP
// service web and an EndpointSlice of two ready endpoints (10.<net>.<i>.1
// and .2, hostnames a and b), and what every replica must answer for them.
type shardedCluster struct {
	names map[string]string // web.<ns>.svc.cluster.local. → cluster IP
	ptrs  map[string]string // reverse name → PTR target
	n     int
	net   int
}

func newShardedCluster(t *testing.T, cp *kubeapi.ControlPlane, prefix string, n, net int) *shardedCluster {
	t.Helper()
	c := &shardedCluster{names: harness.WebNamespaces(t, cp, prefix, n), ptrs: map[string]string{}, n: n, net: net}
	for i := range n {
		ns := fmt.Sprintf("%s%d", prefix, i)
		harness.CreateEndpointSlice(t, cp.Client, ns, "web", "web-1", discoveryv1.AddressTypeIPv4,
			harness.Endpoint{IP: fmt.Sprintf("10.%d.%d.1", net, i), Hostname: "a"}, harness.Endpoint{IP: fmt.Sprintf("10.%d.%d.2", net, i), Hostname: "b"})
		c.ptrs[harness.ReverseName(fmt.Sprintf("10.%d.%d.1", net, i))] = "a.web." + ns + ".svc.cluster.local."
		c.ptrs[harness.ReverseName(fmt.Sprintf("10.%d.%d.2", net, i))] = "b.web." + ns + ".svc.cluster.local."
		c.ptrs[harness.ReverseName(c.names["web."+ns+".svc.cluster.local."])] = "web." + ns + ".svc.cluster.local."
	}
	return c
}

// check asks addr every name and reverse name, a missing service and an
// unknown address of the endpoints' range.
func (c *shardedCluster) check(addr string) error {
	for name, ip := range c.names {
		if err := harness.AnswerIs(addr, name, ip); err != nil {
			return err
		}
		if err := harness.NXDomain(addr, "missing"+name[len("web"):]); err != nil {
			return err
		}
	}
	for rev, target := range c.ptrs {
		r, err := testutil.Exchange(addr, "udp", rev, dns.TypePTR)
		if err != nil {
			return err
		}
		if r.Rcode != dns.RcodeSuccess || len(r.Answer) != 1 || r.Answer[0].(*dns.PTR).Ptr != target {
			return fmt.Errorf("PTR %s from %s: %s %v, want %s", rev, addr, dns.RcodeToString[r.Rcode], r.Answer, target)
		}
	}
	r, err := testutil.Exchange(addr, "udp", harness.ReverseName(fmt.Sprintf("10.%d.0.99", c.net)), dns.TypePTR)
	if err != nil {
		return err
	}
	if r.Rcode != dns.RcodeNameError {
		return fmt.Errorf("PTR of an unknown address from %s: %s %v, want NXDOMAIN", addr, dns.RcodeToString[r.Rcode], r.Answer)
	}
	return nil
}

// events is how many Services and EndpointSlices r's watches delivered.
func events(t *testing.T, r *harness.Replica) (services, slices float64) {
	return eventCounts(harness.MustMetrics(t, r.HTTP))
}

// eventCounts is events from a page of metrics already read.
func eventCounts(m harness.MetricSamples) (services, slices float64) {
	return m.SumWith("shardns_kubernetes_events_total", `kind="Service"`), m.SumWith("shardns_kubernetes_events_total", `kind="EndpointSlice"`)
}

// With an apiserver that shards watches, three replicas (replication
// factor 1) each receive the Services and EndpointSlices of the namespaces
// they own, and every replica answers every name, reverse names included,
// as one holding everything would. Namespaces created later reach only
// their owner's watches. A fourth replica joins under queries without a
// failed answer.
func TestShardedWatches(t *testing.T) {
	cp := kubeapi.Shared(t)
	c := newShardedCluster(t, cp, "sharded", 24, 240)
	a := harness.StartReplica(t, cp, harness.ReplicaOptions{Name: "r0", RF: 1, Cluster: harness.FastGossip})
	b := harness.StartReplica(t, cp, harness.ReplicaOptions{Name: "r1", Seeds: []string{a.Gossip}, RF: 1, Cluster: harness.FastGossip})
	d := harness.StartReplica(t, cp, harness.ReplicaOptions{Name: "r2", Seeds: []string{a.Gossip}, RF: 1, Cluster: harness.FastGossip})
	rs := []*harness.Replica{a, b, d}
	harness.Settled(t, rs, 3)
	// How soon a change propagates is TestKubernetesChangesWithinASecond's
	// to say; here a busy machine may take its time, and only the answers
	// count.
	checkAll := func(c *shardedCluster, rs []*harness.Replica) {
		t.Helper()
		testutil.Eventually(t, 30*time.Second, func() error {
			for _, r := range rs {
				if err := c.check(r.Addr); err != nil {
					return err
				}
			}
			return nil
		})
	}
	checkAll(c, rs)
	before := map[*harness.Replica][2]float64{}
	for _, r := range rs {
		if harness.MustMetrics(t, r.HTTP).Sum("shardns_kubernetes_sharded_watch") != 1 {
			t.Fatalf("%s does not shard its watches", r.HTTP)
		}
		s, e := events(t, r)
		before[r] = [2]float64{s, e}
	}

	const late = 24
	lateCluster := newShardedCluster(t, cp, "shardedlate", late, 241)
	checkAll(lateCluster, rs)
	// Each replica receives the new namespaces it owns, and of the others
	// only those whose hash falls between two of its own (its watch was
	// made before they existed): a few.
	owns := harness.NamespacesOwned([]string{"r0", "r1", "r2"}, "shardedlate", late)
	var shares []string
	for i, r := range rs {
		owned := owns[i]
		s, e := events(t, r)
		s, e = s-before[r][0], e-before[r][1]
		shares = append(shares, fmt.Sprintf("r%d owns %d: %.0f/%.0f", i, owned, s, e))
		for _, got := range []float64{s, e} {
			if got < float64(owned) || got > float64(owned)+late/4 {
				t.Errorf("r%d received %.0f Services and %.0f EndpointSlices of the %d new namespaces, owning %d", i, s, e, late, owned)
			}
		}
	}
	t.Logf("Services/EndpointSlices of %d new namespaces received by each of 3 replicas: %s", late, strings.Join(shares, ", "))

	names := map[string]string{}
	for k, v := range c.names {
		names[k] = v
	}
	var targets atomic.Value
	targets.Store([]string{a.Addr, b.Addr, d.Addr})
	l := harness.StartLoad(func() []string { return targets.Load().([]string) }, names)
	e := harness.StartReplica(t, cp, harness.ReplicaOptions{Name: "r3", Seeds: []string{a.Gossip}, RF: 1, Cluster: harness.FastGossip})
	rs = append(rs, e)
	harness.Settled(t, rs, 4)
	targets.Store([]string{a.Addr, b.Addr, d.Addr, e.Addr})
	checkAll(c, rs)
	l.Finish(t, "a fourth replica joining with sharded watches")
	checkAll(lateCluster, rs)
}

// A replica leaving while others stay (a scale-in, a rolling restart)
// keeps its watches sharded through its lameduck: the others take its
// zones over from their own sharded lists, and every name and reverse
// name is answered throughout. Holding the whole cluster, as the last
// replicas of a StatefulSet stopped whole do (TestClusterStopAllAtOnce),
// took a replica of seven at 20k services from 42 to 232 MB.
func TestShardedScaleInListsNothing(t *testing.T) {
	cp := kubeapi.Shared(t)
	c := newShardedCluster(t, cp, "scalein", 12, 242)
	a := harness.StartReplica(t, cp, harness.ReplicaOptions{Name: "r0", RF: 1, Cluster: harness.FastGossip})
	b := harness.StartReplica(t, cp, harness.ReplicaOptions{Name: "r1", Seeds: []string{a.Gossip}, RF: 1, Cluster: harness.FastGossip})
	d := harness.StartReplica(t, cp, harness.ReplicaOptions{Name: "r2", Seeds: []string{a.Gossip}, RF: 1, Cluster: harness.FastGossip, Lameduck: 4 * time.Second})
	rs := []*harness.Replica{a, b, d}
	harness.Settled(t, rs, 3)
	for _, r := range rs {
		testutil.Eventually(t, 30*time.Second, func() error { return c.check(r.Addr) })
	}
	services, slices := events(t, d)
	l := harness.StartLoad(func() []string { return []string{a.Addr, b.Addr} }, c.names)
	if err := d.Cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	read := 0
	for exited := false; !exited; {
		select {
		case <-d.Done:
			exited = true
		case <-time.After(100 * time.Millisecond):
			m, err := harness.ScrapeMetrics(d.HTTP)
			if err != nil {
				continue // its HTTP server closes at the end of the lameduck
			}
			read++
			if m.Sum("shardns_kubernetes_sharded_watch") != 1 {
				t.Fatal("r2 widened its watches to every namespace while r0 and r1 stay")
			}
			// At most a list again of what it held; widened, it would
			// have received every namespace's objects.
			s, e := eventCounts(m)
			if s > 2*services || e > 2*slices {
				t.Fatalf("r2 received %.0f Services and %.0f EndpointSlices leaving, %.0f and %.0f before", s, e, services, slices)
			}
		}
	}
	if read < 10 {
		t.Fatalf("r2's metrics read %d times while it left, through a lameduck of 4 s: the test checks nothing", read)
	}
	harness.Settled(t, rs[:2], 2)
	for _, r := range rs[:2] {
		testutil.Eventually(t, 30*time.Second, func() error { return c.check(r.Addr) })
	}
	l.Finish(t, "a replica leaving with sharded watches while two stay")
}

// An apiserver that ignores shard selectors (older than 1.36, or the gate
// off) leaves every replica watching every object, and answering as
// before.
func TestShardedWatchesFallBack(t *testing.T) {
	cp := kubeapi.StartWith(t, kubeapi.Unsharded)
	c := newShardedCluster(t, cp, "unsharded", 6, 242)
	a := harness.StartReplica(t, cp, harness.ReplicaOptions{Name: "r0", RF: 1, Cluster: harness.FastGossip})
	b := harness.StartReplica(t, cp, harness.ReplicaOptions{Name: "r1", Seeds: []string{a.Gossip}, RF: 1, Cluster: harness.FastGossip})
	harness.Settled(t, []*harness.Replica{a, b}, 2)
	testutil.Eventually(t, 10*time.Second, func() error {
		for _, r := range []*harness.Replica{a, b} {
			if err := c.check(r.Addr); err != nil {
				return err
			}
		}
		return nil
	})
	for _, r := range []*harness.Replica{a, b} {
		m := harness.MustMetrics(t, r.HTTP)
		if m.Sum("shardns_kubernetes_sharded_watch") != 0 {
			t.Fatalf("%s says its watches are sharded on an apiserver that ignores shard selectors", r.HTTP)
		}
		if s := m.SumWith("shardns_kubernetes_events_total", `kind="Service"`); s < float64(c.n) {
			t.Fatalf("%s received %.0f Service events, want every one of the %d", r.HTTP, s, c.n)
		}
	}
}

// A namespace without objects has no zone on any replica: its names are
// NXDOMAIN from every replica, as CoreDNS answers them (the search-path
// names of its pods among them), whichever replica owns it.
func TestShardedEmptyNamespaceIsNXDOMAIN(t *testing.T) {
	cp := kubeapi.Shared(t)
	full := harness.WebNamespaces(t, cp, "hasweb", 2)
	ring := cluster.NewRing("", []cluster.Member{{Name: "r0", Owner: true}, {Name: "r1", Owner: true}}, 1)
	var empty []string
	owners := map[string]int{}
	for i := range 8 {
		ns := fmt.Sprintf("noservices%d", i)
		harness.CreateNamespace(t, cp.Client, ns, nil)
		empty = append(empty, ns)
		owners[ring.Order(ns + ".svc.cluster.local.")[0]]++
	}
	if owners["r0"] == 0 || owners["r1"] == 0 {
		t.Fatalf("owners of the empty namespaces %v: the test checks one replica only", owners)
	}
	a := harness.StartReplica(t, cp, harness.ReplicaOptions{Name: "r0", RF: 1, Cluster: harness.FastGossip})
	b := harness.StartReplica(t, cp, harness.ReplicaOptions{Name: "r1", Seeds: []string{a.Gossip}, RF: 1, Cluster: harness.FastGossip})
	harness.Settled(t, []*harness.Replica{a, b}, 2)
	for _, r := range []*harness.Replica{a, b} {
		testutil.Eventually(t, 10*time.Second, func() error {
			for name, ip := range full {
				if err := harness.AnswerIs(r.Addr, name, ip); err != nil {
					return err
				}
			}
			return nil
		})
		for _, ns := range empty {
			for _, name := range []string{"web." + ns + ".svc.cluster.local.", "api.github.com." + ns + ".svc.cluster.local."} {
				if err := harness.NXDomain(r.Addr, name); err != nil {
					t.Error(err)
				}
			}
		}
	}
}

// A replica that leaves (a scale-in, a rolling restart) while the API
// server is down hands its zones over: the one that stays cannot list
// them, so it loads them from the leaving replica during its lameduck, and
// answers every name and reverse name after that one is gone. Queries sent
// throughout all succeed, and the names of its namespaces without objects
// stay NXDOMAIN (not SERVFAIL, which ends a musl client's search path);
// once the API server is back, the names are the API server's again.
func TestShardedLeaveWithAPIDownHandsZonesOver(t *testing.T) {
	cp := kubeapi.Start(t)
	names := harness.WebNamespaces(t, cp, "handoff", 8)
	var empty []string
	for i := range 6 {
		ns := fmt.Sprintf("handoff-empty%d", i)
		harness.CreateNamespace(t, cp.Client, ns, nil)
		empty = append(empty, ns)
	}
	a := harness.StartReplica(t, cp, harness.ReplicaOptions{Name: "r0", RF: 1, Cluster: harness.FastGossip})
	b := harness.StartReplica(t, cp, harness.ReplicaOptions{Name: "r1", Seeds: []string{a.Gossip}, RF: 1, Cluster: harness.FastGossip, Lameduck: 4 * time.Second})
	harness.Settled(t, []*harness.Replica{a, b}, 2)
	for name, ip := range names {
		if err := harness.AnswerIs(a.Addr, name, ip); err != nil {
			t.Fatal(err)
		}
	}
	ring := cluster.NewRing("", []cluster.Member{{Name: "r0", Owner: true}, {Name: "r1", Owner: true}}, 1)
	gained := 0
	for name := range names {
		if ring.Owns("r1", strings.TrimPrefix(name, "web.")) {
			gained++
		}
	}
	if gained == 0 || gained == len(names) {
		t.Fatalf("r1 owns %d of %d namespaces: the test checks nothing", gained, len(names))
	}
	emptyGained := 0
	for _, ns := range empty {
		if ring.Owns("r1", ns+".svc.cluster.local.") {
			emptyGained++
		}
		if err := harness.NXDomain(a.Addr, "web."+ns+".svc.cluster.local."); err != nil {
			t.Fatal(err)
		}
	}
	if emptyGained == 0 {
		t.Fatal("r1 owns no namespace without objects: the test checks nothing of them")
	}

	cp.StopAPIServer(t)
	l := harness.StartLoad(func() []string { return []string{a.Addr} }, names)
	if err := b.Cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	select {
	case <-b.Done:
	case <-time.After(30 * time.Second):
		t.Fatal("r1 did not exit within 30 s of SIGTERM")
	}
	// r1 is gone and the API server down: only what r1 handed over can
	// answer its namespaces now.
	for end := time.Now().Add(2 * time.Second); time.Now().Before(end); {
		for name, ip := range names {
			if err := harness.AnswerIs(a.Addr, name, ip); err != nil {
				t.Fatalf("after r1 left, with the API server down: %v", err)
			}
			if err := harness.PointsTo(a.Addr, ip, name); err != nil {
				t.Fatalf("after r1 left, with the API server down: %v", err)
			}
		}
		for _, ns := range empty {
			for _, name := range []string{"web." + ns + ".svc.cluster.local.", "api.github.com." + ns + ".svc.cluster.local."} {
				if err := harness.NXDomain(a.Addr, name); err != nil {
					t.Fatalf("after r1 left, with the API server down: %v", err)
				}
			}
		}
	}
	l.Finish(t, "a replica leaving while the API server is down")
	cp.StartAPIServer(t)
	created := harness.WebNamespaces(t, cp, "handoff-later", 2)
	// The watches come back on client-go's reflector backoff: 0.8 s
	// doubling while the API server was down, each wait jittered up to
	// twice its length, so the attempt that finds it back may come 25 s
	// after it is (seen here: 11-31 s until the new namespaces' watches
	// were started), and CoreDNS's watches wait alike.
	testutil.Eventually(t, 60*time.Second, func() error {
		for _, set := range []map[string]string{names, created} {
			for name, ip := range set {
				if err := harness.AnswerIs(a.Addr, name, ip); err != nil {
					return err
				}
			}
		}
		return nil
	})
}

// With replicationFactor 2, a replica killed while the API server is down
// leaves each of its zones with one owner that holds it; the replica that
// gains the other half of its ownership cannot list it, so it loads it
// from that owner. When that owner is killed in turn, the last replica
// answers every name alone, the API server still down, and no query sent
// to it throughout fails.
func TestShardedKillsWithAPIDownKeepEveryZone(t *testing.T) {
	cp := kubeapi.Start(t)
	names := harness.WebNamespaces(t, cp, "twokills", 8)
	a := harness.StartReplica(t, cp, harness.ReplicaOptions{Name: "r0", RF: 2, Cluster: harness.FastGossip})
	b := harness.StartReplica(t, cp, harness.ReplicaOptions{Name: "r1", Seeds: []string{a.Gossip}, RF: 2, Cluster: harness.FastGossip})
	c := harness.StartReplica(t, cp, harness.ReplicaOptions{Name: "r2", Seeds: []string{a.Gossip}, RF: 2, Cluster: harness.FastGossip})
	harness.Settled(t, []*harness.Replica{a, b, c}, 3)
	for name, ip := range names {
		if err := harness.AnswerIs(a.Addr, name, ip); err != nil {
			t.Fatal(err)
		}
	}
	ring := cluster.NewRing("", []cluster.Member{{Name: "r0", Owner: true}, {Name: "r1", Owner: true}, {Name: "r2", Owner: true}}, 2)
	gains := 0
	for name := range names {
		if !ring.Owns("r0", strings.TrimPrefix(name, "web.")) {
			gains++ // r1 and r2 own it: r0 gains it when r2 is killed
		}
	}
	if gains == 0 {
		t.Fatal("r0 owns every namespace already: the test checks nothing")
	}

	cp.StopAPIServer(t)
	l := harness.StartLoad(func() []string { return []string{a.Addr} }, names)
	c.Cmd.Process.Kill()
	testutil.Eventually(t, 30*time.Second, func() error {
		m, err := harness.ScrapeMetrics(a.HTTP)
		if err != nil {
			return err
		}
		if n := m.SumWith("shardns_cluster_zones_handed_over_total", `result="loaded"`); n < float64(gains) {
			return fmt.Errorf("r0 loaded %.0f zones from r1, want at least %d", n, gains)
		}
		return nil
	})
	b.Cmd.Process.Kill()
	ownsAlone(t, a)
	for name, ip := range names {
		if err := harness.AnswerIs(a.Addr, name, ip); err != nil {
			t.Fatalf("r0 alone, the API server down: %v", err)
		}
	}
	l.Finish(t, "two replicas of three killed in turn, replicationFactor 2, the API server down")
}

// A replica that gains namespaces while the API server is down cannot list
// them: until it can, their names get SERVFAIL, never NXDOMAIN or a wrong
// answer, and its own keep answering. Once the API server is back, every
// name is answered.
func TestShardedGainWithAPIDown(t *testing.T) {
	cp := kubeapi.Start(t)
	names := harness.WebNamespaces(t, cp, "apidown", 8)
	a := harness.StartReplica(t, cp, harness.ReplicaOptions{Name: "r0", RF: 1, Cluster: harness.FastGossip})
	b := harness.StartReplica(t, cp, harness.ReplicaOptions{Name: "r1", Seeds: []string{a.Gossip}, RF: 1, Cluster: harness.FastGossip})
	harness.Settled(t, []*harness.Replica{a, b}, 2)
	for name, ip := range names {
		if err := harness.AnswerIs(a.Addr, name, ip); err != nil {
			t.Fatal(err)
		}
	}
	ring := cluster.NewRing("", []cluster.Member{{Name: "r0", Owner: true}, {Name: "r1", Owner: true}}, 1)
	var gained []string
	for name := range names {
		if ring.Owns("r1", strings.TrimPrefix(name, "web.")) {
			gained = append(gained, name)
		}
	}
	if len(gained) == 0 || len(gained) == len(names) {
		t.Fatalf("r1 owns %d of %d namespaces: the test checks nothing", len(gained), len(names))
	}

	cp.StopAPIServer(t)
	b.Cmd.Process.Kill()
	// r0 finds r1 gone and takes its namespaces, which it cannot list.
	ownsAlone(t, a)
	// A name of a zone loading here, with no other replica to ask, waits
	// for the load up to three dispatch timeouts before its SERVFAIL: the
	// client waits as long as a stub resolver does (5 s).
	client := &dns.Client{Timeout: 5 * time.Second}
	servfails := 0
	for end := time.Now().Add(3 * time.Second); time.Now().Before(end); {
		for name, ip := range names {
			r, _, err := client.Exchange(new(dns.Msg).SetQuestion(name, dns.TypeA), a.Addr)
			if err != nil {
				t.Fatal(err)
			}
			switch {
			case r.Rcode == dns.RcodeServerFailure:
				servfails++
			case r.Rcode != dns.RcodeSuccess || len(r.Answer) != 1 || r.Answer[0].(*dns.A).A.String() != ip:
				t.Fatalf("%s with the API server down: %s %v, want %s or SERVFAIL", name, dns.RcodeToString[r.Rcode], r.Answer, ip)
			}
		}
	}
	if servfails == 0 {
		t.Fatal("every name answered while the namespaces gained could not be listed: the test checks nothing")
	}
	cp.StartAPIServer(t)
	testutil.Eventually(t, 30*time.Second, func() error {
		for name, ip := range names {
			if err := harness.AnswerIs(a.Addr, name, ip); err != nil {
				return err
			}
		}
		return nil
	})
}

// ownsAlone waits until r counts no other replica as a live owner: the
// others were killed, and it found them gone.
func ownsAlone(t *testing.T, r *harness.Replica) {
	t.Helper()
	testutil.Eventually(t, 30*time.Second, func() error {
		ring, err := r.Ring(t)
		if err != nil {
			return err
		}
		for _, m := range ring.Members {
			if m.Name != ring.Self && m.Owner && !m.Down {
				return fmt.Errorf("%s still counts %s as an owner", ring.Self, m.Name)
			}
		}
		return nil
	})
}
