package node

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/miekg/dns"

	"github.com/shardns/shardns/config"
	"github.com/shardns/shardns/deploy/local"
	"github.com/shardns/shardns/internal/testutil"
)

type testNode struct {
	*Node
	dir  string // holds demo-cluster.yaml, editable
	logs *testutil.SyncBuffer
}

const demoConfig = `
dns: {listen: ["127.0.0.1:0"]}
http: {listen: "127.0.0.1:0"}
kubernetes: {enabled: false}
manifests: {files: [demo-cluster.yaml], interval: 50ms}
cluster: {replicationFactor: 0}
forward: {upstreams: []}
`

// startDemo starts a node on loopback port 0 serving a copy of the demo
// cluster, and stops it when the test ends.
func startDemo(t *testing.T) *testNode {
	t.Helper()
	n, path, logs := startDemoNode(t, demoConfig, false)
	return &testNode{Node: n, dir: filepath.Dir(path), logs: logs}
}

// startDemoNode writes cfgText next to a copy of the demo cluster, starts
// a node from it (watching the file when watch is set), waits until it is
// ready and stops it when the test ends. It returns the config file's path
// and the node's log.
func startDemoNode(t *testing.T, cfgText string, watch bool) (*Node, string, *testutil.SyncBuffer) {
	t.Helper()
	return startDemoNodeFiles(t, cfgText, watch, nil)
}

// startDemoNodeFiles is startDemoNode with more files beside the
// configuration (zone files, hosts files), by name.
func startDemoNodeFiles(t *testing.T, cfgText string, watch bool, files map[string]string) (*Node, string, *testutil.SyncBuffer) {
	t.Helper()
	dir := t.TempDir()
	for name, text := range files {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(text), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	demo, err := local.Files.ReadFile("demo-cluster.yaml")
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "demo-cluster.yaml"), demo, 0o644); err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(dir, "shardns.yaml")
	if err := os.WriteFile(path, []byte(cfgText), 0o644); err != nil {
		t.Fatal(err)
	}
	cfg, err := config.Load(path)
	if err != nil {
		t.Fatal(err)
	}
	var opts []Option
	if watch {
		opts = append(opts, WithConfigFile(path))
	}
	logs := &testutil.SyncBuffer{}
	n, err := New(cfg, slog.New(slog.NewTextHandler(logs, nil)), opts...)
	if err != nil {
		t.Fatal(err)
	}
	if err := n.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { n.Stop(0) })
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if err := n.WaitReady(ctx); err != nil {
		t.Fatal(err)
	}
	return n, path, logs
}

type answerCase struct {
	qname  string
	qtype  uint16
	rcode  int
	answer []string
}

func checkAnswer(t *testing.T, addr, proto string, c answerCase) {
	t.Helper()
	r, err := testutil.Exchange(addr, proto, c.qname, c.qtype)
	if err != nil {
		t.Fatal(err)
	}
	if r.Rcode != c.rcode {
		t.Fatalf("%s %s over %s: rcode %s, want %s", c.qname, dns.TypeToString[c.qtype], proto,
			dns.RcodeToString[r.Rcode], dns.RcodeToString[c.rcode])
	}
	want := make([]dns.RR, len(c.answer))
	for i, s := range c.answer {
		rr, err := dns.NewRR(s)
		if err != nil {
			t.Fatalf("bad expectation %q: %v", s, err)
		}
		want[i] = rr
	}
	got, exp := testutil.Records(r.Answer), testutil.Records(want)
	if strings.Join(got, "\n") != strings.Join(exp, "\n") {
		t.Fatalf("%s %s over %s:\n%s\nwant:\n%s", c.qname, dns.TypeToString[c.qtype], proto,
			strings.Join(got, "\n"), strings.Join(exp, "\n"))
	}
	if c.rcode != dns.RcodeSuccess || len(c.answer) == 0 {
		if len(r.Ns) != 1 || r.Ns[0].Header().Rrtype != dns.TypeSOA {
			t.Fatalf("%s: negative answer without SOA in authority: %v", c.qname, r.Ns)
		}
	}
}

