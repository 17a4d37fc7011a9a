package functional

import (
	"fmt"
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/miekg/dns"

	"github.com/shardns/shardns/config"
	"github.com/shardns/shardns/integration/harness"
	"github.com/shardns/shardns/internal/testutil"
	"github.com/shardns/shardns/node"
)

// startForwardingNode serves the demo cluster and forwards everything else
// to upstreams, with extra keys for the forward and cache blocks.
func startForwardingNode(t *testing.T, upstreams []string, forwardKeys, cacheKeys string) *node.Node {
	t.Helper()
	demo, err := os.ReadFile("../../deploy/local/demo-cluster.yaml")
	if err != nil {
		t.Fatal(err)
	}
	manifest := filepath.Join(t.TempDir(), "demo-cluster.yaml")
	os.WriteFile(manifest, demo, 0o644)
	quoted := make([]string, len(upstreams))
	for i, u := range upstreams {
		quoted[i] = fmt.Sprintf("%q", u)
	}
	return harness.StartNodeYAML(t, fmt.Sprintf(`
dns: {listen: ["127.0.0.1:0"]}
http: {listen: ""}
kubernetes: {enabled: false}
manifests: {files: [%q]}
forward: {upstreams: [%s]%s}
cache: {%s}
`, manifest, strings.Join(quoted, ", "), prefixComma(forwardKeys), cacheKeys), true).Node
}

func prefixComma(s string) string {
	if s == "" {
		return ""
	}
	return ", " + s
}

func TestForwardToUnbound(t *testing.T) {
	var big []string
	for i := range 60 {
		big = append(big, fmt.Sprintf("big.example.test. 300 IN A 198.51.100.%d", i+1))
	}
	u := harness.StartUnbound(t, append(big,
		"www.example.test. 300 IN A 192.0.2.1",
		"1.2.0.192.in-addr.arpa. 300 IN PTR www.example.test.")...)
	n := startForwardingNode(t, []string{u.Addr}, "", "")
	addr := n.DNSAddrs()[0]

	for _, proto := range []string{"udp", "tcp"} {
		// Unbound answers its local data authoritatively, and the
		// forwarded answer keeps the AA bit, as CoreDNS's does.
		r := harness.Ask(t, addr, proto, "www.example.test.", dns.TypeA)
		if r.Rcode != dns.RcodeSuccess || len(r.Answer) != 1 || r.Answer[0].(*dns.A).A.String() != "192.0.2.1" || !r.Authoritative {
			t.Fatalf("%s: forwarded answer %v", proto, r)
		}
		r = harness.Ask(t, addr, proto, "missing.example.test.", dns.TypeA)
		if r.Rcode != dns.RcodeNameError || len(r.Ns) != 1 {
			t.Fatalf("%s: upstream NXDOMAIN came back as %v", proto, r)
		}
	}
	// Cluster names are never forwarded, even when upstream has them.
	if r := harness.Ask(t, addr, "udp", "nope.shop.svc.cluster.local.", dns.TypeA); r.Rcode != dns.RcodeNameError || !r.Authoritative {
		t.Fatalf("cluster name forwarded: %v", r)
	}
	// Reverse names fall through to upstream when the cluster has none.
	if r := harness.Ask(t, addr, "udp", "1.2.0.192.in-addr.arpa.", dns.TypePTR); r.Rcode != dns.RcodeSuccess || len(r.Answer) != 1 {
		t.Fatalf("fallthrough PTR: %v", r)
	}
	if r := harness.Ask(t, addr, "udp", "10.10.96.10.in-addr.arpa.", dns.TypePTR); len(r.Answer) != 1 ||
		r.Answer[0].(*dns.PTR).Ptr != "frontend.shop.svc.cluster.local." {
		t.Fatalf("cluster PTR: %v", r)
	}
	// Too big for UDP: truncated to the client, complete over TCP (the
	// forwarder itself retried over TCP).
	if r := harness.Ask(t, addr, "udp", "big.example.test.", dns.TypeA); !r.Truncated {
		t.Fatalf("60 A records fit in 512 bytes? %d answers", len(r.Answer))
	}
	if r := harness.Ask(t, addr, "tcp", "big.example.test.", dns.TypeA); r.Truncated || len(r.Answer) != 60 {
		t.Fatalf("over TCP: tc=%v with %d answers, want 60", r.Truncated, len(r.Answer))
	}
}

