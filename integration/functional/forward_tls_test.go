package functional

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/miekg/dns"

	"github.com/shardns/shardns/integration/harness"
	"github.com/shardns/shardns/internal/testutil"
)

// The tests here forward to real Unbounds serving DNS over TLS with a
// certificate for a name (signed by a CA the test makes), as public
// resolvers have them: `shardns serve --corefile` and CoreDNS run the
// same Corefile side by side and must answer alike.

// dotCorefile forwards every name to one Unbound over TLS and a stub
// domain to another, both checked against the test's CA and the name
// {{servername}}.
const dotCorefile = `.:{{dns}} {
    bind 127.0.0.1
    errors
    prometheus 127.0.0.1:{{metrics}}
    forward . tls://{{upstream}} {
        tls_servername {{servername}}
        tls {{ca}}
        max_idle_conns 4
        expire 20s
    }
}
corp.test:{{dns}} {
    bind 127.0.0.1
    errors
    forward . tls://{{corp}} {
        tls_servername {{servername}}
        tls {{ca}}
    }
}
`

// dotServers are shardns and CoreDNS serving one rendering each of a
// Corefile: their DNS and metrics addresses.
type dotServers struct {
	shardns, coredns               string
	shardnsMetrics, corednsMetrics string
}

// serveBoth starts `shardns serve --corefile` and CoreDNS, each on ports
// of its own, on tmpl rendered with vars; CoreDNS is running once probe
// gets rcode.
func serveBoth(t *testing.T, tmpl string, vars map[string]string, probe string, rcode int) dotServers {
	t.Helper()
	var s dotServers
	sh := harness.RenderCorefile(t, tmpl, vars)
	path := filepath.Join(t.TempDir(), "Corefile")
	if err := os.WriteFile(path, []byte(sh.Text), 0o644); err != nil {
		t.Fatal(err)
	}
	s.shardns, s.shardnsMetrics = harness.Start(t, harness.Options{Args: []string{"--corefile", path}}).Addr, sh.Addrs["metrics"]
	co := harness.RenderCorefile(t, tmpl, vars)
	s.coredns = harness.StartCoreDNS(t, harness.CoreDNSOptions{Dir: t.TempDir(), Corefile: co.Text, Addr: co.Addrs["dns"], Probe: probe, Rcode: rcode})
	s.corednsMetrics = co.Addrs["metrics"]
	return s
}

func TestForwardTLSBesideCoreDNS(t *testing.T) {
	dir := t.TempDir()
	ca, cert, key := testutil.WriteCAAndCert(t, dir, "dot", "dns.example.test")
	upstream := harness.StartUnboundTLS(t, cert, key, "www.example.test. 300 IN A 192.0.2.1", "www.example.test. 300 IN AAAA 2001:db8::1")
	corp := harness.StartUnboundTLS(t, cert, key, "wiki.corp.test. 300 IN A 192.0.2.80")
	vars := map[string]string{"upstream": upstream.TLSAddr, "corp": corp.TLSAddr, "servername": "dns.example.test", "ca": ca}
	s := serveBoth(t, dotCorefile, vars, "www.example.test.", dns.RcodeSuccess)

	harness.AskBoth(t, s.shardns, s.coredns, []harness.Question{
		{Name: "www.example.test.", Qtype: dns.TypeA, Rcode: dns.RcodeSuccess, Answer: []string{"www.example.test.\t300\tIN\tA\t192.0.2.1"}},
		{Name: "www.example.test.", Qtype: dns.TypeAAAA, Rcode: dns.RcodeSuccess, Answer: []string{"www.example.test.\t300\tIN\tAAAA\t2001:db8::1"}},
		{Name: "missing.example.test.", Qtype: dns.TypeA, Rcode: dns.RcodeNameError, Answer: nil},
		{Name: "wiki.corp.test.", Qtype: dns.TypeA, Rcode: dns.RcodeSuccess, Answer: []string{"wiki.corp.test.\t300\tIN\tA\t192.0.2.80"}},
	})

	// Many questions, one after another: the connections are kept open
	// and reused, by shardns as by CoreDNS.
	for i := range 200 {
		for _, addr := range []string{s.shardns, s.coredns} {
			name := fmt.Sprintf("q%d.example.test.", i)
			r, err := testutil.Exchange(addr, "udp", name, dns.TypeA)
			if err != nil || r.Rcode != dns.RcodeNameError {
				t.Fatalf("%s from %s: %v %v, want NXDOMAIN", name, addr, r, err)
			}
		}
	}
	to := fmt.Sprintf(`to=%q`, upstream.TLSAddr)
	opened := harness.MetricSum(t, s.shardnsMetrics, "shardns_forward_conn_cache_misses_total", to)
	reused := harness.MetricSum(t, s.shardnsMetrics, "shardns_forward_conn_cache_hits_total", to)
	coreOpened := harness.MetricSum(t, s.corednsMetrics, "coredns_proxy_conn_cache_misses_total", to)
	t.Logf("TLS connections to %s: shardns opened %v and reused %v; CoreDNS opened %v", upstream.TLSAddr, opened, reused, coreOpened)
	if opened < 1 || opened > 2 || reused < 200 {
		t.Errorf("shardns opened %v TLS connections and reused %v for over 200 questions asked one after another, want 1 or 2 opened, the rest reused", opened, reused)
	}
	if coreOpened < 1 || coreOpened > 2 {
		t.Errorf("CoreDNS opened %v TLS connections: not what the comparison assumes", coreOpened)
	}
}

// A tls file that cannot be read stops `serve --corefile` at start,
// naming the Corefile's line, as CoreDNS refuses to start on it.
func TestForwardTLSMissingFile(t *testing.T) {
	dir := t.TempDir()
	missing := filepath.Join(dir, "missing-ca.pem")
	run := harness.RenderCorefile(t, dotCorefile, map[string]string{"upstream": "127.0.0.1:853", "corp": "127.0.0.2:853",
		"servername": "dns.example.test", "ca": missing})
	path := filepath.Join(dir, "Corefile")
	if err := os.WriteFile(path, []byte(run.Text), 0o644); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	out, err := exec.CommandContext(ctx, harness.Bin, "serve", "--corefile", path).CombinedOutput()
	want := path + ":7: forward tls: caFile: open " + missing + ": no such file or directory"
	if err == nil || ctx.Err() != nil || !strings.Contains(string(out), want) {
		t.Fatalf("serve --corefile: %v\n%s\nwant it to exit with %q", err, out, want)
	}
}

// A certificate that does not hold tls_servername fails every question:
// SERVFAIL, from both.
func TestForwardTLSWrongServerName(t *testing.T) {
	dir := t.TempDir()
	ca, cert, key := testutil.WriteCAAndCert(t, dir, "dot", "dns.example.test")
	upstream := harness.StartUnboundTLS(t, cert, key, "www.example.test. 300 IN A 192.0.2.1")
	corp := harness.StartUnboundTLS(t, cert, key, "wiki.corp.test. 300 IN A 192.0.2.80")
	vars := map[string]string{"upstream": upstream.TLSAddr, "corp": corp.TLSAddr, "servername": "other.example.test", "ca": ca}
	s := serveBoth(t, dotCorefile, vars, "www.example.test.", dns.RcodeServerFailure)
	harness.AskBoth(t, s.shardns, s.coredns, []harness.Question{
		{Name: "www.example.test.", Qtype: dns.TypeA, Rcode: dns.RcodeServerFailure, Answer: nil},
		{Name: "wiki.corp.test.", Qtype: dns.TypeA, Rcode: dns.RcodeServerFailure, Answer: nil},
	})
}