// Every service of the demo cluster answers over UDP and TCP.
func TestDemoClusterOverUDPAndTCP(t *testing.T) {
	n := startDemo(t)
	addr := n.DNSAddrs()[0]
	cases := []answerCase{
		{qname: "frontend.shop.svc.cluster.local.", qtype: dns.TypeA,
			answer: []string{"frontend.shop.svc.cluster.local. 5 IN A 10.96.10.10"}},
		{qname: "redis.data.svc.cluster.local.", qtype: dns.TypeA,
			answer: []string{"redis.data.svc.cluster.local. 5 IN A 10.96.20.10"}},
		{qname: "kubernetes.default.svc.cluster.local.", qtype: dns.TypeA,
			answer: []string{"kubernetes.default.svc.cluster.local. 5 IN A 10.96.0.1"}},
		{qname: "_grpc._tcp.cart.shop.svc.cluster.local.", qtype: dns.TypeSRV,
			answer: []string{"_grpc._tcp.cart.shop.svc.cluster.local. 5 IN SRV 0 100 9090 cart.shop.svc.cluster.local."}},
		{qname: "api.shop.svc.cluster.local.", qtype: dns.TypeA,
			answer: []string{"api.shop.svc.cluster.local. 5 IN A 10.96.10.12"}},
		{qname: "api.shop.svc.cluster.local.", qtype: dns.TypeAAAA,
			answer: []string{"api.shop.svc.cluster.local. 5 IN AAAA fd00:10:96::c"}},
		{qname: "redis.data.svc.cluster.local.", qtype: dns.TypeAAAA},
		{qname: "payments.shop.svc.cluster.local.", qtype: dns.TypeA,
			answer: []string{"payments.shop.svc.cluster.local. 5 IN CNAME payments.example.com."}},
		{qname: "postgres.data.svc.cluster.local.", qtype: dns.TypeA, answer: []string{
			"postgres.data.svc.cluster.local. 5 IN A 10.244.3.20",
			"postgres.data.svc.cluster.local. 5 IN A 10.244.3.21",
		}},
		{qname: "postgres-1.postgres.data.svc.cluster.local.", qtype: dns.TypeA,
			answer: []string{"postgres-1.postgres.data.svc.cluster.local. 5 IN A 10.244.3.21"}},
		{qname: "postgres-2.postgres.data.svc.cluster.local.", qtype: dns.TypeA, rcode: dns.RcodeNameError},
		{qname: "_pg._tcp.postgres.data.svc.cluster.local.", qtype: dns.TypeSRV, answer: []string{
			"_pg._tcp.postgres.data.svc.cluster.local. 5 IN SRV 0 50 5432 postgres-0.postgres.data.svc.cluster.local.",
			"_pg._tcp.postgres.data.svc.cluster.local. 5 IN SRV 0 50 5432 postgres-1.postgres.data.svc.cluster.local.",
		}},
		{qname: "10-244-1-10.frontend.shop.svc.cluster.local.", qtype: dns.TypeA,
			answer: []string{"10-244-1-10.frontend.shop.svc.cluster.local. 5 IN A 10.244.1.10"}},
		{qname: "10.10.96.10.in-addr.arpa.", qtype: dns.TypePTR,
			answer: []string{"10.10.96.10.in-addr.arpa. 5 IN PTR frontend.shop.svc.cluster.local."}},
		{qname: "20.3.244.10.in-addr.arpa.", qtype: dns.TypePTR,
			answer: []string{"20.3.244.10.in-addr.arpa. 5 IN PTR postgres-0.postgres.data.svc.cluster.local."}},
		{qname: "c.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.6.9.0.0.0.1.0.0.0.0.d.f.ip6.arpa.", qtype: dns.TypePTR,
			answer: []string{"c.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.6.9.0.0.0.1.0.0.0.0.d.f.ip6.arpa. 5 IN PTR api.shop.svc.cluster.local."}},
		{qname: "10-244-1-10.shop.pod.cluster.local.", qtype: dns.TypeA,
			answer: []string{"10-244-1-10.shop.pod.cluster.local. 5 IN A 10.244.1.10"}},
		{qname: "dns-version.cluster.local.", qtype: dns.TypeTXT,
			answer: []string{`dns-version.cluster.local. 28800 IN TXT "1.1.0"`}},
		{qname: "shop.svc.cluster.local.", qtype: dns.TypeA},
		{qname: "service1.test.global.", qtype: dns.TypeA,
			answer: []string{"service1.test.global. 30 IN A 127.255.0.2"}},
		{qname: "nope.shop.svc.cluster.local.", qtype: dns.TypeA, rcode: dns.RcodeNameError},
		{qname: "frontend.nons.svc.cluster.local.", qtype: dns.TypeA, rcode: dns.RcodeNameError},
	}
	for _, proto := range []string{"udp", "tcp"} {
		for _, c := range cases {
			t.Run(proto+"/"+c.qname+"/"+dns.TypeToString[c.qtype], func(t *testing.T) {
				checkAnswer(t, addr, proto, c)
			})
		}
	}
}

