package functional

import (
	"context"
	"fmt"
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/miekg/dns"

	"github.com/shardns/shardns/config"
	"github.com/shardns/shardns/integration/harness"
	"github.com/shardns/shardns/internal/testutil"
	"github.com/shardns/shardns/node"
)

// Zone files served as authoritative zones, asked over real sockets with
// the miekg/dns client and with dig, reloaded while serving, and
// transferred with dig axfr.

// exampleTest holds every record type a file zone serves, a delegation
// with glue and a wildcard; serial 1. Its negative TTL is min(300, 60).
const exampleTest = `$ORIGIN example.test.
$TTL 300
@         SOA   ns1 hostmaster %d 7200 3600 1209600 60
          NS    ns1
          MX    10 mail
          TXT   "v=spf1 -all"
          CAA   0 issue "letsencrypt.org"
ns1       A     192.0.2.53
mail      A     192.0.2.25
          AAAA  2001:db8::25
www       CNAME web
web       A     192.0.2.80
          AAAA  2001:db8::80
_sip._tcp SRV   10 60 5060 web
1.2       PTR   web.example.test.
*.apps    A     192.0.2.99
sub       NS    ns.sub
ns.sub    A     192.0.2.54
`

func exampleZone(serial int, extra string) string { return fmt.Sprintf(exampleTest, serial) + extra }

// privateTest may be transferred by 127.0.0.2 only.
const privateTest = `$TTL 60
@ SOA ns hostmaster 1 7200 3600 1209600 60
  NS  ns
ns A  192.0.2.7
`

// logLines keeps a node's log lines, so a test can wait for one, and
// shows them in the test's log until the test ends.
type logLines struct {
	t     *testing.T
	mu    sync.Mutex
	lines []string
	ended bool
}

func (l *logLines) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.lines = append(l.lines, strings.TrimSpace(string(p)))
	if !l.ended {
		l.t.Log(strings.TrimSpace(string(p)))
	}
	return len(p), nil
}

// end stops showing lines: a timer of the stopped node's actors may still
// log a dead letter, and testing panics on a log after a test completed.
func (l *logLines) end() {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.ended = true
}

// waitFor waits for a log line holding every one of parts.
func (l *logLines) waitFor(parts ...string) string {
	l.t.Helper()
	var found string
	testutil.Eventually(l.t, 10*time.Second, func() error {
		l.mu.Lock()
		defer l.mu.Unlock()
		for _, line := range l.lines {
			if !slices.ContainsFunc(parts, func(p string) bool { return !strings.Contains(line, p) }) {
				found = line
				return nil
			}
		}
		return fmt.Errorf("no log line with %q", parts)
	})
	return found
}

// startZoneFileNode serves example.test and private.test from zone files
// in dir, checked every 50ms, and waits until it is ready.
func startZoneFileNode(t *testing.T, dir string) (*node.Node, *logLines) {
	t.Helper()
	path := filepath.Join(dir, "shardns.yaml")
	os.WriteFile(path, []byte(`
dns: {listen: ["127.0.0.1:0"]}
http: {listen: ""}
kubernetes: {enabled: false}
forward: {upstreams: []}
files:
  interval: 50ms
  zones:
  - {file: db.example, transferTo: [127.0.0.1]}
  - {file: db.private, origin: private.test, transferTo: [127.0.0.2]}
`), 0o644)
	cfg, err := config.Load(path)
	if err != nil {
		t.Fatal(err)
	}
	logs := &logLines{t: t}
	t.Cleanup(logs.end) // after the node's Stop below: cleanups run last first
	n, err := node.New(cfg, slog.New(slog.NewTextHandler(logs, &slog.HandlerOptions{Level: slog.LevelInfo})))
	if err != nil {
		t.Fatal(err)
	}
	if err := n.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { n.Stop(0) })
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	if err := n.WaitReady(ctx); err != nil {
		t.Fatalf("node not ready: %v", err)
	}
	return n, logs
}

func writeZones(t *testing.T, dir, example string) {
	t.Helper()
	for name, text := range map[string]string{"db.example": example, "db.private": privateTest} {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(text), 0o644); err != nil {
			t.Fatal(err)
		}
	}
}

