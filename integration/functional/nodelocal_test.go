package functional

import (
	"fmt"
	"maps"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/miekg/dns"

	"github.com/shardns/shardns/integration/harness"
	"github.com/shardns/shardns/integration/kubeapi"
	"github.com/shardns/shardns/internal/testutil"
	"github.com/shardns/shardns/node"
)

// ownerDispatches is how many questions the node-local process sent to
// owner, answered or not.
func ownerDispatches(t testing.TB, addr, owner string) float64 {
	return harness.ScrapeLabelled(t, addr, "shardns_cluster_owner_dispatches_total", fmt.Sprintf("owner=%q", owner))
}

func totalDispatches(t testing.TB, addr string) float64 {
	return harness.ScrapeLabelled(t, addr, "shardns_cluster_dispatches_total", "result=")
}

// A node-local process beside three replicas on the real apiserver: it
// gives the replicas' answers, serves repeats from its cache without
// asking anyone, survives the kill -9 of an owner without a failed query,
// and follows the ring when a replica leaves or joins.
func TestNodeLocalAsksOwners(t *testing.T) {
	cp := kubeapi.Shared(t)
	names := harness.WebNamespaces(t, cp, "nodelocal", 6)
	a := harness.StartReplica(t, cp, harness.ReplicaOptions{Name: "r0", RF: 2, Cluster: harness.FastGossip})
	b := harness.StartReplica(t, cp, harness.ReplicaOptions{Name: "r1", Seeds: []string{a.Gossip}, RF: 2, Cluster: harness.FastGossip})
	c := harness.StartReplica(t, cp, harness.ReplicaOptions{Name: "r2", Seeds: []string{a.Gossip}, RF: 2, Cluster: harness.FastGossip})
	harness.Settled(t, []*harness.Replica{a, b, c}, 3)
	nl := harness.StartNodeLocalProcess(t, "nl0", harness.RemoteOf(t, a))
	// The node-local process is no member: it sees the three replicas.
	harness.Settled(t, []*harness.Replica{a, b, c, nl}, 3)
	ring, err := nl.Ring(t)
	if err != nil {
		t.Fatal(err)
	}
	for _, m := range ring.Members {
		if m.Name == "nl0" && m.Owner {
			t.Fatalf("the node-local process is an owner in its own ring: %+v", ring.Members)
		}
	}
	// It loads no zones: once started, no release is pending and its
	// collector runs at the usual target, as a settled replica's does,
	// not at the loads' own (node/memory.go).
	testutil.Eventually(t, 10*time.Second, func() error {
		for _, r := range []*harness.Replica{nl, a} {
			if p := harness.Scrape(t, r.HTTP, "shardns_memory_return_pending"); p != 0 {
				return fmt.Errorf("%s: shardns_memory_return_pending %v", r.HTTP, p)
			}
		}
		if got, want := harness.Scrape(t, nl.HTTP, "go_gc_gogc_percent"), harness.Scrape(t, a.HTTP, "go_gc_gogc_percent"); got != want {
			return fmt.Errorf("the node-local process collects at GOGC %v, the replica at %v", got, want)
		}
		return nil
	})

	t.Run("reference answers", func(t *testing.T) {
		questions := []struct {
			name  string
			qtype uint16
		}{
			{"web.nodelocal0.svc.cluster.local.", dns.TypeA},
			{"WEB.Nodelocal1.svc.cluster.local.", dns.TypeA},
			{"_http._tcp.web.nodelocal2.svc.cluster.local.", dns.TypeSRV},
			{"web.nodelocal3.svc.cluster.local.", dns.TypeAAAA},
			{"absent.nodelocal4.svc.cluster.local.", dns.TypeA},
			{"web.no-such-namespace.svc.cluster.local.", dns.TypeA},
			{"nodelocal5.svc.cluster.local.", dns.TypeA},
			{"cluster.local.", dns.TypeSOA},
			{"dns-version.cluster.local.", dns.TypeTXT},
			{"web.nodelocal0.svc.cluster.local.nodelocal0.svc.cluster.local.", dns.TypeA},
			// Pod names (pods: insecure) exist only in a namespace that
			// does, which the node-local process does not know.
			{"10-244-1-10.nodelocal0.pod.cluster.local.", dns.TypeA},
			{"10-244-1-10.nosuchns.pod.cluster.local.", dns.TypeA},
			{"fd00--1.nodelocal1.pod.cluster.local.", dns.TypeAAAA},
			{"10-244-1-10.nodelocal2.pod.cluster.local.", dns.TypeAAAA},
			{"nodelocal3.pod.cluster.local.", dns.TypeA},
			{"nosuchns.pod.cluster.local.", dns.TypeA},
			{"not-an-ip.nodelocal4.pod.cluster.local.", dns.TypeA},
			// Reverse names: with sharded watches every replica holds a
			// share of each reverse zone, and the node-local asks them all.
			{harness.ReverseName(names["web.nodelocal0.svc.cluster.local."]), dns.TypePTR},
			{harness.ReverseName(names["web.nodelocal3.svc.cluster.local."]), dns.TypePTR},
			{harness.ReverseName("10.96.255.254"), dns.TypePTR},
		}
		for _, q := range questions {
			want, err := testutil.Exchange(a.Addr, "udp", q.name, q.qtype)
			if err != nil {
				t.Fatal(err)
			}
			got, err := testutil.Exchange(nl.Addr, "udp", q.name, q.qtype)
			if err != nil {
				t.Fatal(err)
			}
			// Each server numbers its own SOA serial; the rest must agree.
			for _, m := range []*dns.Msg{got, want} {
				for _, rr := range append(m.Answer, m.Ns...) {
					if soa, ok := rr.(*dns.SOA); ok {
						soa.Serial = 0
					}
				}
			}
			if got.Rcode != want.Rcode || !slices.Equal(testutil.Records(got.Answer), testutil.Records(want.Answer)) ||
				len(got.Ns) != len(want.Ns) {
				t.Errorf("%s %s: node-local %s %v %v, replica %s %v %v", q.name, dns.TypeToString[q.qtype],
					dns.RcodeToString[got.Rcode], got.Answer, got.Ns, dns.RcodeToString[want.Rcode], want.Answer, want.Ns)
			}
		}
	})

	t.Run("pod names", func(t *testing.T) {
		if err := podNamesAnswer(nl.Addr, 0); err != nil {
			t.Fatal(err)
		}
	})

	t.Run("cache hits need no dispatch", func(t *testing.T) {
		for _, name := range []string{"web.nodelocal0.svc.cluster.local.", "gone.nodelocal0.svc.cluster.local."} {
			// The first question may find an entry an earlier subtest
			// cached, about to expire: one that expires among the
			// repeats is asked of its owner again, and the repeats are
			// measured again. A cache that does not answer fails every
			// try.
			var first *dns.Msg
			testutil.Eventually(t, 15*time.Second, func() error {
				var err error
				if first, err = testutil.Exchange(nl.Addr, "udp", name, dns.TypeA); err != nil {
					return err
				}
				before := totalDispatches(t, nl.HTTP)
				hits := harness.Scrape(t, nl.HTTP, "shardns_cluster_cache_hits_total")
				for range 5 {
					again, err := testutil.Exchange(nl.Addr, "udp", name, dns.TypeA)
					if err != nil {
						return err
					}
					if again.Rcode != first.Rcode || !slices.Equal(testutil.Records(again.Answer), testutil.Records(first.Answer)) {
						return fmt.Errorf("%s: cached %v, first %v", name, again, first)
					}
				}
				if after := totalDispatches(t, nl.HTTP); after != before {
					return fmt.Errorf("%s: %v dispatches for 5 repeats, want 0", name, after-before)
				}
				if got := harness.Scrape(t, nl.HTTP, "shardns_cluster_cache_hits_total") - hits; got != 5 {
					return fmt.Errorf("%s: %v cache hits, want 5", name, got)
				}
				return nil
			})
			if name == "gone.nodelocal0.svc.cluster.local." && first.Rcode != dns.RcodeNameError {
				t.Errorf("%s: %s, want a cached NXDOMAIN", name, dns.RcodeToString[first.Rcode])
			}
		}
	})

	t.Run("an owner killed, then a replica joining", func(t *testing.T) {
		var targets atomic.Value
		targets.Store([]string{nl.Addr})
		withPods := maps.Clone(names)
		for i := range 6 {
			withPods[fmt.Sprintf("10-244-7-%d.nodelocal%d.pod.cluster.local.", i+1, i)] = fmt.Sprintf("10.244.7.%d", i+1)
		}
		l := harness.StartLoad(func() []string { return targets.Load().([]string) }, withPods)
		c.Cmd.Process.Kill()
		harness.Settled(t, []*harness.Replica{a, b, nl}, 2)
		enough(t, l, 300)
		l.Finish(t, "kill -9 of an owner, asked through the node-local process")

		// The ring no longer has r2: no question goes there any more.
		before := ownerDispatches(t, nl.HTTP, "r2")
		for i := range 60 {
			if err := harness.NXDomain(nl.Addr, fmt.Sprintf("after-kill%d.nodelocal%d.svc.cluster.local.", i, i%6)); err != nil {
				t.Fatal(err)
			}
			if err := podNamesAnswer(nl.Addr, i+1); err != nil {
				t.Fatal(err)
			}
		}
		if after := ownerDispatches(t, nl.HTTP, "r2"); after != before {
			t.Fatalf("%v questions went to the killed replica after the ring dropped it", after-before)
		}

		l = harness.StartLoad(func() []string { return targets.Load().([]string) }, names)
		d := harness.StartReplica(t, cp, harness.ReplicaOptions{Name: "r3", Seeds: []string{a.Gossip}, RF: 2, Cluster: harness.FastGossip})
		harness.Settled(t, []*harness.Replica{a, b, d, nl}, 3)
		// New questions reach the new owner within seconds.
		i := 0
		testutil.Eventually(t, 10*time.Second, func() error {
			for range 30 {
				i++
				if err := harness.NXDomain(nl.Addr, fmt.Sprintf("after-join%d.nodelocal%d.svc.cluster.local.", i, i%6)); err != nil {
					return err
				}
			}
			if n := ownerDispatches(t, nl.HTTP, "r3"); n == 0 {
				return fmt.Errorf("no question went to the new replica r3 yet")
			}
			return nil
		})
		l.Finish(t, "a replica joining, asked through the node-local process")
	})
}