func TestManifestReload(t *testing.T) {
	n := startDemo(t)
	addr := n.DNSAddrs()[0]
	file := filepath.Join(n.dir, "demo-cluster.yaml")
	orig, _ := os.ReadFile(file)
	added := string(orig) + `
---
apiVersion: v1
kind: Service
metadata: {name: search, namespace: shop}
spec:
  clusterIP: 10.96.10.50
  ports: [{name: http, port: 80}]
`
	if err := os.WriteFile(file, []byte(added), 0o644); err != nil {
		t.Fatal(err)
	}
	testutil.Eventually(t, 5*time.Second, func() error {
		r, err := testutil.Exchange(addr, "udp", "search.shop.svc.cluster.local.", dns.TypeA)
		if err != nil {
			return err
		}
		if r.Rcode != dns.RcodeSuccess || len(r.Answer) != 1 {
			return fmt.Errorf("not served yet: %s", dns.RcodeToString[r.Rcode])
		}
		return nil
	})

	// A broken file keeps the last good state and logs the error.
	broken := added + "\n---\napiVersion: v1\nkind: Service\nmetadata: {name: bad, namespace: shop}\nspec: {clusterIP: not-an-ip}\n"
	if err := os.WriteFile(file, []byte(broken), 0o644); err != nil {
		t.Fatal(err)
	}
	testutil.Eventually(t, 5*time.Second, func() error {
		if !strings.Contains(n.logs.String(), "not-an-ip") {
			return fmt.Errorf("reload error not logged yet")
		}
		return nil
	})
	if !strings.Contains(n.logs.String(), "demo-cluster.yaml") {
		t.Fatalf("reload error does not name the file:\n%s", n.logs.String())
	}
	checkAnswer(t, addr, "udp", answerCase{qname: "search.shop.svc.cluster.local.", qtype: dns.TypeA,
		answer: []string{"search.shop.svc.cluster.local. 5 IN A 10.96.10.50"}})

	// Removing the service again serves NXDOMAIN, and the PTR goes too.
	if err := os.WriteFile(file, orig, 0o644); err != nil {
		t.Fatal(err)
	}
	testutil.Eventually(t, 5*time.Second, func() error {
		r, err := testutil.Exchange(addr, "udp", "50.10.96.10.in-addr.arpa.", dns.TypePTR)
		if err != nil {
			return err
		}
		if r.Rcode != dns.RcodeNameError {
			return fmt.Errorf("PTR still served: %v", r.Answer)
		}
		return nil
	})
	checkAnswer(t, addr, "udp", answerCase{qname: "search.shop.svc.cluster.local.", qtype: dns.TypeA, rcode: dns.RcodeNameError})
}

func TestHTTPEndpoints(t *testing.T) {
	n := startDemo(t)
	base := "http://" + n.HTTPAddr()
	get := func(path string) (int, string) {
		t.Helper()
		resp, err := http.Get(base + path)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		body, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(body)
	}
	if code, _ := get("/health"); code != 200 {
		t.Fatalf("/health = %d", code)
	}
	if code, _ := get("/ready"); code != 200 {
		t.Fatalf("/ready = %d", code)
	}
	if _, err := testutil.Exchange(n.DNSAddrs()[0], "udp", "frontend.shop.svc.cluster.local.", dns.TypeA); err != nil {
		t.Fatal(err)
	}
	_, metrics := get("/metrics")
	for _, want := range []string{
		`shardns_dns_requests_total{family="1",proto="udp"`,
		`shardns_dns_responses_total{plugin="",rcode="NOERROR"`,
		"shardns_build_info",
	} {
		if !strings.Contains(metrics, want) {
			t.Errorf("/metrics lacks %s", want)
		}
	}
	code, ring := get("/debug/ring")
	if code != 200 || !strings.Contains(ring, `"shop.svc.cluster.local."`) {
		t.Fatalf("/debug/ring = %d %s", code, ring)
	}
}

func TestStartErrors(t *testing.T) {
	dir := t.TempDir()
	bad := filepath.Join(dir, "bad.yaml")
	os.WriteFile(bad, []byte("apiVersion: v1\nkind: Service\nmetadata: {name: web, namespace: x}\nspec: {clusterIP: 10.0.0.300}\n"), 0o644)
	err := startError(t, fmt.Sprintf("dns: {listen: [\"127.0.0.1:0\"]}\nhttp: {listen: \"\"}\nkubernetes: {enabled: false}\nmanifests: {files: [%q]}\n", bad))
	if err == nil || !strings.Contains(err.Error(), "bad.yaml") || !strings.Contains(err.Error(), `Service "web"`) {
		t.Fatalf("Start = %v, want an error naming the file and the object", err)
	}
}

