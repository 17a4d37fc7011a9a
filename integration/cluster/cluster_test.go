package cluster

import (
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"testing"
	"time"

	"github.com/miekg/dns"

	"github.com/shardns/shardns/httpapi"
	"github.com/shardns/shardns/integration/harness"
	"github.com/shardns/shardns/internal/testutil"
	"github.com/shardns/shardns/node"
)

// The multi-replica tests run replicas in one process: the race detector
// is off in this tier because protoactor-go's remote sets grpc's global
// logger on every start.

var clusterQuestions = []harness.AnswerCase{
	{Name: "frontend.shop.svc.cluster.local.", Qtype: dns.TypeA,
		Answer: []string{"frontend.shop.svc.cluster.local. 5 IN A 10.96.10.10"}},
	{Name: "redis.data.svc.cluster.local.", Qtype: dns.TypeA,
		Answer: []string{"redis.data.svc.cluster.local. 5 IN A 10.96.20.10"}},
	{Name: "postgres-0.postgres.data.svc.cluster.local.", Qtype: dns.TypeA,
		Answer: []string{"postgres-0.postgres.data.svc.cluster.local. 5 IN A 10.244.3.20"}},
	{Name: "10.10.96.10.in-addr.arpa.", Qtype: dns.TypePTR,
		Answer: []string{"10.10.96.10.in-addr.arpa. 5 IN PTR frontend.shop.svc.cluster.local."}},
	{Name: "nope.shop.svc.cluster.local.", Qtype: dns.TypeA, Rcode: dns.RcodeNameError},
	{Name: "kubernetes.default.svc.cluster.local.", Qtype: dns.TypeA,
		Answer: []string{"kubernetes.default.svc.cluster.local. 5 IN A 10.96.0.1"}},
}

// Three replicas with replicationFactor 1: each zone lives on exactly one
// of them, and every replica answers every name the same.
func TestClusterShardsAndAnswersEverywhere(t *testing.T) {
	a := harness.StartNodeReplica(t, harness.NodeReplicaOptions{Name: "a", RF: 1})
	b := harness.StartNodeReplica(t, harness.NodeReplicaOptions{Name: "b", RF: 1, Seeds: []string{a.GossipAddr()}})
	c := harness.StartNodeReplica(t, harness.NodeReplicaOptions{Name: "c", RF: 1, Seeds: []string{a.GossipAddr()}})
	nodes := []*node.Node{a, b, c}
	testutil.Eventually(t, 15*time.Second, func() error {
		for _, n := range nodes {
			if !n.Ready() {
				return fmt.Errorf("%s not ready", harness.DebugRing(t, n).Self)
			}
			if r := harness.DebugRing(t, n); len(r.Members) != 3 {
				return fmt.Errorf("%s sees %d members", r.Self, len(r.Members))
			}
		}
		return nil
	})
	// Each zone is served by exactly one replica, and all zones are served.
	testutil.Eventually(t, 10*time.Second, func() error {
		servedBy := map[string][]string{}
		all := map[string]bool{}
		for _, n := range nodes {
			r := harness.DebugRing(t, n)
			for _, z := range r.Served {
				servedBy[z] = append(servedBy[z], r.Self)
			}
			for z := range r.Zones {
				all[z] = true
			}
		}
		for z := range all {
			if len(servedBy[z]) != 1 {
				return fmt.Errorf("zone %s served by %v, want exactly one replica", z, servedBy[z])
			}
		}
		if len(all) < 5 {
			return fmt.Errorf("only %d zones known", len(all))
		}
		return nil
	})
	for _, n := range nodes {
		for _, proto := range []string{"udp", "tcp"} {
			for _, c := range clusterQuestions {
				harness.CheckAnswer(t, n.DNSAddrs()[0], proto, c)
			}
		}
	}
	// Records held: every replica holds some, none holds them all.
	held := make([]float64, len(nodes))
	total := 0.0
	for i, n := range nodes {
		held[i] = harness.Scrape(t, n.HTTPAddr(), "shardns_records_held")
		total += held[i]
	}
	for i := range nodes {
		if held[i] <= 0 || held[i] >= total {
			t.Fatalf("records held per replica %v: want each a share of the whole", held)
		}
	}
}

