package functional

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/miekg/dns"

	"github.com/shardns/shardns/integration/harness"
	"github.com/shardns/shardns/internal/testutil"
	"github.com/shardns/shardns/node"
)

// demoManifest copies the demo cluster into dir, with extra YAML
// documents appended, and returns its path.
func demoManifest(t *testing.T, dir string, extra string) string {
	t.Helper()
	demo, err := os.ReadFile("../../deploy/local/demo-cluster.yaml")
	if err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(dir, "demo-cluster.yaml")
	if err := os.WriteFile(path, append(demo, []byte("\n---\n"+extra)...), 0o644); err != nil {
		t.Fatal(err)
	}
	return path
}

// answerA is the address of the only A record of r, with its owner.
func answerA(r *dns.Msg) string {
	if r.Rcode != dns.RcodeSuccess || len(r.Answer) != 1 {
		return fmt.Sprintf("%s with %d records", dns.RcodeToString[r.Rcode], len(r.Answer))
	}
	a, ok := r.Answer[0].(*dns.A)
	if !ok {
		return r.Answer[0].String()
	}
	return a.Hdr.Name + " " + a.A.String()
}

// Each stub domain goes to its own upstreams (a second Unbound); other
// names to the default ones; reverse names the cluster does not know
// fall through to the stub of their zone.
func TestStubDomains(t *testing.T) {
	def := harness.StartUnbound(t, "www.example.test. 300 IN A 192.0.2.1")
	corp := harness.StartUnbound(t,
		"db.corp.example.test. 300 IN A 192.0.2.50",
		"www.example.test. 300 IN A 198.51.100.99", // never asked: www is not in the stub zone
		"50.2.0.192.in-addr.arpa. 300 IN PTR db.corp.example.test.")
	n := harness.StartNodeYAML(t, fmt.Sprintf(`
dns: {listen: ["127.0.0.1:0"]}
http: {listen: "127.0.0.1:0"}
kubernetes: {enabled: false}
manifests: {files: [%q]}
forward:
  upstreams: [%q]
  stubs:
  - {zones: [corp.example.test, 2.0.192.in-addr.arpa], upstreams: [%q]}
`, demoManifest(t, t.TempDir(), ""), def.Addr, corp.Addr), true)

	for _, proto := range []string{"udp", "tcp"} {
		if got := answerA(harness.Ask(t, n.Addr, proto, "db.corp.example.test.", dns.TypeA)); got != "db.corp.example.test. 192.0.2.50" {
			t.Fatalf("%s: stub name: %s", proto, got)
		}
		if got := answerA(harness.Ask(t, n.Addr, proto, "www.example.test.", dns.TypeA)); got != "www.example.test. 192.0.2.1" {
			t.Fatalf("%s: default name: %s", proto, got)
		}
	}
	// The default upstream does not have it: only the stub answers.
	if r := harness.Ask(t, n.Addr, "udp", "50.2.0.192.in-addr.arpa.", dns.TypePTR); r.Rcode != dns.RcodeSuccess || len(r.Answer) != 1 ||
		r.Answer[0].(*dns.PTR).Ptr != "db.corp.example.test." {
		t.Fatalf("reverse fallthrough to the stub: %v", r)
	}
	// Cluster names are still the cluster's.
	if got := answerA(harness.Ask(t, n.Addr, "udp", "frontend.shop.svc.cluster.local.", dns.TypeA)); got != "frontend.shop.svc.cluster.local. 10.96.10.10" {
		t.Fatalf("cluster name: %s", got)
	}
	// The stub's upstream is counted under its own address.
	asked := harness.Scrape(t, n.HTTPAddr(), fmt.Sprintf("shardns_forward_requests_total{to=%q}", corp.Addr))
	if asked < 1 {
		t.Fatalf("forward requests to the stub upstream: %v", asked)
	}

	// Without default upstreams, only the stub zones are forwarded.
	only := harness.StartNodeYAML(t, fmt.Sprintf(`
dns: {listen: ["127.0.0.1:0"]}
http: {listen: ""}
kubernetes: {enabled: false}
manifests: {files: [%q]}
forward: {upstreams: [], stubs: [{zones: [corp.example.test], upstreams: [%q], policy: sequential}]}
`, demoManifest(t, t.TempDir(), ""), corp.Addr), true)
	if got := answerA(harness.Ask(t, only.Addr, "udp", "db.corp.example.test.", dns.TypeA)); got != "db.corp.example.test. 192.0.2.50" {
		t.Fatalf("stub without default upstreams: %s", got)
	}
	if r := harness.Ask(t, only.Addr, "udp", "www.example.test.", dns.TypeA); r.Rcode != dns.RcodeRefused {
		t.Fatalf("a name in no stub zone, no default upstream: %s, want REFUSED", dns.RcodeToString[r.Rcode])
	}
}