// podNamesAnswer checks, through addr, a pod name (pods: insecure) in a
// namespace that exists and one in a namespace that does not: the
// dashed address, and NXDOMAIN, as CoreDNS answers them. Each n gives
// names not asked before, so no cache answers them.
func podNamesAnswer(addr string, n int) error {
	ip := fmt.Sprintf("10.244.%d.%d", n/250, n%250+1)
	dashed := strings.ReplaceAll(ip, ".", "-")
	if err := harness.AnswerIs(addr, fmt.Sprintf("%s.nodelocal%d.pod.cluster.local.", dashed, n%6), ip); err != nil {
		return err
	}
	return harness.NXDomain(addr, fmt.Sprintf("%s.nosuchns%d.pod.cluster.local.", dashed, n))
}

// enough waits until l has asked n questions, so a load spans more than
// the moment it was started in.
func enough(t *testing.T, l *harness.Load, n int64) {
	t.Helper()
	testutil.Eventually(t, 60*time.Second, func() error {
		if asked := l.Asked.Load(); asked < n {
			return fmt.Errorf("%d questions asked, waiting for %d", asked, n)
		}
		return nil
	})
}

// startNodeLocal starts an in-process node-local node reading the ring
// from the replica whose actor remote listens on seedRemote.
func startNodeLocal(t testing.TB, name, seedRemote string) *node.Node {
	t.Helper()
	text := fmt.Sprintf(`
mode: nodelocal
dns: {listen: ["127.0.0.1:0"]}
http: {listen: "127.0.0.1:0"}
forward: {upstreams: []}
cluster:
  nodeName: %s
  remote: "127.0.0.1:%d"
  replicas: [%q]
  gossip: fast
`, name, harness.FreePort(t), seedRemote)
	return harness.StartNodeIn(t, name, t.TempDir(), text)
}

