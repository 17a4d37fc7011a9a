package bench

import (
	"encoding/json"
	"fmt"
	mrand "math/rand/v2"
	"os"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/shardns/shardns/actors/dispatch"
	"github.com/shardns/shardns/integration/harness"
	"github.com/shardns/shardns/integration/kubeapi"
)

// TestNodeTierScale is part of `make bench`: what the replicas spend on
// the node-local tier. Three keyed replicas (replicationFactor 1, default
// gossip timing) on a real apiserver with 100 namespaces of 20 services ×
// 10 endpoints; one process simulates SHARDNS_NODES node-local caches
// (nodetier_sim_test.go: each its own actor remote on its own loopback
// address behind the node-local credential, the ring asked every second,
// ten names of five namespaces asked by its clients every second and of
// the owners when the cached answer's TTL ran out or an owner said it
// changed), while 100 EndpointSlice updates a second go through the API
// (SHARDNS_NODE_CHURN). For each node count, with invalidations asked for
// and without, over a window of SHARDNS_NODE_WINDOW (30s): the replicas'
// CPU-seconds a second and RSS, and per 1,000 nodes beyond the run with
// none; the ring requests and questions they answered a second; the
// invalidations a node received a second and the time from a change sent
// to the API to a node told of it (p50, p99); the hit rate of the
// simulated caches, and of a real node-local process asked the names of
// one simulated node at the same rate (nodetier_probe_test.go; with
// SHARDNS_NODE_BASELINE_BIN, a second one running that binary). The rows
// go to SHARDNS_NODE_TIER_OUT (bench-node-tier.tsv) for
// `go run ./scripts/nodetiercurve < bench-node-tier.tsv > docs/node-tier-scale.svg`.
func TestNodeTierScale(t *testing.T) {
	cp, client := harness.BenchControlPlane(t)
	counts := envInts(t, "SHARDNS_NODES", []int{0, 500, 1000, 1500, 2000})
	window := envDuration(t, "SHARDNS_NODE_WINDOW", 30*time.Second)
	rate := envInts(t, "SHARDNS_NODE_CHURN", []int{100})[0]
	const namespaces, services, endpoints = 100, 2000, 10
	harness.GenerateCluster(t, client, namespaces, services, endpoints)

	key := harness.NodeLocalCredential(t)
	// ttl is kubernetes.ttl's default, for answers without records.
	cfg := &simConfig{cred: key.Credential, rf: 1, probe: time.Second, ttl: 5 * time.Second,
		timeout: 2 * time.Second, counters: newSimCounters()}
	b := &nodeTierBench{t: t, cfg: cfg, rs: startKeyedReplicas(t, cp, 3, key.KeyFile)}
	for _, r := range b.rs {
		cfg.replicas = append(cfg.replicas, harness.RemoteOf(t, r))
	}
	harness.ServedBy(t, b.rs, fmt.Sprintf("svc%d.bench%d.svc.cluster.local.", services-1, (services-1)%namespaces))
	b.probes = startNodeTierProbes(t, cfg.replicas, key.CredFile, simNames(0, namespaces, services), cfg.probe)
	cfg.invalidations.Store(true)
	b.churn = startNodeChurn(t, client, cfg, namespaces, services, rate)
	defer b.churn.stop()
	var nodes []*simNode
	defer func() { closeSimNodes(nodes) }()
	var rows []nodeTierRow
	for _, n := range counts {
		nodes = growSimNodes(t, cfg, nodes, n, namespaces, services)
		time.Sleep(15 * time.Second) // the new nodes connect and ask their first questions
		rows = append(rows, b.measure(n, window))
		if n == 0 {
			continue // no node asks anything: one row
		}
		// The other way, the next node count starting as this one ends.
		inv := !cfg.invalidations.Load()
		cfg.invalidations.Store(inv)
		time.Sleep(switchSettle(cfg, inv))
		rows = append(rows, b.measure(n, window))
	}
	perThousand(rows)
	writeNodeTier(t, rows)
}

// startNodeTierProbes starts a real node-local process (and one of
// SHARDNS_NODE_BASELINE_BIN) whose clients ask names every interval
// until the test ends.
func startNodeTierProbes(t *testing.T, replicas []string, credFile string, names []simName, every time.Duration) []*nodeLocalProbe {
	t.Helper()
	probes := []*nodeLocalProbe{startNodeLocalProbe(t, harness.Bin, "current", replicas, credFile)}
	if bin := os.Getenv("SHARDNS_NODE_BASELINE_BIN"); bin != "" {
		probes = append(probes, startNodeLocalProbe(t, bin, "baseline", replicas, credFile))
	}
	quit := make(chan struct{})
	asking := askProbes(probes, names, every, quit)
	t.Cleanup(func() { close(quit); asking.Wait() })
	return probes
}

