package integration

import (
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/miekg/dns"

	"github.com/shardns/shardns/config"
	"github.com/shardns/shardns/deploy/local"
	"github.com/shardns/shardns/httpapi"
	"github.com/shardns/shardns/internal/testutil"
	"github.com/shardns/shardns/node"
)

// The multi-replica tests run replicas in one process: the race detector
// is off in this tier because protoactor-go's remote sets grpc's global
// logger on every start.

func freeTCPPort(t testing.TB) int {
	t.Helper()
	return freePort(t)
}

// startReplica starts one replica of a cluster serving the demo cluster.
func startReplica(t testing.TB, name string, rf int, seeds []string) *node.Node {
	t.Helper()
	return startReplicaWith(t, name, rf, seeds, "")
}

// startReplicaWith starts a replica whose configuration ends with extra
// (top-level YAML keys).
func startReplicaWith(t testing.TB, name string, rf int, seeds []string, extra string) *node.Node {
	t.Helper()
	return startReplicaCluster(t, name, rf, seeds, "", extra)
}

// startReplicaCluster starts a replica whose cluster section ends with
// clusterExtra (keys indented by two spaces) and whose configuration ends
// with extra.
func startReplicaCluster(t testing.TB, name string, rf int, seeds []string, clusterExtra, extra string) *node.Node {
	t.Helper()
	dir := t.TempDir()
	demo, _ := local.Files.ReadFile("demo-cluster.yaml")
	os.WriteFile(filepath.Join(dir, "demo-cluster.yaml"), demo, 0o644)
	quoted := make([]string, len(seeds))
	for i, s := range seeds {
		quoted[i] = fmt.Sprintf("%q", s)
	}
	text := fmt.Sprintf(`
dns: {listen: ["127.0.0.1:0"]}
http: {listen: "127.0.0.1:0"}
kubernetes: {enabled: false}
manifests: {files: [demo-cluster.yaml]}
forward: {upstreams: []}
cluster:
  enabled: true
  nodeName: %s
  bind: "127.0.0.1:0"
  remote: "127.0.0.1:%d"
  join: [%s]
  replicationFactor: %d
  gossip: fast
  handoffGrace: 3s
%s
%s`, name, freeTCPPort(t), strings.Join(quoted, ", "), rf, clusterExtra, extra)
	return startNodeIn(t, name, dir, text)
}

// startNodeIn writes text as dir/shardns.yaml, starts an in-process node
// from it (logging warnings under name) and stops it when the test ends.
func startNodeIn(t testing.TB, name, dir, text string) *node.Node {
	t.Helper()
	path := filepath.Join(dir, "shardns.yaml")
	os.WriteFile(path, []byte(text), 0o644)
	cfg, err := config.Load(path)
	if err != nil {
		t.Fatal(err)
	}
	n, err := node.New(cfg, slog.New(slog.NewTextHandler(testLog{t, name}, &slog.HandlerOptions{Level: slog.LevelWarn})))
	if err != nil {
		t.Fatal(err)
	}
	if err := n.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { n.Stop(0) })
	return n
}

type testLog struct {
	t    testing.TB
	name string
}

func (w testLog) Write(p []byte) (int, error) {
	w.t.Log(w.name + ": " + strings.TrimSpace(string(p)))
	return len(p), nil
}

func debugRing(t testing.TB, n *node.Node) httpapi.Ring {
	t.Helper()
	resp, err := http.Get("http://" + n.HTTPAddr() + "/debug/ring")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var r httpapi.Ring
	if err := json.NewDecoder(resp.Body).Decode(&r); err != nil {
		t.Fatal(err)
	}
	return r
}

type answerCase struct {
	qname  string
	qtype  uint16
	rcode  int
	answer []string
}

func checkAnswer(t *testing.T, addr, proto string, c answerCase) {
	t.Helper()
	want := make([]dns.RR, len(c.answer))
	for i, s := range c.answer {
		rr, err := dns.NewRR(s)
		if err != nil {
			t.Fatal(err)
		}
		want[i] = rr
	}
	// A client retries once, as resolvers do.
	var last error
	for attempt := 0; attempt < 2; attempt++ {
		if last = exchangeMatches(addr, proto, c, want); last == nil {
			return
		}
	}
	t.Fatal(last)
}

func exchangeMatches(addr, proto string, c answerCase, want []dns.RR) error {
	{
		r, err := testutil.Exchange(addr, proto, c.qname, c.qtype)
		if err != nil {
			return err
		}
		if r.Rcode != c.rcode {
			return fmt.Errorf("%s over %s: rcode %s, want %s", c.qname, proto, dns.RcodeToString[r.Rcode], dns.RcodeToString[c.rcode])
		}
		if got, exp := testutil.Records(r.Answer), testutil.Records(want); !slices.Equal(got, exp) {
			return fmt.Errorf("%s over %s: %v, want %v", c.qname, proto, got, exp)
		}
		return nil
	}
}

