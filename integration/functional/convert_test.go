package functional

import (
	"bytes"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/miekg/dns"
	discoveryv1 "k8s.io/api/discovery/v1"

	"github.com/shardns/shardns/integration/harness"
	"github.com/shardns/shardns/integration/kubeapi"
	"github.com/shardns/shardns/internal/testutil"
)

// The tests here run `shardns convert` on a Corefile, serve what it
// prints with `shardns serve`, and ask the same questions of a real
// CoreDNS running the Corefile itself: a migrated cluster must get the
// answers it got before. Every Corefile listens on loopback ports and
// forwards to a local Unbound, so no query leaves the host.

// kubeadmCorefile is kubeadm's default Corefile
// (corefile/testdata/kubeadm.Corefile) on loopback ports, with the test
// apiserver's kubeconfig and its context named (as an out-of-cluster
// CoreDNS may), and a local upstream in place of resolv.conf.
const kubeadmCorefile = `.:{{dns}} {
    bind 127.0.0.1
    errors
    health 127.0.0.1:{{health}} {
       lameduck 5s
    }
    ready 127.0.0.1:{{ready}}
    kubernetes cluster.local in-addr.arpa ip6.arpa {
       kubeconfig {{kubeconfig}} kubeapi
       pods insecure
       fallthrough in-addr.arpa ip6.arpa
       ttl 30
    }
    prometheus 127.0.0.1:{{metrics}}
    forward . {{upstream}} {
       max_concurrent 1000
    }
    cache 30
    loop
    reload
    loadbalance
}
`