// switchSettle is how long after the nodes' questions start or stop
// asking for invalidations the owners' record of their interest is what
// the questions say: when they start, every cached answer has expired
// and been asked for again; when they stop, the interest the owners
// noted has lived its life (dispatch.MinInterestLife, swept every
// quarter of it).
func switchSettle(cfg *simConfig, inv bool) time.Duration {
	if inv {
		return cfg.ttl + 5*time.Second
	}
	return dispatch.MinInterestLife*5/4 + 5*time.Second
}

// startKeyedReplicas starts n replicas (replicationFactor 1) with the
// replica key in keyFile, gossiping with the default timing, as deployed.
func startKeyedReplicas(t *testing.T, cp *kubeapi.ControlPlane, n int, keyFile string) []*harness.Replica {
	t.Helper()
	var rs []*harness.Replica
	for i := range n {
		var seeds []string
		if i > 0 {
			seeds = []string{rs[0].Gossip}
		}
		rs = append(rs, harness.StartReplica(t, cp, harness.ReplicaOptions{Name: fmt.Sprintf("r%d", i), Seeds: seeds, RF: 1, Cluster: "gossip: lan\n  secretKeyFile: " + keyFile}))
	}
	harness.Settled(t, rs, n)
	handedOver(t, rs)
	return rs
}

// growSimNodes starts simulated nodes until there are n, 100 a second
// (the replicas bound the TLS handshakes in progress).
func growSimNodes(t *testing.T, cfg *simConfig, nodes []*simNode, n, namespaces, services int) []*simNode {
	t.Helper()
	pace := time.NewTicker(10 * time.Millisecond)
	defer pace.Stop()
	for len(nodes) < n {
		<-pace.C
		i := len(nodes)
		node, err := startSimNode(cfg, simIP(i), simNames(i, namespaces, services))
		if err != nil {
			t.Fatalf("simulated node %d: %v", i, err)
		}
		nodes = append(nodes, node)
	}
	return nodes
}

func closeSimNodes(nodes []*simNode) {
	var wg sync.WaitGroup
	sem := make(chan struct{}, 64)
	for _, n := range nodes {
		sem <- struct{}{}
		wg.Go(func() {
			defer func() { <-sem }()
			n.close()
		})
	}
	wg.Wait()
}

// nodeChurn updates EndpointSlices through the API at a fixed rate.
type nodeChurn struct {
	done, failed atomic.Int64
	quit         chan struct{}
	wg           sync.WaitGroup
}

// startNodeChurn updates rate EndpointSlices a second, each time a
// random service's first endpoint to a new address, noting in cfg when
// each service's change was sent.
func startNodeChurn(t *testing.T, client kubernetes.Interface, cfg *simConfig, namespaces, services, rate int) *nodeChurn {
	c := &nodeChurn{quit: make(chan struct{})}
	work := make(chan int, rate)
	for range 32 { // a slow patch holds a worker, not the rate
		c.wg.Go(func() {
			for n := range work {
				i := mrand.IntN(services)
				ns, name, _ := harness.BenchService(i, namespaces)
				patch, _ := json.Marshal([]map[string]any{{"op": "replace", "path": "/endpoints/0/addresses/0",
					"value": fmt.Sprintf("10.%d.%d.%d", 220+n%30, (n/250)%250, n%250+1)}})
				cfg.patched.Store(ns+".svc.cluster.local./"+name, time.Now())
				_, err := client.DiscoveryV1().EndpointSlices(ns).Patch(ctx, name+"-1", types.JSONPatchType, patch, metav1.PatchOptions{})
				if err != nil {
					c.failed.Add(1)
					continue
				}
				c.done.Add(1)
			}
		})
	}
	c.wg.Go(func() {
		defer close(work)
		tick := time.NewTicker(time.Second / time.Duration(rate))
		defer tick.Stop()
		for n := 0; ; n++ {
			select {
			case <-c.quit:
				return
			case <-tick.C:
			}
			select {
			case work <- n:
			default: // the API is behind: the rate measured says so
			}
		}
	})
	return c
}

func (c *nodeChurn) stop() {
	close(c.quit)
	c.wg.Wait()
}