var clusterQuestions = []answerCase{
	{qname: "frontend.shop.svc.cluster.local.", qtype: dns.TypeA,
		answer: []string{"frontend.shop.svc.cluster.local. 5 IN A 10.96.10.10"}},
	{qname: "redis.data.svc.cluster.local.", qtype: dns.TypeA,
		answer: []string{"redis.data.svc.cluster.local. 5 IN A 10.96.20.10"}},
	{qname: "postgres-0.postgres.data.svc.cluster.local.", qtype: dns.TypeA,
		answer: []string{"postgres-0.postgres.data.svc.cluster.local. 5 IN A 10.244.3.20"}},
	{qname: "10.10.96.10.in-addr.arpa.", qtype: dns.TypePTR,
		answer: []string{"10.10.96.10.in-addr.arpa. 5 IN PTR frontend.shop.svc.cluster.local."}},
	{qname: "nope.shop.svc.cluster.local.", qtype: dns.TypeA, rcode: dns.RcodeNameError},
	{qname: "kubernetes.default.svc.cluster.local.", qtype: dns.TypeA,
		answer: []string{"kubernetes.default.svc.cluster.local. 5 IN A 10.96.0.1"}},
}

// Three replicas with replicationFactor 1: each zone lives on exactly one
// of them, and every replica answers every name the same.
func TestClusterShardsAndAnswersEverywhere(t *testing.T) {
	a := startReplica(t, "a", 1, nil)
	b := startReplica(t, "b", 1, []string{a.GossipAddr()})
	c := startReplica(t, "c", 1, []string{a.GossipAddr()})
	nodes := []*node.Node{a, b, c}
	testutil.Eventually(t, 15*time.Second, func() error {
		for _, n := range nodes {
			if !n.Ready() {
				return fmt.Errorf("%s not ready", debugRing(t, n).Self)
			}
			if r := debugRing(t, n); len(r.Members) != 3 {
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
			r := debugRing(t, n)
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
				checkAnswer(t, n.DNSAddrs()[0], proto, c)
			}
		}
	}
	// Records held: every replica holds some, none holds them all.
	held := make([]float64, len(nodes))
	total := 0.0
	for i, n := range nodes {
		held[i] = scrape(t, n.HTTPAddr(), "shardns_records_held")
		total += held[i]
	}
	for i := range nodes {
		if held[i] <= 0 || held[i] >= total {
			t.Fatalf("records held per replica %v: want each a share of the whole", held)
		}
	}
}

// samples reads /metrics: every sample, keyed by its name and labels as
// Prometheus prints them (`name{a="b"}`).
func samples(t testing.TB, addr string) map[string]float64 {
	t.Helper()
	resp, err := http.Get("http://" + addr + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	out := map[string]float64{}
	for _, line := range strings.Split(string(body), "\n") {
		if line == "" || line[0] == '#' {
			continue
		}
		i := strings.LastIndexByte(line, ' ')
		f, err := strconv.ParseFloat(line[i+1:], 64)
		if err != nil {
			t.Fatalf("%s: %v", line, err)
		}
		out[line[:i]] = f
	}
	return out
}

// scrape reads one sample from /metrics, which must be there.
func scrape(t testing.TB, addr, sample string) float64 {
	t.Helper()
	v, ok := samples(t, addr)[sample]
	if !ok {
		t.Fatalf("no %s in /metrics", sample)
	}
	return v
}

// scrapeLabelled sums the series of metric whose labels contain label; 0
// when there is none yet.
func scrapeLabelled(t testing.TB, addr, metric, label string) float64 {
	t.Helper()
	sum := 0.0
	for k, v := range samples(t, addr) {
		if strings.HasPrefix(k, metric+"{") && strings.Contains(k, label) {
			sum += v
		}
	}
	return sum
}

// With replicationFactor 2, stopping a replica loses no answer: the
// others own its zones at once or answer for them.
func TestClusterSurvivesALostReplica(t *testing.T) {
	a := startReplica(t, "a", 2, nil)
	b := startReplica(t, "b", 2, []string{a.GossipAddr()})
	c := startReplica(t, "c", 2, []string{a.GossipAddr()})
	testutil.Eventually(t, 15*time.Second, func() error {
		for _, n := range []*node.Node{a, b, c} {
			if !n.Ready() || len(debugRing(t, n).Members) != 3 {
				return fmt.Errorf("%s not settled", debugRing(t, n).Self)
			}
		}
		return nil
	})
	c.Stop(0)
	for _, n := range []*node.Node{a, b} {
		testutil.Eventually(t, 10*time.Second, func() error {
			if m := debugRing(t, n).Members; len(m) != 2 || slices.ContainsFunc(m, func(x httpapi.Member) bool { return x.Name == "c" }) {
				return fmt.Errorf("still sees %v", m)
			}
			return nil
		})
		for _, q := range clusterQuestions {
			checkAnswer(t, n.DNSAddrs()[0], "udp", q)
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
		a := startReplicaCluster(b, "a", 1, nil, setup.cluster, "")
		c := startReplicaCluster(b, "b", 1, []string{a.GossipAddr()}, setup.cluster, "")
		testutil.Eventually(b, 15*time.Second, func() error {
			if !a.Ready() || !c.Ready() || len(debugRing(b, a).Members) != 2 || len(debugRing(b, c).Members) != 2 {
				return fmt.Errorf("not settled")
			}
			return nil
		})
		const zoneKey = "shop.svc.cluster.local."
		local, remote := a, c
		if !slices.Contains(debugRing(b, a).Served, zoneKey) {
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
