package harness

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/miekg/dns"
	"github.com/shardns/shardns/config"
	"github.com/shardns/shardns/deploy/local"
	"github.com/shardns/shardns/httpapi"
	"github.com/shardns/shardns/integration/kubeapi"
	"github.com/shardns/shardns/internal/testutil"
	"github.com/shardns/shardns/node"
)

// NodeReplicaOptions say how StartNodeReplica runs a replica in the
// test's own process.
type NodeReplicaOptions struct {
	Name  string   // cluster.nodeName, and the prefix of its log lines
	RF    int      // cluster.replicationFactor
	Seeds []string // gossip addresses it joins; none starts a cluster
	// Cluster ends the cluster section: keys indented by two spaces.
	Cluster string
	// Extra ends the configuration: top-level YAML keys.
	Extra string
}

// StartNodeReplica starts, in the test's process, one replica of a
// cluster serving the demo cluster (fast gossip, a 3 s handoff grace),
// and stops it when the test ends.
func StartNodeReplica(t testing.TB, o NodeReplicaOptions) *node.Node {
	t.Helper()
	name, rf, seeds := o.Name, o.RF, o.Seeds
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
%s`, name, FreePort(t), strings.Join(quoted, ", "), rf, o.Cluster, o.Extra)
	return StartNodeIn(t, name, dir, text)
}

// StartNodeIn writes text as dir/shardns.yaml, starts an in-Process node
// from it (logging warnings under name) and stops it when the test ends.
func StartNodeIn(t testing.TB, name, dir, text string) *node.Node {
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

// Write logs p under the node's name.
func (w testLog) Write(p []byte) (int, error) {
	w.t.Log(w.name + ": " + strings.TrimSpace(string(p)))
	return len(p), nil
}

// DebugRing is the ring an in-Process node serves on /debug/ring.
func DebugRing(t testing.TB, n *node.Node) httpapi.Ring {
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

// KubeNode is a shardns node watching a real kube-apiserver.
type KubeNode struct {
	*node.Node
	Addr string
}

// StartKubeNode starts shardns in-Process against cp, with extra keys in
// its kubernetes block, and waits until it is ready unless wait is false.
func StartKubeNode(t testing.TB, cp *kubeapi.ControlPlane, kubeKeys string, wait bool) *KubeNode {
	t.Helper()
	if kubeKeys != "" {
		kubeKeys = ", " + kubeKeys
	}
	return StartNodeYAML(t, fmt.Sprintf(`
dns: {listen: ["127.0.0.1:0"]}
http: {listen: "127.0.0.1:0"}
kubernetes: {enabled: true, kubeconfig: %q%s}
cluster: {replicationFactor: 0}
forward: {upstreams: []}
`, cp.Kubeconfig, kubeKeys), wait)
}

// StartNodeYAML starts shardns in-Process with the configuration text,
// and waits until it is ready unless wait is false.
func StartNodeYAML(t testing.TB, text string, wait bool) *KubeNode {
	t.Helper()
	path := filepath.Join(t.TempDir(), "shardns.yaml")
	if err := os.WriteFile(path, []byte(text), 0o644); err != nil {
		t.Fatal(err)
	}
	cfg, err := config.Load(path)
	if err != nil {
		t.Fatal(err)
	}
	n, err := node.New(cfg, Logger(t))
	if err != nil {
		t.Fatal(err)
	}
	if err := n.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { n.Stop(0) })
	if wait {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		if err := n.WaitReady(ctx); err != nil {
			t.Fatalf("node not ready: %v", err)
		}
	}
	return &KubeNode{Node: n, Addr: n.DNSAddrs()[0]}
}

// Logger logs warnings and errors into the test's log.
func Logger(t testing.TB) *slog.Logger {
	return slog.New(slog.NewTextHandler(testWriter{t}, &slog.HandlerOptions{Level: slog.LevelWarn}))
}

// testWriter sends logs to the test's log, shown when it fails.
type testWriter struct{ t testing.TB }

// Write logs p as one line.
func (w testWriter) Write(p []byte) (int, error) {
	w.t.Log(strings.TrimSpace(string(p)))
	return len(p), nil
}

// answers checks one question over UDP and TCP.
func (n *KubeNode) Answers(name string, qtype uint16, rcode int, want ...string) error {
	slices.Sort(want)
	for _, proto := range []string{"udp", "tcp"} {
		r, err := testutil.Exchange(n.Addr, proto, dns.Fqdn(name), qtype)
		if err != nil {
			return err
		}
		if r.Rcode != rcode {
			return fmt.Errorf("%s %s over %s: rcode %s, want %s", name, dns.TypeToString[qtype], proto,
				dns.RcodeToString[r.Rcode], dns.RcodeToString[rcode])
		}
		if got := RDataValues(r.Answer); !slices.Equal(got, want) && !(len(got) == 0 && len(want) == 0) {
			return fmt.Errorf("%s %s over %s: %q, want %q", name, dns.TypeToString[qtype], proto, got, want)
		}
		negative := rcode == dns.RcodeNameError || (rcode == dns.RcodeSuccess && len(want) == 0)
		if negative && (len(r.Ns) != 1 || r.Ns[0].Header().Rrtype != dns.TypeSOA) {
			return fmt.Errorf("%s %s over %s: negative answer without SOA: %v", name, dns.TypeToString[qtype], proto, r.Ns)
		}
	}
	return nil
}

// eventually waits up to 10 s for an answer.
func (n *KubeNode) Eventually(t testing.TB, name string, qtype uint16, rcode int, want ...string) {
	t.Helper()
	testutil.Eventually(t, 10*time.Second, func() error { return n.Answers(name, qtype, rcode, want...) })
}

// DiscardLog is a logger that drops everything, for components a test
// runs without wanting their logs.
var DiscardLog = slog.New(slog.NewTextHandler(io.Discard, nil))
