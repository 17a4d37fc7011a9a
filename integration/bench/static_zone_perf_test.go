package bench

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/miekg/dns"

	"github.com/shardns/shardns/integration/harness"
	"github.com/shardns/shardns/internal/testutil"
)

const (
	// staticZoneRounds is how many rounds TestStaticZonePerf measures,
	// each server once a round in a rotating order; the median is
	// reported.
	staticZoneRounds = 5
	// staticZoneNames is the zone's size.
	staticZoneNames = 1000
	// knotTarget is the queries per server CPU-second shardns aims at
	// against Knot's.
	knotTarget = 1.2
)

// TestStaticZonePerf is part of `make bench`: one zone of staticZoneNames
// names served from a zone file by shardns (`files.zones`), by Knot DNS
// with one UDP worker (`udp-workers: 1`; shardns starts one UDP reader
// per two cores) and by CoreDNS's `file` plugin, each asked the same
// dnsperf run at full load (-c 4 -q 200, blocksRoundSeconds), in
// staticZoneRounds rounds whose order rotates. The mix asks A of every
// name and of a tenth as many names not in the zone (NXDOMAIN). It
// prints the median round's queries per server CPU-second of each and
// the median of the rounds' ratios; it asserts nothing about speed, and
// fails when a server's rcode or answer records differ from shardns's.
// Knot comes from Debian's knot package (scripts/deps.sh); without knotd
// the test skips. It runs only with SHARDNS_BENCH=1.
func TestStaticZonePerf(t *testing.T) {
	if os.Getenv("SHARDNS_BENCH") == "" {
		t.Skip("set SHARDNS_BENCH=1 (make bench)")
	}
	knotd, err := exec.LookPath("knotd")
	if err != nil {
		t.Skip("knotd is not installed: scripts/deps.sh installs Debian's knot package")
	}
	dir := t.TempDir()
	zoneFile, queries := writeStaticZone(t, dir)
	qfile := filepath.Join(dir, "queries.txt")
	if err := os.WriteFile(qfile, []byte(strings.Join(queries, "\n")+"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	p := harness.Start(t, harness.Options{Config: fmt.Sprintf(`
dns: {listen: ["127.0.0.1:0"]}
http: {listen: "127.0.0.1:0", lameduck: 0s}
kubernetes: {enabled: false, zones: [], reverseZones: []}
files: {zones: [{file: %q, origin: example.org}]}
forward: {upstreams: []}
`, zoneFile)})
	corednsPort := harness.FreePort(t)
	servers := []*benchServer{
		{name: "shardns", addr: p.Addr, pid: p.Cmd.Process.Pid},
		startKnot(t, knotd, dir, zoneFile),
		runCoreDNS(t, harness.BuildCoreDNS(t), "coredns-file", corednsPort, fmt.Appendf(nil,
			".:%d {\n    bind 127.0.0.1\n    errors\n    file %s example.org\n}\n", corednsPort, zoneFile)),
	}
	for _, s := range servers {
		testutil.Eventually(t, 30*time.Second, func() error {
			return harness.AnswerIs(s.addr, "host0.example.org.", "10.0.0.1")
		})
		s.dnsperf(t, qfile, "-l", "2")
	}
	for _, s := range servers[1:] {
		sameAnswers(t, servers[0], s, queries)
	}
	for round := range staticZoneRounds {
		for i := range servers {
			servers[(round+i)%len(servers)].measureLoad(t, round+1, qfile)
		}
	}
	sh := servers[0]
	for _, peer := range servers[1:] {
		var ratios []float64
		for i := range sh.runs {
			ratios = append(ratios, sh.runs[i].perCPUSecond()/peer.runs[i].perCPUSecond())
		}
		line := fmt.Sprintf("shardns/%s queries per server CPU-second (median of %d rounds): %.0f / %.0f, median ratio %.2f× (rounds %.2f–%.2f×)",
			peer.name, staticZoneRounds, sh.medianPerCPUSecond(), peer.medianPerCPUSecond(),
			harness.Median(ratios), slices.Min(ratios), slices.Max(ratios))
		if peer.name == "knot" {
			verdict := "met"
			if harness.Median(ratios) < knotTarget {
				verdict = "MISSED"
			}
			line += fmt.Sprintf(" (target %.1f×: %s)", knotTarget, verdict)
		}
		t.Log(line)
	}
}

// writeStaticZone writes the zone example.org with staticZoneNames A
// records into dir and returns the file and the dnsperf questions.
func writeStaticZone(t *testing.T, dir string) (string, []string) {
	t.Helper()
	var zone strings.Builder
	zone.WriteString("example.org. 3600 IN SOA ns1.example.org. hostmaster.example.org. 1 7200 1800 86400 300\n" +
		"example.org. 3600 IN NS ns1.example.org.\nns1.example.org. 3600 IN A 192.0.2.53\n")
	var queries []string
	for i := range staticZoneNames {
		fmt.Fprintf(&zone, "host%d.example.org. 300 IN A 10.%d.%d.1\n", i, i/250, i%250)
		queries = append(queries, fmt.Sprintf("host%d.example.org A", i))
		if i%10 == 0 {
			queries = append(queries, fmt.Sprintf("missing%d.example.org A", i))
		}
	}
	path := filepath.Join(dir, "example.org.zone")
	if err := os.WriteFile(path, []byte(zone.String()), 0o644); err != nil {
		t.Fatal(err)
	}
	return path, queries
}

// sameAnswers fails the test for each question whose rcode or answer
// records differ between a and b over UDP; differences in the authority
// section (CoreDNS adds the zone's NS to positive answers) are counted
// and logged.
func sameAnswers(t *testing.T, a, b *benchServer, queries []string) {
	t.Helper()
	var authority int
	for _, q := range queries {
		name, typ, _ := strings.Cut(q, " ")
		qtype := dns.StringToType[typ]
		ra, ea := harness.AnswerSummary(a.addr, dns.Fqdn(name), qtype)
		rb, eb := harness.AnswerSummary(b.addr, dns.Fqdn(name), qtype)
		if ea != nil || eb != nil {
			t.Fatalf("%s: %s: %v, %s: %v", q, a.name, ea, b.name, eb)
		}
		answerA, authA, _ := strings.Cut(ra, " authority=")
		answerB, authB, _ := strings.Cut(rb, " authority=")
		if answerA != answerB {
			t.Errorf("%s differs:\n  %s: %s\n  %s: %s", q, a.name, ra, b.name, rb)
		} else if authA != authB {
			authority++
		}
	}
	t.Logf("%s and %s: the same rcode and answer to all %d questions; authority sections differ in %d", a.name, b.name, len(queries), authority)
}

// startKnot runs knotd serving zoneFile as example.org on a free
// loopback port with one UDP and one TCP worker, and stops it at test
// end.
func startKnot(t *testing.T, knotd, dir, zoneFile string) *benchServer {
	t.Helper()
	port := harness.FreePort(t)
	run := filepath.Join(dir, "knot")
	if err := os.MkdirAll(run, 0o755); err != nil {
		t.Fatal(err)
	}
	conf := fmt.Sprintf(`server:
    rundir: %[1]q
    listen: 127.0.0.1@%[2]d
    udp-workers: 1
    tcp-workers: 1
    background-workers: 1
log:
  - target: stderr
    any: warning
database:
    storage: %[1]q
zone:
  - domain: example.org
    storage: %[1]q
    file: %[3]q
    journal-content: none
    zonefile-sync: -1
`, run, port, zoneFile)
	path := filepath.Join(run, "knot.conf")
	if err := os.WriteFile(path, []byte(conf), 0o644); err != nil {
		t.Fatal(err)
	}
	var log testutil.SyncBuffer
	cmd := exec.Command(knotd, "-c", path)
	cmd.Stdout, cmd.Stderr = &log, &log
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	done := make(chan struct{})
	go func() { cmd.Wait(); close(done) }()
	t.Cleanup(func() {
		cmd.Process.Signal(syscall.SIGTERM)
		select {
		case <-done:
		case <-time.After(10 * time.Second):
			cmd.Process.Kill()
			<-done
		}
		if t.Failed() {
			t.Logf("knotd log:\n%s", log.String())
		}
	})
	s := &benchServer{name: "knot", addr: fmt.Sprintf("127.0.0.1:%d", port), pid: cmd.Process.Pid}
	testutil.Eventually(t, 20*time.Second, func() error {
		select {
		case <-done:
			return fmt.Errorf("knotd exited:\n%s", log.String())
		default:
		}
		return harness.AnswerIs(s.addr, "host0.example.org.", "10.0.0.1")
	})
	return s
}