// With replicationFactor 2, stopping a replica loses no answer: the
// others own its zones at once or answer for them.
func TestClusterSurvivesALostReplica(t *testing.T) {
	a := harness.StartNodeReplica(t, harness.NodeReplicaOptions{Name: "a", RF: 2})
	b := harness.StartNodeReplica(t, harness.NodeReplicaOptions{Name: "b", RF: 2, Seeds: []string{a.GossipAddr()}})
	c := harness.StartNodeReplica(t, harness.NodeReplicaOptions{Name: "c", RF: 2, Seeds: []string{a.GossipAddr()}})
	testutil.Eventually(t, 15*time.Second, func() error {
		for _, n := range []*node.Node{a, b, c} {
			if !n.Ready() || len(harness.DebugRing(t, n).Members) != 3 {
				return fmt.Errorf("%s not settled", harness.DebugRing(t, n).Self)
			}
		}
		return nil
	})
	c.Stop(0)
	for _, n := range []*node.Node{a, b} {
		testutil.Eventually(t, 10*time.Second, func() error {
			if m := harness.DebugRing(t, n).Members; len(m) != 2 || slices.ContainsFunc(m, func(x httpapi.Member) bool { return x.Name == "c" }) {
				return fmt.Errorf("still sees %v", m)
			}
			return nil
		})
		for _, q := range clusterQuestions {
			harness.CheckAnswer(t, n.DNSAddrs()[0], "udp", q)
		}
	}
}

// The added latency of asking another replica: the same kind of question
// (an NXDOMAIN, different each time so no cache answers it) asked of the
// replica that holds the zone and of one that does not; "key" runs the
// replicas with a gossip key, so the remote port speaks TLS.
func BenchmarkClusterDispatch(b *testing.B) {
	keyFile := filepath.Join(b.TempDir(), "gossip.key")
	if err := os.WriteFile(keyFile, []byte("MDEyMzQ1Njc4OWFiY2RlZjAxMjM0NTY3ODlhYmNkZWY=\n"), 0o600); err != nil {
		b.Fatal(err)
	}
	for _, setup := range []struct{ name, cluster string }{
		{"plain", ""},
		{"key", "  secretKeyFile: " + keyFile},
	} {
		a := harness.StartNodeReplica(b, harness.NodeReplicaOptions{Name: "a", RF: 1, Cluster: setup.cluster})
		c := harness.StartNodeReplica(b, harness.NodeReplicaOptions{Name: "b", RF: 1, Seeds: []string{a.GossipAddr()}, Cluster: setup.cluster})
		testutil.Eventually(b, 15*time.Second, func() error {
			if !a.Ready() || !c.Ready() || len(harness.DebugRing(b, a).Members) != 2 || len(harness.DebugRing(b, c).Members) != 2 {
				return fmt.Errorf("not settled")
			}
			return nil
		})
		const zoneKey = "shop.svc.cluster.local."
		local, remote := a, c
		if !slices.Contains(harness.DebugRing(b, a).Served, zoneKey) {
			local, remote = c, a
		}
		for _, bc := range []struct {
			name string
			n    *node.Node
		}{{"local", local}, {"remote", remote}} {
			b.Run(setup.name+"/"+bc.name, func(b *testing.B) {
				addr := bc.n.DNSAddrs()[0]
				i := 0
				for b.Loop() {
					i++
					r, err := testutil.Exchange(addr, "udp", fmt.Sprintf("miss%d-%s.shop.svc.cluster.local.", i, bc.name), dns.TypeA)
					if err != nil || r.Rcode != dns.RcodeNameError {
						b.Fatalf("%v %v", r, err)
					}
				}
			})
		}
	}
}