// A server with no source at all (hosts only, as a converted forwarder
// Corefile gives) is ready at once and answers from its hosts entries.
func TestReadyWithoutSources(t *testing.T) {
	n, _, _ := startDemoNode(t, `
dns: {listen: ["127.0.0.1:0"]}
http: {listen: "127.0.0.1:0", lameduck: 0s}
kubernetes: {enabled: false}
forward: {upstreams: []}
hosts: {entries: ["192.0.2.7 printer.example."]}
`, false)
	if !n.Ready() {
		t.Fatal("not ready")
	}
	r, err := testutil.Exchange(n.DNSAddrs()[0], "udp", "printer.example.", dns.TypeA)
	if err != nil {
		t.Fatal(err)
	}
	if r.Rcode != dns.RcodeSuccess || len(r.Answer) != 1 || r.Answer[0].(*dns.A).A.String() != "192.0.2.7" {
		t.Fatalf("got %v", r)
	}
}

// An upstream that is one of this server's extra plain DNS listeners
// would forward every name round in a loop, as one on dns.listen would:
// the node refuses to start.
func TestForwardLoopThroughServersRefused(t *testing.T) {
	err := startErrorOnFreePort(t, func(port int) string {
		return fmt.Sprintf(`dns: {listen: ["127.0.0.1:0"]}
http: {listen: ""}
kubernetes: {enabled: false}
forward: {upstreams: ["127.0.0.1:%d"]}
servers:
- {listen: ["127.0.0.1:%d"], zones: [example.org]}
`, port, port)
	})
	if err == nil || !strings.Contains(err.Error(), "forwarding would loop") {
		t.Fatalf("Start = %v, want the loop refused", err)
	}
}

// An https:// upstream on this server's own DNS over HTTPS listener is
// refused the same way, whatever its path.
func TestForwardLoopThroughHTTPSServerRefused(t *testing.T) {
	certFile, keyFile, _ := testutil.WriteCert(t, t.TempDir(), "server", "server")
	err := startErrorOnFreePort(t, func(port int) string {
		return fmt.Sprintf(`dns: {listen: ["127.0.0.1:0"]}
http: {listen: ""}
kubernetes: {enabled: false}
forward: {upstreams: ["https://127.0.0.1:%d/other"]}
servers:
- {listen: ["0.0.0.0:%d"], transport: https, path: /dns-query, tls: {certFile: %q, keyFile: %q}}
`, port, port, certFile, keyFile)
	})
	if err == nil || !strings.Contains(err.Error(), "forwarding would loop") {
		t.Fatalf("Start = %v, want the loop refused", err)
	}
}

// startErrorOnFreePort is startError for a config that names one port
// twice (a listener and an upstream on it). The port comes from below
// the kernel's ephemeral range (testutil.FreePort), where no outgoing
// connection takes it; should another process still bind it before the
// node does, the start is tried again on another port, as a start that
// failed on the bind says nothing about the check under test.
func startErrorOnFreePort(t *testing.T, cfgText func(port int) string) error {
	t.Helper()
	var err error
	for range 5 {
		port, perr := testutil.FreePort()
		if perr != nil {
			t.Fatal(perr)
		}
		if err = startError(t, cfgText(port)); err == nil || !errors.Is(err, syscall.EADDRINUSE) {
			return err
		}
	}
	return err
}

// A TLS file of an upstream that cannot be read stops the start, with
// the key and the file named.
func TestForwardTLSFileMissingRefused(t *testing.T) {
	missing := filepath.Join(t.TempDir(), "ca.pem")
	for _, c := range []struct{ forward, want string }{
		{fmt.Sprintf(`{upstreams: ["tls://192.0.2.1"], tls: {caFile: %q}}`, missing), "forward.tls.caFile: open " + missing},
		{fmt.Sprintf(`{upstreams: [], stubs: [{zones: [corp.example], upstreams: ["tls://192.0.2.1"], tls: {caFile: %q}}]}`, missing),
			"forward.stubs[0].tls.caFile: open " + missing},
	} {
		err := startError(t, `dns: {listen: ["127.0.0.1:0"]}
http: {listen: ""}
kubernetes: {enabled: false}
forward: `+c.forward+"\n")
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("Start = %v, want %q", err, c.want)
		}
	}
}

// startError starts a node from a config that must parse and returns
// what Start said, stopping the node either way.
func startError(t *testing.T, cfgText string) error {
	t.Helper()
	cfg, err := config.Parse([]byte(cfgText))
	if err != nil {
		t.Fatal(err)
	}
	n, err := New(cfg, slog.New(slog.NewTextHandler(io.Discard, nil)))
	if err != nil {
		t.Fatal(err)
	}
	err = n.Start()
	n.Stop(0)
	return err
}