// fileAnswers are the questions every record type of example.test answers.
var fileAnswers = []harness.AnswerCase{
	{Name: "example.test.", Qtype: dns.TypeSOA, Answer: []string{
		"example.test. 300 IN SOA ns1.example.test. hostmaster.example.test. 1 7200 3600 1209600 60"}},
	{Name: "example.test.", Qtype: dns.TypeNS, Answer: []string{"example.test. 300 IN NS ns1.example.test."}},
	{Name: "example.test.", Qtype: dns.TypeMX, Answer: []string{"example.test. 300 IN MX 10 mail.example.test."}},
	{Name: "example.test.", Qtype: dns.TypeTXT, Answer: []string{`example.test. 300 IN TXT "v=spf1 -all"`}},
	{Name: "example.test.", Qtype: dns.TypeCAA, Answer: []string{`example.test. 300 IN CAA 0 issue "letsencrypt.org"`}},
	{Name: "mail.example.test.", Qtype: dns.TypeAAAA, Answer: []string{"mail.example.test. 300 IN AAAA 2001:db8::25"}},
	{Name: "www.example.test.", Qtype: dns.TypeA, Answer: []string{
		"www.example.test. 300 IN CNAME web.example.test.", "web.example.test. 300 IN A 192.0.2.80"}},
	{Name: "_sip._tcp.example.test.", Qtype: dns.TypeSRV, Answer: []string{"_sip._tcp.example.test. 300 IN SRV 10 60 5060 web.example.test."}},
	{Name: "1.2.example.test.", Qtype: dns.TypePTR, Answer: []string{"1.2.example.test. 300 IN PTR web.example.test."}},
	{Name: "a.b.apps.example.test.", Qtype: dns.TypeA, Answer: []string{"a.b.apps.example.test. 300 IN A 192.0.2.99"}},
	{Name: "nope.example.test.", Qtype: dns.TypeA, Rcode: dns.RcodeNameError},
	{Name: "web.example.test.", Qtype: dns.TypeMX},
}

// records renders a section as sorted zone-file lines; without exact
// TTLs, with every TTL zeroed.
func records(rrs []dns.RR, exact bool) []string {
	if !exact {
		rrs = slices.Clone(rrs)
		for i, rr := range rrs {
			rrs[i] = dns.Copy(rr)
			rrs[i].Header().Ttl = 0
		}
	}
	return testutil.Records(rrs)
}

// checkFileSections checks what only the authority and additional
// sections show: glue, referrals without AA, negative TTLs, case. With
// exact unset, TTLs may be lower than the zone's: a replica that asked
// the owner answers from its cache, whose TTLs count down and are capped
// at cache.maxTTL.
func checkFileSections(t *testing.T, addr, proto string, exact bool) {
	t.Helper()
	ttl := func(s string) string {
		if exact {
			return s
		}
		return strings.Replace(s, "\t300\t", "\t0\t", 1)
	}
	mx := harness.Ask(t, addr, proto, "example.test.", dns.TypeMX)
	if got := records(mx.Extra, exact); !slices.Equal(got, []string{
		ttl("mail.example.test.\t300\tIN\tA\t192.0.2.25"), ttl("mail.example.test.\t300\tIN\tAAAA\t2001:db8::25")}) || !mx.Authoritative {
		t.Errorf("MX over %s: additional %v, AA %v", proto, got, mx.Authoritative)
	}
	ref := harness.Ask(t, addr, proto, "host.sub.example.test.", dns.TypeA)
	if ref.Authoritative || ref.Rcode != dns.RcodeSuccess || len(ref.Answer) != 0 ||
		!slices.Equal(records(ref.Ns, exact), []string{ttl("sub.example.test.\t300\tIN\tNS\tns.sub.example.test.")}) ||
		!slices.Equal(records(ref.Extra, exact), []string{ttl("ns.sub.example.test.\t300\tIN\tA\t192.0.2.54")}) {
		t.Errorf("referral over %s: %v", proto, ref)
	}
	nx := harness.Ask(t, addr, proto, "nope.example.test.", dns.TypeA)
	if len(nx.Ns) != 1 || nx.Ns[0].Header().Rrtype != dns.TypeSOA || !nx.Authoritative ||
		nx.Ns[0].Header().Ttl > 60 || (exact && nx.Ns[0].Header().Ttl != 60) {
		t.Errorf("NXDOMAIN over %s: authority %v, want the SOA with TTL 60", proto, nx.Ns)
	}
	mixed := harness.Ask(t, addr, proto, "WeB.Example.TEST.", dns.TypeA)
	if len(mixed.Answer) != 1 || mixed.Answer[0].Header().Name != "WeB.Example.TEST." {
		t.Errorf("mixed case over %s: %v", proto, mixed.Answer)
	}
}