func TestConvertKubeadmCorefile(t *testing.T) {
	cp := kubeapi.Shared(t)
	c := cp.Client
	harness.CreateNamespace(t, c, "convert", nil)
	web := harness.CreateService(t, c, harness.ClusterIPService("convert", "web"))
	harness.CreateService(t, c, harness.HeadlessService("convert", "db"))
	harness.CreateEndpointSlice(t, c, "convert", "db", "db-v4", discoveryv1.AddressTypeIPv4, harness.Endpoint{IP: "10.244.7.10", Hostname: "db-0"})
	u := harness.StartUnbound(t, "www.example.test. 300 IN A 192.0.2.1",
		"77.2.0.192.in-addr.arpa. 300 IN PTR printer.example.test.")
	vars := map[string]string{"kubeconfig": cp.Kubeconfig, "upstream": u.Addr}

	run := harness.RenderCorefile(t, kubeadmCorefile, vars)
	cfg, notes := convertCorefile(t, run.Text, true)
	if !strings.Contains(cfg, "context: kubeapi") {
		t.Errorf("the kubeconfig's context is not kubernetes.context:\n%s", cfg)
	}
	p := harness.Start(t, harness.Options{Config: cfg})
	p.WaitReady(t)
	http := p.HTTPAddr(t)
	// The one HTTP address is health's: ready's and prometheus's moved
	// there, and convert says so.
	if http != run.Addrs["health"] {
		t.Errorf("http.listen %s, want health's %s:\n%s", http, run.Addrs["health"], cfg)
	}
	for _, want := range []string{"note: ready 127.0.0.1:", "note: prometheus 127.0.0.1:", "note: loop: built in", "note: reload: built in"} {
		if !strings.Contains(notes, want) {
			t.Errorf("convert's findings lack %q:\n%s", want, notes)
		}
	}
	for _, path := range []string{"/health", "/ready"} {
		if code := harness.HTTPStatus(t, "http://"+http+path); code != 200 {
			t.Errorf("%s = %d, want 200", path, code)
		}
	}

	// CoreDNS runs the same Corefile on other ports, without loop: its
	// probe asks the upstream for a random name, which Unbound would try
	// to resolve on the internet.
	coreRun := harness.RenderCorefile(t, strings.Replace(kubeadmCorefile, "    loop\n", "", 1), vars)
	core := harness.StartCoreDNS(t, harness.CoreDNSOptions{Corefile: coreRun.Text, Addr: coreRun.Addrs["dns"], Probe: "web.convert.svc.cluster.local."})

	ip := web.Spec.ClusterIP
	questions := []harness.Question{
		{Name: "web.convert.svc.cluster.local.", Qtype: dns.TypeA, Rcode: dns.RcodeSuccess, Answer: []string{"web.convert.svc.cluster.local.\t30\tIN\tA\t" + ip}},
		{Name: "db.convert.svc.cluster.local.", Qtype: dns.TypeA, Rcode: dns.RcodeSuccess, Answer: []string{"db.convert.svc.cluster.local.\t30\tIN\tA\t10.244.7.10"}},
		{Name: "db-0.db.convert.svc.cluster.local.", Qtype: dns.TypeA, Rcode: dns.RcodeSuccess, Answer: []string{"db-0.db.convert.svc.cluster.local.\t30\tIN\tA\t10.244.7.10"}},
		{Name: "_http._tcp.web.convert.svc.cluster.local.", Qtype: dns.TypeSRV, Rcode: dns.RcodeSuccess, Answer: []string{"_http._tcp.web.convert.svc.cluster.local.\t30\tIN\tSRV\t0 100 80 web.convert.svc.cluster.local."}},
		{Name: harness.ReverseName(ip), Qtype: dns.TypePTR, Rcode: dns.RcodeSuccess, Answer: []string{harness.ReverseName(ip) + "\t30\tIN\tPTR\tweb.convert.svc.cluster.local."}},
		{Name: "10-244-1-1.convert.pod.cluster.local.", Qtype: dns.TypeA, Rcode: dns.RcodeSuccess, Answer: []string{"10-244-1-1.convert.pod.cluster.local.\t30\tIN\tA\t10.244.1.1"}},
		{Name: "nope.convert.svc.cluster.local.", Qtype: dns.TypeA, Rcode: dns.RcodeNameError, Answer: nil},
		// Forwarded, and reverse-zone NXDOMAINs falling through to the
		// upstream.
		{Name: "www.example.test.", Qtype: dns.TypeA, Rcode: dns.RcodeSuccess, Answer: []string{"www.example.test.\t300\tIN\tA\t192.0.2.1"}},
		{Name: "missing.example.test.", Qtype: dns.TypeA, Rcode: dns.RcodeNameError, Answer: nil},
		{Name: "77.2.0.192.in-addr.arpa.", Qtype: dns.TypePTR, Rcode: dns.RcodeSuccess, Answer: []string{"77.2.0.192.in-addr.arpa.\t300\tIN\tPTR\tprinter.example.test."}},
	}
	harness.AskBoth(t, p.Addr, core, questions)
	if n := harness.ScrapeLabelled(t, http, "shardns_dns_requests_total", `server="dns://`); n < float64(len(questions)) {
		t.Errorf("shardns_dns_requests_total on http.listen = %v, want at least %d", n, len(questions))
	}
}

// zoneFilesCorefile is the Corefile of CoreDNS's manual ("sets up 4 zones
// serving on two different ports", corefile/testdata/coredns-manual-zones.Corefile)
// on loopback ports, its files read from the test's folder (root),
// without the root block's kubernetes plugin, which needs a cluster
// domain to convert, and with a rewrite in the root block: two ports,
// three file zones and a rewrite.
const zoneFilesCorefile = `coredns.io:{{alt}} {
    bind 127.0.0.1
    root {{dir}}
    file db.coredns.io
}

example.io:{{dns}} {
    bind 127.0.0.1
    root {{dir}}
    log
    errors
    file db.example.io
}

example.net:{{dns}} {
    bind 127.0.0.1
    root {{dir}}
    file db.example.net
}

.:{{dns}} {
    bind 127.0.0.1
    rewrite name alias.example.test www.example.test
    forward . {{upstream}}
    log
    errors
    cache
}
`