// Cached answers count their TTL down, keep serving while the upstream is
// down, and stale ones serve past expiry with serveStale.
func TestForwardCacheAndServeStale(t *testing.T) {
	u := harness.StartUnbound(t, "short.example.test. 3 IN A 192.0.2.3", "long.example.test. 300 IN A 192.0.2.4")
	n := startForwardingNode(t, []string{u.Addr}, "timeout: 300ms, deadline: 600ms", "serveStale: 1m, minTTL: 0")
	addr := n.DNSAddrs()[0]
	// Both names cached while the upstream is up. The forwarder's deadline
	// is short for this test, so a loaded machine may need a second try.
	first := map[string]*dns.Msg{}
	for _, name := range []string{"long.example.test.", "short.example.test."} {
		testutil.Eventually(t, 10*time.Second, func() error {
			r := harness.Ask(t, addr, "udp", name, dns.TypeA)
			if r.Rcode != dns.RcodeSuccess || len(r.Answer) != 1 {
				return fmt.Errorf("%s with the upstream up: %v", name, r)
			}
			first[name] = r
			return nil
		})
	}
	if ttl := first["long.example.test."].Answer[0].Header().Ttl; ttl != 30 {
		t.Fatalf("TTL %d, want 30 (capped by cache.maxTTL)", ttl)
	}
	u.Stop()
	if r := harness.Ask(t, addr, "udp", "long.example.test.", dns.TypeA); r.Rcode != dns.RcodeSuccess || len(r.Answer) != 1 {
		t.Fatalf("cached answer with the upstream down: %v", r)
	}
	testutil.Eventually(t, 10*time.Second, func() error {
		r := harness.Ask(t, addr, "udp", "short.example.test.", dns.TypeA)
		if r.Rcode != dns.RcodeSuccess || len(r.Answer) != 1 || r.Answer[0].Header().Ttl != 30 {
			return fmt.Errorf("want the stale answer with TTL 30, got %v", r)
		}
		return nil
	})
	if r := harness.Ask(t, addr, "udp", "never.example.test.", dns.TypeA); r.Rcode != dns.RcodeServerFailure {
		t.Fatalf("uncached name with the upstream down: %s, want SERVFAIL", dns.RcodeToString[r.Rcode])
	}
}

// A dead upstream is skipped once marked down; answers keep coming from
// the live one.
func TestForwardSkipsDeadUpstream(t *testing.T) {
	u := harness.StartUnbound(t, "www.example.test. 300 IN A 192.0.2.1")
	dead := fmt.Sprintf("127.0.0.1:%d", harness.FreeUDPPort(t))
	n := startForwardingNode(t, []string{dead, u.Addr}, "policy: sequential, timeout: 200ms", "enabled: false")
	addr := n.DNSAddrs()[0]
	for i := range 5 {
		r := harness.Ask(t, addr, "udp", "www.example.test.", dns.TypeA)
		if r.Rcode != dns.RcodeSuccess || len(r.Answer) != 1 {
			t.Fatalf("query %d: %v", i, r)
		}
	}
}

// Over the bound on queries in flight, queries are refused at once.
func TestForwardMaxConcurrent(t *testing.T) {
	// An upstream that never answers holds the one slot.
	silent, err := net.ListenPacket("udp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer silent.Close()
	n := startForwardingNode(t, []string{silent.LocalAddr().String()}, "maxConcurrent: 1, timeout: 2s, deadline: 2s", "enabled: false")
	addr := n.DNSAddrs()[0]
	go testutil.Exchange(addr, "udp", "held.example.test.", dns.TypeA)
	// Once the silent upstream has the query, the slot is taken.
	silent.SetReadDeadline(time.Now().Add(5 * time.Second))
	if _, _, err := silent.ReadFrom(make([]byte, 512)); err != nil {
		t.Fatalf("the first query never reached the upstream: %v", err)
	}
	r := harness.Ask(t, addr, "udp", "second.example.test.", dns.TypeA)
	if r.Rcode != dns.RcodeRefused {
		t.Fatalf("rcode %s, want REFUSED", dns.RcodeToString[r.Rcode])
	}
}

func TestForwardLoopRefused(t *testing.T) {
	path := filepath.Join(t.TempDir(), "loop.yaml")
	addr := fmt.Sprintf("127.0.0.1:%d", harness.FreePort(t)) // listened on, and forwarded to
	os.WriteFile(path, []byte(fmt.Sprintf(`
dns: {listen: [%q]}
http: {listen: ""}
kubernetes: {enabled: false}
forward: {upstreams: [%q]}
`, addr, addr)), 0o644)
	cfg, err := config.Load(path)
	if err != nil {
		t.Fatal(err)
	}
	n, err := node.New(cfg, harness.Logger(t))
	if err != nil {
		t.Fatal(err)
	}
	defer n.Stop(0)
	if err := n.Start(); err == nil || !strings.Contains(err.Error(), "loop") {
		t.Fatalf("Start = %v, want a loop error", err)
	}
}
