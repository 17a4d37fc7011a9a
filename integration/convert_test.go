package integration

import (
	"bytes"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/miekg/dns"
	discoveryv1 "k8s.io/api/discovery/v1"

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
	mkNamespace(t, c, "convert", nil)
	web := mkService(t, c, clusterIPService("convert", "web"))
	mkService(t, c, headlessService("convert", "db"))
	mkSlice(t, c, "convert", "db", "db-v4", discoveryv1.AddressTypeIPv4, ep{ip: "10.244.7.10", hostname: "db-0"})
	u := startUnbound(t, "www.example.test. 300 IN A 192.0.2.1",
		"77.2.0.192.in-addr.arpa. 300 IN PTR printer.example.test.")
	vars := map[string]string{"kubeconfig": cp.Kubeconfig, "upstream": u.addr}

	run := renderCorefile(t, kubeadmCorefile, vars)
	cfg, notes := convertCorefile(t, run.text, true)
	if !strings.Contains(cfg, "context: kubeapi") {
		t.Errorf("the kubeconfig's context is not kubernetes.context:\n%s", cfg)
	}
	p := startShardns(t, cfg)
	p.waitReady(t)
	http := p.httpAddr(t)
	// The one HTTP address is health's: ready's and prometheus's moved
	// there, and convert says so.
	if http != run.addrs["health"] {
		t.Errorf("http.listen %s, want health's %s:\n%s", http, run.addrs["health"], cfg)
	}
	for _, want := range []string{"note: ready 127.0.0.1:", "note: prometheus 127.0.0.1:", "note: loop: built in", "note: reload: built in"} {
		if !strings.Contains(notes, want) {
			t.Errorf("convert's findings lack %q:\n%s", want, notes)
		}
	}
	for _, path := range []string{"/health", "/ready"} {
		if code := httpStatus(t, "http://"+http+path); code != 200 {
			t.Errorf("%s = %d, want 200", path, code)
		}
	}

	// CoreDNS runs the same Corefile on other ports, without loop: its
	// probe asks the upstream for a random name, which Unbound would try
	// to resolve on the internet.
	coreRun := renderCorefile(t, strings.Replace(kubeadmCorefile, "    loop\n", "", 1), vars)
	core := startCoreDNSCorefile(t, coreRun.text, coreRun.addrs["dns"], "web.convert.svc.cluster.local.")

	ip := web.Spec.ClusterIP
	questions := []convertQuestion{
		{"web.convert.svc.cluster.local.", dns.TypeA, dns.RcodeSuccess, []string{"web.convert.svc.cluster.local.\t30\tIN\tA\t" + ip}},
		{"db.convert.svc.cluster.local.", dns.TypeA, dns.RcodeSuccess, []string{"db.convert.svc.cluster.local.\t30\tIN\tA\t10.244.7.10"}},
		{"db-0.db.convert.svc.cluster.local.", dns.TypeA, dns.RcodeSuccess, []string{"db-0.db.convert.svc.cluster.local.\t30\tIN\tA\t10.244.7.10"}},
		{"_http._tcp.web.convert.svc.cluster.local.", dns.TypeSRV, dns.RcodeSuccess, []string{"_http._tcp.web.convert.svc.cluster.local.\t30\tIN\tSRV\t0 100 80 web.convert.svc.cluster.local."}},
		{reverse(ip), dns.TypePTR, dns.RcodeSuccess, []string{reverse(ip) + "\t30\tIN\tPTR\tweb.convert.svc.cluster.local."}},
		{"10-244-1-1.convert.pod.cluster.local.", dns.TypeA, dns.RcodeSuccess, []string{"10-244-1-1.convert.pod.cluster.local.\t30\tIN\tA\t10.244.1.1"}},
		{"nope.convert.svc.cluster.local.", dns.TypeA, dns.RcodeNameError, nil},
		// Forwarded, and reverse-zone NXDOMAINs falling through to the
		// upstream.
		{"www.example.test.", dns.TypeA, dns.RcodeSuccess, []string{"www.example.test.\t300\tIN\tA\t192.0.2.1"}},
		{"missing.example.test.", dns.TypeA, dns.RcodeNameError, nil},
		{"77.2.0.192.in-addr.arpa.", dns.TypePTR, dns.RcodeSuccess, []string{"77.2.0.192.in-addr.arpa.\t300\tIN\tPTR\tprinter.example.test."}},
	}
	askBoth(t, p.addr, core, questions)
	if n := scrapeLabelled(t, http, "shardns_dns_requests_total", `server="dns://`); n < float64(len(questions)) {
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
	u := startUnbound(t, "www.example.test. 300 IN A 192.0.2.1")
	vars := map[string]string{"dir": dir, "upstream": u.addr}
	run := renderCorefile(t, zoneFilesCorefile, vars)
	cfg, _ := convertCorefile(t, run.text, true)
	if !strings.Contains(cfg, "servers:") || !strings.Contains(cfg, "origin: coredns.io") {
		t.Fatalf("no listener or zone file for coredns.io:\n%s", cfg)
	}
	startShardns(t, cfg)
	main, alt := run.addrs["dns"], run.addrs["alt"]
	testutil.Eventually(t, 20*time.Second, func() error {
		return answerIs(main, "www.example.io.", "192.0.2.80")
	})

	coreRun := renderCorefile(t, zoneFilesCorefile, vars)
	core := startCoreDNSCorefile(t, coreRun.text, coreRun.addrs["dns"], "www.example.io.")
	coreAlt := coreRun.addrs["alt"]
	onMain := []convertQuestion{
		{"www.example.io.", dns.TypeA, dns.RcodeSuccess, []string{"www.example.io.\t3600\tIN\tA\t192.0.2.80"}},
		{"example.io.", dns.TypeNS, dns.RcodeSuccess, []string{"example.io.\t3600\tIN\tNS\tns1.example.io."}},
		{"mail.example.net.", dns.TypeMX, dns.RcodeSuccess, []string{"mail.example.net.\t3600\tIN\tMX\t10 www.example.net."}},
		{"nothere.example.net.", dns.TypeA, dns.RcodeNameError, nil},
		{"www.example.test.", dns.TypeA, dns.RcodeSuccess, []string{"www.example.test.\t300\tIN\tA\t192.0.2.1"}},
		{"alias.example.test.", dns.TypeA, dns.RcodeSuccess, []string{"alias.example.test.\t300\tIN\tA\t192.0.2.1"}},
	}
	askBoth(t, main, core, onMain)
	// The listener of coredns.io:{{alt}} answers that zone only.
	onAlt := []convertQuestion{
		{"www.coredns.io.", dns.TypeA, dns.RcodeSuccess, []string{"www.coredns.io.\t3600\tIN\tA\t192.0.2.80"}},
		{"www.example.io.", dns.TypeA, dns.RcodeRefused, nil},
		{"www.example.test.", dns.TypeA, dns.RcodeRefused, nil},
	}
	askBoth(t, alt, coreAlt, onAlt)
	// Where shardns differs, as convert notes: zone files are served on
	// every listener, so dns.listen answers coredns.io too.
	if err := answerIs(main, "www.coredns.io.", "192.0.2.80"); err != nil {
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
	main := startUnbound(t, "www.example.test. 300 IN A 192.0.2.1", "service1.test.global. 300 IN A 6.6.6.6")
	mesh := startUnbound(t, "service1.test.global. 300 IN A 127.255.0.2")
	vars := map[string]string{"upstream": main.addr, "istiocoredns": mesh.addr, "proxy": "proxy"}
	cfg, notes := convertCorefile(t, renderCorefile(t, stubCorefile, vars).text, true)
	if !strings.Contains(notes, "proxy (removed in CoreDNS 1.4) is converted as forward") {
		t.Errorf("convert does not note the proxy plugin:\n%s", notes)
	}
	p := startShardns(t, cfg)
	// Without a cluster source /ready stays 503 (shardns waits for a
	// source to sync); the hosts entry answering shows it serves.
	testutil.Eventually(t, 20*time.Second, func() error {
		return answerIs(p.addr, "legacy-db.example.internal.", "192.0.2.10")
	})

	// CoreDNS has no proxy plugin since 1.4: it runs the forward form.
	vars["proxy"] = "forward"
	coreRun := renderCorefile(t, stubCorefile, vars)
	core := startCoreDNSCorefile(t, coreRun.text, coreRun.addrs["dns"], "www.example.test.")
	askBoth(t, p.addr, core, []convertQuestion{
		{"service1.test.global.", dns.TypeA, dns.RcodeSuccess, []string{"service1.test.global.\t300\tIN\tA\t127.255.0.2"}},
		{"legacy-db.example.internal.", dns.TypeA, dns.RcodeSuccess, []string{"legacy-db.example.internal.\t3600\tIN\tA\t192.0.2.10"}},
		{"foo.example.test.", dns.TypeA, dns.RcodeSuccess, []string{"foo.example.test.\t300\tIN\tA\t192.0.2.1"}},
		{"www.example.test.", dns.TypeA, dns.RcodeSuccess, []string{"www.example.test.\t300\tIN\tA\t192.0.2.1"}},
		{"missing.example.test.", dns.TypeA, dns.RcodeNameError, nil},
	})
}

// convertQuestion is a question and the answer a client must get: the
// rcode and the answer section as zone-file lines.
type convertQuestion struct {
	name   string
	qtype  uint16
	rcode  int
	answer []string
}

// askBoth asks shardns and CoreDNS each question over UDP and TCP and
// checks both against the expected answer. TTLs of forwarded answers
// count down in the caches, so a TTL may be lower than expected, never
// higher.
func askBoth(t *testing.T, shardns, coredns string, qs []convertQuestion) {
	t.Helper()
	for _, q := range qs {
		askBothWith(t, shardns, coredns, func(addr, proto string) error { return answerMatches(addr, proto, q) })
	}
}

// answersAre waits until the server at addr answers each question as it
// wants, over UDP and TCP.
func answersAre(t *testing.T, addr string, qs ...convertQuestion) {
	t.Helper()
	for _, q := range qs {
		for _, proto := range []string{"udp", "tcp"} {
			testutil.Eventually(t, 10*time.Second, func() error {
				return answerMatches(addr, proto, q)
			})
		}
	}
}

// askBothWith runs check on shardns and CoreDNS over UDP and TCP until
// it passes.
func askBothWith(t *testing.T, shardns, coredns string, check func(addr, proto string) error) {
	t.Helper()
	for _, addr := range []string{shardns, coredns} {
		for _, proto := range []string{"udp", "tcp"} {
			testutil.Eventually(t, 10*time.Second, func() error { return check(addr, proto) })
		}
	}
}

func answerMatches(addr, proto string, q convertQuestion) error {
	r, err := testutil.Exchange(addr, proto, q.name, q.qtype)
	if err != nil {
		return err
	}
	return responseMatches(r, addr, proto, q)
}

// responseMatches checks r, the response of addr over proto to q, against
// q's rcode and answer.
func responseMatches(r *dns.Msg, addr, proto string, q convertQuestion) error {
	got := testutil.Records(r.Answer)
	want := slices.Clone(q.answer)
	slices.Sort(want)
	ok := r.Rcode == q.rcode && len(got) == len(want)
	for i := 0; ok && i < len(got); i++ {
		ok = sameRecordTTLAtMost(got[i], want[i])
	}
	if !ok {
		return fmt.Errorf("%s %s from %s over %s: %s %q, want %s %q", q.name, dns.TypeToString[q.qtype], addr, proto,
			dns.RcodeToString[r.Rcode], got, dns.RcodeToString[q.rcode], want)
	}
	return nil
}

// sameRecordTTLAtMost compares zone-file lines, allowing got's TTL to
// be lower than want's (a cached answer counting down).
func sameRecordTTLAtMost(got, want string) bool {
	g, w := strings.Split(got, "\t"), strings.Split(want, "\t")
	if len(g) != len(w) || len(g) < 2 {
		return got == want
	}
	var gt, wt int
	fmt.Sscan(g[1], &gt)
	fmt.Sscan(w[1], &wt)
	g[1], w[1] = "", ""
	return slices.Equal(g, w) && gt <= wt && gt >= 0
}

// corefileRun is a Corefile rendered from a template: its text and the
// loopback addresses it was given.
type corefileRun struct {
	text  string
	addrs map[string]string // {{name}} → 127.0.0.1:port
}

// renderCorefile fills {{name}} in tmpl from vars, and each other name
// (dns, health, ...) with a loopback port that is free.
func renderCorefile(t *testing.T, tmpl string, vars map[string]string) corefileRun {
	t.Helper()
	r := corefileRun{text: tmpl, addrs: map[string]string{}}
	for from := 0; ; {
		i := strings.Index(r.text[from:], "{{")
		if i < 0 {
			return r
		}
		i += from
		j := strings.Index(r.text[i:], "}}")
		name := r.text[i+2 : i+j]
		if !renderName.MatchString(name) {
			from = i + j // a Go template of the template plugin ({{ .Name }}): left as it is
			continue
		}
		v, ok := vars[name]
		if !ok {
			v = fmt.Sprint(freePort(t))
			r.addrs[name] = "127.0.0.1:" + v
		}
		r.text = strings.ReplaceAll(r.text, "{{"+name+"}}", v)
	}
}

// renderName is what renderCorefile fills in: {{dns}}, {{upstream}}.
var renderName = regexp.MustCompile(`^[a-z][a-z0-9_]*$`)

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
	cmd := exec.Command(shardnsBin, "convert", "--corefile", path)
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	err := cmd.Run()
	t.Logf("shardns convert:\n%s%s", stderr.String(), stdout.String())
	if (err == nil) != wantOK {
		t.Fatalf("shardns convert: %v, want success %v", err, wantOK)
	}
	return stdout.String(), stderr.String()
}

// startCoreDNSCorefile runs the CoreDNS of integration/scripts/build-coredns.sh
// on corefile until addr answers probe, and stops it at test end. It
// returns addr.
func startCoreDNSCorefile(t *testing.T, corefile, addr, probe string) string {
	t.Helper()
	return startCoreDNSCorefileIn(t, t.TempDir(), corefile, addr, probe)
}

// startCoreDNSCorefileIn is startCoreDNSCorefile with the Corefile
// written to dir, where CoreDNS runs: the folder its imports and
// relative paths are read from.
func startCoreDNSCorefileIn(t *testing.T, dir, corefile, addr, probe string) string {
	t.Helper()
	return startCoreDNSCorefileRcode(t, dir, corefile, addr, probe, dns.RcodeSuccess)
}

// startCoreDNSCorefileRcode is startCoreDNSCorefileIn waiting for probe
// to get rcode: SERVFAIL where every upstream fails on purpose.
func startCoreDNSCorefileRcode(t *testing.T, dir, corefile, addr, probe string, rcode int) string {
	t.Helper()
	return startCoreDNSCorefileReady(t, dir, corefile, addr, func() error {
		r, err := testutil.Exchange(addr, "udp", probe, dns.TypeA)
		if err == nil && r.Rcode != rcode {
			err = fmt.Errorf("%s: %s", probe, dns.RcodeToString[r.Rcode])
		}
		return err
	})
}

// startCoreDNSCorefileReady is startCoreDNSCorefileIn with its own check
// that CoreDNS serves, for a Corefile that answers no probe with NOERROR.
func startCoreDNSCorefileReady(t *testing.T, dir, corefile, addr string, ready func() error) string {
	t.Helper()
	// Another server on addr would answer the readiness probe while
	// CoreDNS fails to bind it and exits: the test would compare that
	// server with itself.
	if l, err := net.Listen("tcp", addr); err != nil {
		t.Fatalf("CoreDNS's address %s is taken before it starts (given to another server too?): %v", addr, err)
	} else {
		l.Close()
	}
	bin := buildCoreDNS(t)
	conf := filepath.Join(dir, "Corefile")
	if err := os.WriteFile(conf, []byte(corefile), 0o644); err != nil {
		t.Fatal(err)
	}
	var log bytes.Buffer
	cmd := exec.Command(bin, "-conf", conf)
	cmd.Dir = dir
	cmd.Stdout, cmd.Stderr = &log, &log
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	done := make(chan struct{})
	go func() { cmd.Wait(); close(done) }()
	t.Cleanup(func() {
		select {
		case <-done:
			t.Errorf("coredns exited during the test:\n%s", log.String())
		default:
		}
		cmd.Process.Signal(syscall.SIGKILL)
		<-done
		if t.Failed() {
			t.Logf("coredns log:\n%s", log.String())
		}
	})
	testutil.Eventually(t, 20*time.Second, func() error {
		select {
		case <-done:
			return fmt.Errorf("coredns exited:\n%s", log.String())
		default:
		}
		return ready()
	})
	return addr
}