func TestConvertZoneFilesCorefile(t *testing.T) {
	dir := t.TempDir()
	for _, z := range []string{"coredns.io", "example.io", "example.net"} {
		zone := fmt.Sprintf(`$ORIGIN %[1]s.
@    3600 IN SOA ns1.%[1]s. hostmaster.%[1]s. 2024010101 7200 3600 1209600 300
@    3600 IN NS  ns1.%[1]s.
ns1  3600 IN A   192.0.2.53
www  3600 IN A   192.0.2.80
mail 3600 IN MX  10 www.%[1]s.
`, z)
		if err := os.WriteFile(filepath.Join(dir, "db."+z), []byte(zone), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	u := harness.StartUnbound(t, "www.example.test. 300 IN A 192.0.2.1")
	vars := map[string]string{"dir": dir, "upstream": u.Addr}
	run := harness.RenderCorefile(t, zoneFilesCorefile, vars)
	cfg, _ := convertCorefile(t, run.Text, true)
	if !strings.Contains(cfg, "servers:") || !strings.Contains(cfg, "origin: coredns.io") {
		t.Fatalf("no listener or zone file for coredns.io:\n%s", cfg)
	}
	harness.Start(t, harness.Options{Config: cfg})
	main, alt := run.Addrs["dns"], run.Addrs["alt"]
	testutil.Eventually(t, 20*time.Second, func() error {
		return harness.AnswerIs(main, "www.example.io.", "192.0.2.80")
	})

	coreRun := harness.RenderCorefile(t, zoneFilesCorefile, vars)
	core := harness.StartCoreDNS(t, harness.CoreDNSOptions{Corefile: coreRun.Text, Addr: coreRun.Addrs["dns"], Probe: "www.example.io."})
	coreAlt := coreRun.Addrs["alt"]
	onMain := []harness.Question{
		{Name: "www.example.io.", Qtype: dns.TypeA, Rcode: dns.RcodeSuccess, Answer: []string{"www.example.io.\t3600\tIN\tA\t192.0.2.80"}},
		{Name: "example.io.", Qtype: dns.TypeNS, Rcode: dns.RcodeSuccess, Answer: []string{"example.io.\t3600\tIN\tNS\tns1.example.io."}},
		{Name: "mail.example.net.", Qtype: dns.TypeMX, Rcode: dns.RcodeSuccess, Answer: []string{"mail.example.net.\t3600\tIN\tMX\t10 www.example.net."}},
		{Name: "nothere.example.net.", Qtype: dns.TypeA, Rcode: dns.RcodeNameError, Answer: nil},
		{Name: "www.example.test.", Qtype: dns.TypeA, Rcode: dns.RcodeSuccess, Answer: []string{"www.example.test.\t300\tIN\tA\t192.0.2.1"}},
		{Name: "alias.example.test.", Qtype: dns.TypeA, Rcode: dns.RcodeSuccess, Answer: []string{"alias.example.test.\t300\tIN\tA\t192.0.2.1"}},
	}
	harness.AskBoth(t, main, core, onMain)
	// The listener of coredns.io:{{alt}} answers that zone only.
	onAlt := []harness.Question{
		{Name: "www.coredns.io.", Qtype: dns.TypeA, Rcode: dns.RcodeSuccess, Answer: []string{"www.coredns.io.\t3600\tIN\tA\t192.0.2.80"}},
		{Name: "www.example.io.", Qtype: dns.TypeA, Rcode: dns.RcodeRefused, Answer: nil},
		{Name: "www.example.test.", Qtype: dns.TypeA, Rcode: dns.RcodeRefused, Answer: nil},
	}
	harness.AskBoth(t, alt, coreAlt, onAlt)
	// Where shardns differs, as convert notes: zone files are served on
	// every listener, so dns.listen answers coredns.io too.
	if err := harness.AnswerIs(main, "www.coredns.io.", "192.0.2.80"); err != nil {
		t.Error(err)
	}
}

// stubCorefile is Istio's stub domain for .global (from Istio's
// multicluster instructions: the kube-dns Corefile with a global:53 block
// proxying to istiocoredns), with a hosts entry and a rewrite in the root
// block, on loopback ports.
const stubCorefile = `.:{{dns}} {
    bind 127.0.0.1
    errors
    health 127.0.0.1:{{health}}
    hosts {
        192.0.2.10 legacy-db.example.internal
        fallthrough
    }
    rewrite name foo.example.test www.example.test
    {{proxy}} . {{upstream}}
    cache 30
    loadbalance
}
global:{{dns}} {
    bind 127.0.0.1
    errors
    cache 30
    {{proxy}} . {{istiocoredns}}
}
`

func TestConvertStubHostsRewriteCorefile(t *testing.T) {
	// The main upstream has a wrong address for the mesh name: only the
	// stub domain's upstream gives the right one.
	main := harness.StartUnbound(t, "www.example.test. 300 IN A 192.0.2.1", "service1.test.global. 300 IN A 6.6.6.6")
	mesh := harness.StartUnbound(t, "service1.test.global. 300 IN A 127.255.0.2")
	vars := map[string]string{"upstream": main.Addr, "istiocoredns": mesh.Addr, "proxy": "proxy"}
	cfg, notes := convertCorefile(t, harness.RenderCorefile(t, stubCorefile, vars).Text, true)
	if !strings.Contains(notes, "proxy (removed in CoreDNS 1.4) is converted as forward") {
		t.Errorf("convert does not note the proxy plugin:\n%s", notes)
	}
	p := harness.Start(t, harness.Options{Config: cfg})
	// Without a cluster source /ready stays 503 (shardns waits for a
	// source to sync); the hosts entry answering shows it serves.
	testutil.Eventually(t, 20*time.Second, func() error {
		return harness.AnswerIs(p.Addr, "legacy-db.example.internal.", "192.0.2.10")
	})

	// CoreDNS has no proxy plugin since 1.4: it runs the forward form.
	vars["proxy"] = "forward"
	coreRun := harness.RenderCorefile(t, stubCorefile, vars)
	core := harness.StartCoreDNS(t, harness.CoreDNSOptions{Corefile: coreRun.Text, Addr: coreRun.Addrs["dns"], Probe: "www.example.test."})
	harness.AskBoth(t, p.Addr, core, []harness.Question{
		{Name: "service1.test.global.", Qtype: dns.TypeA, Rcode: dns.RcodeSuccess, Answer: []string{"service1.test.global.\t300\tIN\tA\t127.255.0.2"}},
		{Name: "legacy-db.example.internal.", Qtype: dns.TypeA, Rcode: dns.RcodeSuccess, Answer: []string{"legacy-db.example.internal.\t3600\tIN\tA\t192.0.2.10"}},
		{Name: "foo.example.test.", Qtype: dns.TypeA, Rcode: dns.RcodeSuccess, Answer: []string{"foo.example.test.\t300\tIN\tA\t192.0.2.1"}},
		{Name: "www.example.test.", Qtype: dns.TypeA, Rcode: dns.RcodeSuccess, Answer: []string{"www.example.test.\t300\tIN\tA\t192.0.2.1"}},
		{Name: "missing.example.test.", Qtype: dns.TypeA, Rcode: dns.RcodeNameError, Answer: nil},
	})
}

// convertCorefile runs `shardns convert --corefile` on text and returns
// the configuration it prints and its findings (stderr). It fails the
// test unless the command exits as wantOK says.
func convertCorefile(t *testing.T, text string, wantOK bool) (cfg, findings string) {
	t.Helper()
	path := filepath.Join(t.TempDir(), "Corefile")
	if err := os.WriteFile(path, []byte(text), 0o644); err != nil {
		t.Fatal(err)
	}
	var stdout, stderr bytes.Buffer
	cmd := exec.Command(harness.Bin, "convert", "--corefile", path)
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	err := cmd.Run()
	t.Logf("shardns convert:\n%s%s", stderr.String(), stdout.String())
	if (err == nil) != wantOK {
		t.Fatalf("shardns convert: %v, want success %v", err, wantOK)
	}
	return stdout.String(), stderr.String()
}