func TestZoneFileAnswersReloadsAndTransfers(t *testing.T) {
	dir := t.TempDir()
	writeZones(t, dir, exampleZone(1, ""))
	n, logs := startZoneFileNode(t, dir)
	addr := n.DNSAddrs()[0]

	for _, proto := range []string{"udp", "tcp"} {
		for _, c := range fileAnswers {
			harness.CheckAnswer(t, addr, proto, c)
		}
		checkFileSections(t, addr, proto, true)
	}
	// dig sees the same.
	if got := harness.Dig(t, addr, "www.example.test", "A"); !slices.Equal(got, []string{"192.0.2.80", "web.example.test."}) {
		t.Errorf("dig www: %v", got)
	}
	if got := harness.Dig(t, addr, "x.apps.example.test", "A"); !slices.Equal(got, []string{"192.0.2.99"}) {
		t.Errorf("dig wildcard: %v", got)
	}
	if got := harness.DigStatus(t, addr, "nope.example.test", "A"); got != "NXDOMAIN" {
		t.Errorf("dig nope: %s", got)
	}

	t.Run("axfr", func(t *testing.T) { checkAXFR(t, addr, 1) })

	// A serial bump is served without a restart.
	writeZones(t, dir, exampleZone(2, "new A 192.0.2.100\n"))
	testutil.Eventually(t, 10*time.Second, func() error {
		return harness.AnswerIs(addr, "new.example.test.", "192.0.2.100")
	})
	logs.waitFor("zone file reloaded", "zone=example.test.", "serial=2")
	checkAXFR(t, addr, 2)

	// A broken edit is reported with its line; the last good version serves.
	writeZones(t, dir, exampleZone(3, "new A 192.0.2.100\nbroken A 192.0.2\n"))
	logs.waitFor("zone file reload failed", "zone=example.test.", "line: 20")
	if err := harness.AnswerIs(addr, "new.example.test.", "192.0.2.100"); err != nil {
		t.Fatal(err)
	}
	harness.CheckAnswer(t, addr, "udp", harness.AnswerCase{Name: "example.test.", Qtype: dns.TypeSOA, Answer: []string{
		"example.test. 300 IN SOA ns1.example.test. hostmaster.example.test. 2 7200 3600 1209600 60"}})

	// Fixed, it is served.
	writeZones(t, dir, exampleZone(4, "fixed A 192.0.2.101\n"))
	testutil.Eventually(t, 10*time.Second, func() error {
		return harness.AnswerIs(addr, "fixed.example.test.", "192.0.2.101")
	})
	harness.CheckAnswer(t, addr, "udp", harness.AnswerCase{Name: "new.example.test.", Qtype: dns.TypeA, Rcode: dns.RcodeNameError})
}

// checkAXFR transfers example.test with dig, then checks the refusals.
func checkAXFR(t *testing.T, addr string, serial int) {
	t.Helper()
	host, port, _ := strings.Cut(addr, ":")
	out, err := exec.Command("dig", "@"+host, "-p", port, "+tries=1", "+time=2", "axfr", "example.test").CombinedOutput()
	if err != nil {
		t.Fatalf("dig axfr: %v\n%s", err, out)
	}
	var soas int
	types := map[string]bool{}
	for _, line := range strings.Split(string(out), "\n") {
		if line == "" || strings.HasPrefix(line, ";") {
			continue
		}
		rr, err := dns.NewRR(line)
		if err != nil {
			t.Fatalf("dig axfr line %q: %v", line, err)
		}
		types[dns.TypeToString[rr.Header().Rrtype]] = true
		if soa, ok := rr.(*dns.SOA); ok {
			soas++
			if soa.Serial != uint32(serial) {
				t.Errorf("transferred serial %d, want %d", soa.Serial, serial)
			}
		}
	}
	for _, want := range []string{"SOA", "NS", "MX", "TXT", "CAA", "A", "AAAA", "CNAME", "SRV", "PTR"} {
		if !types[want] {
			t.Errorf("dig axfr has no %s record:\n%s", want, out)
		}
	}
	if soas != 2 {
		t.Errorf("dig axfr: %d SOA records, want the first and the last:\n%s", soas, out)
	}
	// private.test allows only 127.0.0.2: the miekg/dns transfer client
	// from 127.0.0.1 is refused.
	axfr := new(dns.Msg)
	axfr.SetAxfr("private.test.")
	ch, err := (&dns.Transfer{}).In(axfr, addr)
	if err != nil {
		t.Fatal(err)
	}
	env := <-ch
	if env.Error == nil || !strings.Contains(env.Error.Error(), "bad xfr rcode: 5") {
		t.Errorf("AXFR of private.test from 127.0.0.1: %+v, want REFUSED", env)
	}
	if out, _ := exec.Command("dig", "@"+host, "-p", port, "+tries=1", "+time=2", "axfr", "private.test").CombinedOutput(); !strings.Contains(string(out), "Transfer failed") {
		t.Errorf("dig axfr private.test:\n%s", out)
	}
	// Over UDP, and of a zone that is not a file zone: REFUSED.
	for _, c := range []struct{ proto, name string }{{"udp", "example.test."}, {"tcp", "cluster.local."}, {"tcp", "www.example.test."}} {
		if r := harness.Ask(t, addr, c.proto, c.name, dns.TypeAXFR); r.Rcode != dns.RcodeRefused {
			t.Errorf("AXFR of %s over %s: %s, want REFUSED", c.name, c.proto, dns.RcodeToString[r.Rcode])
		}
	}
}