const fooService = `apiVersion: v1
kind: Service
metadata: {name: foo, namespace: default}
spec:
  clusterIP: 10.96.0.50
  ports: [{name: http, port: 80, protocol: TCP}]
`

// CoreDNS's classic example, `rewrite name foo.example.com
// foo.default.svc.cluster.local`: the client asks foo.example.com and
// gets the Service's ClusterIP under the name it asked. A suffix rule
// sends forwarded names upstream under another name.
func TestRewrite(t *testing.T) {
	u := harness.StartUnbound(t, "www.example.test. 300 IN A 192.0.2.1")
	n := harness.StartNodeYAML(t, fmt.Sprintf(`
dns: {listen: ["127.0.0.1:0"]}
http: {listen: ""}
kubernetes: {enabled: false}
manifests: {files: [%q]}
forward: {upstreams: [%q]}
rewrite:
- {field: name, from: foo.example.com, to: foo.default.svc.cluster.local}
- {field: name, match: suffix, from: corp.test, to: example.test, continue: true}
- {field: ttl, match: suffix, from: example.test, ttl: "100-200"}
`, demoManifest(t, t.TempDir(), fooService), u.Addr), true)

	for _, proto := range []string{"udp", "tcp"} {
		r := harness.Ask(t, n.Addr, proto, "foo.example.com.", dns.TypeA)
		if got := answerA(r); got != "foo.example.com. 10.96.0.50" || r.Question[0].Name != "foo.example.com." || !r.Authoritative {
			t.Fatalf("%s: %v", proto, r)
		}
	}
	// dig checks that the answer matches its question.
	if got := harness.Dig(t, n.Addr, "foo.example.com", "A"); len(got) != 1 || got[0] != "10.96.0.50" {
		t.Fatalf("dig: %q", got)
	}
	if r := harness.Ask(t, n.Addr, "udp", "foo.default.svc.cluster.local.", dns.TypeA); answerA(r) != "foo.default.svc.cluster.local. 10.96.0.50" {
		t.Fatalf("the cluster name itself: %v", r)
	}

	// Upstream is asked www.example.test; the client sees www.corp.test,
	// with the TTL clamped by the rule that continued. Twice: the second
	// answer comes from the cache.
	for i := range 2 {
		r := harness.Ask(t, n.Addr, "udp", "www.corp.test.", dns.TypeA)
		if got := answerA(r); got != "www.corp.test. 192.0.2.1" || r.Answer[0].Header().Ttl < 100 || r.Answer[0].Header().Ttl > 200 {
			t.Fatalf("forwarded rewrite, answer %d: %v", i, r)
		}
	}
}

