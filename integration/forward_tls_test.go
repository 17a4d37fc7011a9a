package integration

import (
	"bufio"
	"context"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/miekg/dns"

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
	sh := renderCorefile(t, tmpl, vars)
	path := filepath.Join(t.TempDir(), "Corefile")
	if err := os.WriteFile(path, []byte(sh.text), 0o644); err != nil {
		t.Fatal(err)
	}
	s.shardns, s.shardnsMetrics = startServe(t, "--corefile", path).addr, sh.addrs["metrics"]
	co := renderCorefile(t, tmpl, vars)
	s.coredns = startCoreDNSCorefileRcode(t, t.TempDir(), co.text, co.addrs["dns"], probe, rcode)
	s.corednsMetrics = co.addrs["metrics"]
	return s
}

func TestForwardTLSBesideCoreDNS(t *testing.T) {
	dir := t.TempDir()
	ca, cert, key := testutil.WriteCAAndCert(t, dir, "dot", "dns.example.test")
	upstream := startUnboundTLS(t, cert, key, "www.example.test. 300 IN A 192.0.2.1", "www.example.test. 300 IN AAAA 2001:db8::1")
	corp := startUnboundTLS(t, cert, key, "wiki.corp.test. 300 IN A 192.0.2.80")
	vars := map[string]string{"upstream": upstream.tlsAddr, "corp": corp.tlsAddr, "servername": "dns.example.test", "ca": ca}
	s := serveBoth(t, dotCorefile, vars, "www.example.test.", dns.RcodeSuccess)

	askBoth(t, s.shardns, s.coredns, []convertQuestion{
		{"www.example.test.", dns.TypeA, dns.RcodeSuccess, []string{"www.example.test.\t300\tIN\tA\t192.0.2.1"}},
		{"www.example.test.", dns.TypeAAAA, dns.RcodeSuccess, []string{"www.example.test.\t300\tIN\tAAAA\t2001:db8::1"}},
		{"missing.example.test.", dns.TypeA, dns.RcodeNameError, nil},
		{"wiki.corp.test.", dns.TypeA, dns.RcodeSuccess, []string{"wiki.corp.test.\t300\tIN\tA\t192.0.2.80"}},
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
	to := fmt.Sprintf(`to=%q`, upstream.tlsAddr)
	opened := metricSum(t, s.shardnsMetrics, "shardns_forward_conn_cache_misses_total", to)
	reused := metricSum(t, s.shardnsMetrics, "shardns_forward_conn_cache_hits_total", to)
	coreOpened := metricSum(t, s.corednsMetrics, "coredns_proxy_conn_cache_misses_total", to)
	t.Logf("TLS connections to %s: shardns opened %v and reused %v; CoreDNS opened %v", upstream.tlsAddr, opened, reused, coreOpened)
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
	run := renderCorefile(t, dotCorefile, map[string]string{"upstream": "127.0.0.1:853", "corp": "127.0.0.2:853",
		"servername": "dns.example.test", "ca": missing})
	path := filepath.Join(dir, "Corefile")
	if err := os.WriteFile(path, []byte(run.text), 0o644); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	out, err := exec.CommandContext(ctx, shardnsBin, "serve", "--corefile", path).CombinedOutput()
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
	upstream := startUnboundTLS(t, cert, key, "www.example.test. 300 IN A 192.0.2.1")
	corp := startUnboundTLS(t, cert, key, "wiki.corp.test. 300 IN A 192.0.2.80")
	vars := map[string]string{"upstream": upstream.tlsAddr, "corp": corp.tlsAddr, "servername": "other.example.test", "ca": ca}
	s := serveBoth(t, dotCorefile, vars, "www.example.test.", dns.RcodeServerFailure)
	askBoth(t, s.shardns, s.coredns, []convertQuestion{
		{"www.example.test.", dns.TypeA, dns.RcodeServerFailure, nil},
		{"wiki.corp.test.", dns.TypeA, dns.RcodeServerFailure, nil},
	})
}

// metricSum adds the samples of metric whose labels hold match, from
// the Prometheus text at addr's /metrics.
func metricSum(t *testing.T, addr, metric, match string) float64 {
	t.Helper()
	resp, err := http.Get("http://" + addr + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	sum := 0.0
	sc := bufio.NewScanner(resp.Body)
	for sc.Scan() {
		line := sc.Text()
		if !strings.HasPrefix(line, metric+"{") || !strings.Contains(line, match) {
			continue
		}
		v, err := strconv.ParseFloat(line[strings.LastIndex(line, " ")+1:], 64)
		if err != nil {
			t.Fatalf("%s: %v", line, err)
		}
		sum += v
	}
	return sum
}