// Three replicas with replicationFactor 1: example.test lives on one of
// them, xfr.test (which may be transferred) on all three, and every
// replica answers both, the owner's referrals without AA.
func TestZoneFileSharded(t *testing.T) {
	dir := t.TempDir()
	writeZones(t, dir, exampleZone(1, ""))
	xfr := filepath.Join(dir, "db.xfr")
	os.WriteFile(xfr, []byte("$ORIGIN xfr.test.\n$TTL 60\n@ SOA ns hm 9 1 1 1 60\n NS ns\nns A 192.0.2.9\n"), 0o644)
	extra := fmt.Sprintf(`files:
  zones:
  - {file: %q}
  - {file: %q, transferTo: ["127.0.0.0/8"]}
`, filepath.Join(dir, "db.example"), xfr)
	a := harness.StartNodeReplica(t, harness.NodeReplicaOptions{Name: "a", RF: 1, Extra: extra})
	b := harness.StartNodeReplica(t, harness.NodeReplicaOptions{Name: "b", RF: 1, Seeds: []string{a.GossipAddr()}, Extra: extra})
	c := harness.StartNodeReplica(t, harness.NodeReplicaOptions{Name: "c", RF: 1, Seeds: []string{a.GossipAddr()}, Extra: extra})
	nodes := []*node.Node{a, b, c}
	testutil.Eventually(t, 20*time.Second, func() error {
		servedBy := map[string]int{}
		for _, n := range nodes {
			if !n.Ready() {
				return fmt.Errorf("%s not ready", harness.DebugRing(t, n).Self)
			}
			r := harness.DebugRing(t, n)
			if len(r.Members) != 3 {
				return fmt.Errorf("%s sees %d members", r.Self, len(r.Members))
			}
			for _, z := range r.Served {
				servedBy[z]++
			}
		}
		if servedBy["example.test."] != 1 || servedBy["xfr.test."] != 3 {
			return fmt.Errorf("example.test. served by %d replicas (want 1), xfr.test. by %d (want 3)",
				servedBy["example.test."], servedBy["xfr.test."])
		}
		return nil
	})
	for _, n := range nodes {
		addr := n.DNSAddrs()[0]
		for _, proto := range []string{"udp", "tcp"} {
			for _, c := range fileAnswers {
				r := harness.Ask(t, addr, proto, c.Name, c.Qtype)
				want := make([]dns.RR, len(c.Answer))
				for i, s := range c.Answer {
					want[i], _ = dns.NewRR(s)
				}
				if got, exp := records(r.Answer, false), records(want, false); r.Rcode != c.Rcode || !slices.Equal(got, exp) {
					t.Errorf("%s over %s from %s: %s %v, want %s %v", c.Name, proto, addr,
						dns.RcodeToString[r.Rcode], got, dns.RcodeToString[c.Rcode], exp)
				}
			}
			checkFileSections(t, addr, proto, false)
			// Held here: the zone's own TTLs.
			harness.CheckAnswer(t, addr, proto, harness.AnswerCase{Name: "ns.xfr.test.", Qtype: dns.TypeA,
				Answer: []string{"ns.xfr.test. 60 IN A 192.0.2.9"}})
		}
		axfr := new(dns.Msg)
		axfr.SetAxfr("xfr.test.")
		ch, err := (&dns.Transfer{}).In(axfr, addr)
		if err != nil {
			t.Fatal(err)
		}
		var got int
		for env := range ch {
			if env.Error != nil {
				t.Fatalf("AXFR of xfr.test from %s: %v", addr, env.Error)
			}
			got += len(env.RR)
		}
		if got != 4 {
			t.Errorf("AXFR of xfr.test from %s: %d records, want 4", addr, got)
		}
		// Answers an owner gave are counted under the file zone's origin,
		// as on the owner itself.
		if count := harness.ScrapeLabelled(t, n.HTTPAddr(), "shardns_dns_responses_total", `zone="example.test."`); count == 0 {
			t.Errorf("%s: no responses counted for zone example.test.", addr)
		}
	}
}