// Hosts entries answer before the cluster and the forwarder; names they
// have no entry for fall through; the file is re-read when it changes, and
// a broken version keeps the last good entries.
func TestHosts(t *testing.T) {
	u := harness.StartUnbound(t, "www.example.test. 300 IN A 192.0.2.1", "printer.example.test. 300 IN A 192.0.2.99")
	dir := t.TempDir()
	hostsFile, otherFile := filepath.Join(dir, "hosts"), filepath.Join(dir, "hosts.other")
	os.WriteFile(hostsFile, []byte("192.0.2.77 printer.example.test printer\n"), 0o644)
	os.WriteFile(otherFile, []byte("# nothing yet\n"), 0o644)
	n := harness.StartNodeYAML(t, fmt.Sprintf(`
dns: {listen: ["127.0.0.1:0"]}
http: {listen: ""}
kubernetes: {enabled: false}
manifests: {files: [%q]}
forward: {upstreams: [%q]}
hosts:
  files: [%q, %q]
  entries: ["192.0.2.88 inline.example.test"]
  ttl: 60
  fallthrough: ["."]
  interval: 50ms
`, demoManifest(t, dir, ""), u.Addr, hostsFile, otherFile), true)

	for _, c := range []struct{ name, want string }{
		{"printer.example.test.", "printer.example.test. 192.0.2.77"}, // hosts before upstream
		{"PRINTER.", "PRINTER. 192.0.2.77"},
		{"inline.example.test.", "inline.example.test. 192.0.2.88"},
		{"www.example.test.", "www.example.test. 192.0.2.1"},                                 // falls through to Unbound
		{"frontend.shop.svc.cluster.local.", "frontend.shop.svc.cluster.local. 10.96.10.10"}, // and to the cluster
	} {
		if got := answerA(harness.Ask(t, n.Addr, "udp", c.name, dns.TypeA)); got != c.want {
			t.Fatalf("%s: %s, want %s", c.name, got, c.want)
		}
	}
	if r := harness.Ask(t, n.Addr, "udp", "77.2.0.192.in-addr.arpa.", dns.TypePTR); len(r.Answer) != 2 || !r.Authoritative {
		t.Fatalf("PTR of a hosts address: %v", r)
	}
	if r := harness.Ask(t, n.Addr, "udp", "printer.example.test.", dns.TypeAAAA); r.Rcode != dns.RcodeSuccess || len(r.Answer) != 0 {
		t.Fatalf("AAAA of an IPv4-only hosts name: %v, want NODATA", r)
	}

	os.WriteFile(hostsFile, []byte("192.0.2.78 printer.example.test\n192.0.2.79 scanner.example.test\n"), 0o644)
	testutil.Eventually(t, 10*time.Second, func() error {
		for name, want := range map[string]string{"printer.example.test.": "printer.example.test. 192.0.2.78",
			"scanner.example.test.": "scanner.example.test. 192.0.2.79"} {
			if got := answerA(harness.Ask(t, n.Addr, "udp", name, dns.TypeA)); got != want {
				return fmt.Errorf("%s: %s, want %s", name, got, want)
			}
		}
		return nil
	})

	// A broken edit of one file, then an edit of the other: once the
	// second is served, the first has been read too, and kept its last
	// good entries.
	os.WriteFile(hostsFile, []byte("192.0.2.80 printer.example.test\nthis is not a hosts line\n"), 0o644)
	os.WriteFile(otherFile, []byte("192.0.2.81 fax.example.test\n"), 0o644)
	testutil.Eventually(t, 10*time.Second, func() error {
		if got := answerA(harness.Ask(t, n.Addr, "udp", "fax.example.test.", dns.TypeA)); got != "fax.example.test. 192.0.2.81" {
			return fmt.Errorf("fax: %s", got)
		}
		return nil
	})
	if got := answerA(harness.Ask(t, n.Addr, "udp", "printer.example.test.", dns.TypeA)); got != "printer.example.test. 192.0.2.78" {
		t.Fatalf("after a broken edit: %s, want the last good entry", got)
	}

	// Without fallthrough, a name of the hosts zones without an entry is
	// SERVFAIL (CoreDNS's answer); names outside the zones go on.
	strict := harness.StartNodeYAML(t, fmt.Sprintf(`
dns: {listen: ["127.0.0.1:0"]}
http: {listen: ""}
kubernetes: {enabled: false}
manifests: {files: [%q]}
forward: {upstreams: [%q]}
hosts: {entries: ["192.0.2.90 nas.lan"], zones: [lan]}
`, demoManifest(t, t.TempDir(), ""), u.Addr), true)
	if got := answerA(harness.Ask(t, strict.Addr, "udp", "nas.lan.", dns.TypeA)); got != "nas.lan. 192.0.2.90" {
		t.Fatalf("nas.lan: %s", got)
	}
	if r := harness.Ask(t, strict.Addr, "udp", "other.lan.", dns.TypeA); r.Rcode != dns.RcodeServerFailure {
		t.Fatalf("no entry, no fallthrough: %s, want SERVFAIL", dns.RcodeToString[r.Rcode])
	}
	if got := answerA(harness.Ask(t, strict.Addr, "udp", "www.example.test.", dns.TypeA)); got != "www.example.test. 192.0.2.1" {
		t.Fatalf("outside the hosts zones: %s", got)
	}
}

// dig's CHAOS questions, against the built binary.
func TestChaosVersionBind(t *testing.T) {
	p := harness.Start(t, harness.Options{Config: strings.Replace(harness.DemoConfig, "cluster: {replicationFactor: 0}",
		"cluster: {replicationFactor: 0, nodeName: replica-7}\nchaos: {enabled: true}", 1)})

	if got := harness.Dig(t, p.Addr, "version.bind", "txt", "chaos"); strings.Join(got, " ") != `"shardns-`+node.Version+`"` {
		t.Fatalf("version.bind: %q", got)
	}
	if got := harness.Dig(t, p.Addr, "hostname.bind", "txt", "chaos"); strings.Join(got, " ") != `"replica-7"` {
		t.Fatalf("hostname.bind: %q", got)
	}
	if status := harness.DigStatus(t, p.Addr, "authors.bind", "txt", "chaos"); status != "REFUSED" {
		t.Fatalf("authors.bind: %s", status)
	}

	custom := harness.Start(t, harness.Options{Config: harness.DemoConfig + `chaos: {enabled: true, version: "none of your business"}` + "\n"})
	if got := harness.Dig(t, custom.Addr, "version.server", "txt", "chaos"); strings.Join(got, " ") != `"none of your business"` {
		t.Fatalf("custom version: %q", got)
	}
	off := harness.Start(t, harness.Options{Config: harness.DemoConfig})
	if status := harness.DigStatus(t, off.Addr, "version.bind", "txt", "chaos"); status != "REFUSED" {
		t.Fatalf("chaos off: %s", status)
	}
}