// The latency of a cluster name asked through a node-local process,
// cached and not, beside the same question asked of a replica that holds
// the zone and of one that does not (make bench).
func BenchmarkNodeLocal(b *testing.B) {
	a := harness.StartNodeReplica(b, harness.NodeReplicaOptions{Name: "a", RF: 1})
	c := harness.StartNodeReplica(b, harness.NodeReplicaOptions{Name: "b", RF: 1, Seeds: []string{a.GossipAddr()}})
	nl := startNodeLocal(b, "nl", harness.SelfRemote(b, harness.DebugRing(b, a)))
	testutil.Eventually(b, 15*time.Second, func() error {
		if !a.Ready() || !c.Ready() || !nl.Ready() || len(harness.DebugRing(b, a).Members) != 2 || len(harness.DebugRing(b, nl).Members) != 2 {
			return fmt.Errorf("not settled")
		}
		return nil
	})
	const zoneKey = "shop.svc.cluster.local."
	owner, other := a, c
	if !slices.Contains(harness.DebugRing(b, a).Served, zoneKey) {
		owner, other = c, a
	}
	const cached = "cart.shop.svc.cluster.local."
	for _, bc := range []struct {
		name   string
		n      *node.Node
		unique bool
	}{
		{"replica-owner/uncached", owner, true},
		{"replica-other/uncached", other, true},
		{"nodelocal/uncached", nl, true},
		{"replica-owner/repeated", owner, false},
		{"replica-other/repeated", other, false},
		{"nodelocal/cached", nl, false},
	} {
		b.Run(bc.name, func(b *testing.B) {
			addr := bc.n.DNSAddrs()[0]
			i := 0
			for b.Loop() {
				i++
				name, rcode := cached, dns.RcodeSuccess
				if bc.unique {
					name, rcode = fmt.Sprintf("miss%d-%s.shop.svc.cluster.local.", i, strings.ReplaceAll(bc.name, "/", "-")), dns.RcodeNameError
				}
				r, err := testutil.Exchange(addr, "udp", name, dns.TypeA)
				if err != nil || r.Rcode != rcode {
					b.Fatalf("%s: %v %v", name, r, err)
				}
			}
		})
	}
}
