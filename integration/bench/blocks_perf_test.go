package bench

import (
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/miekg/dns"

	"github.com/shardns/shardns/integration/harness"
	"github.com/shardns/shardns/internal/testutil"
)

// blocksRounds is how many alternating rounds TestBlocksPerf measures;
// the median round is reported, as the shared machine's load drifts.
const blocksRounds = 7

// blocksRoundSeconds is the length of one dnsperf run at full load.
const blocksRoundSeconds = 10

// TestBlocksPerf is part of `make bench`: what a chain per server block
// costs. Two shardns processes serve the same zone files through serve
// --corefile: one with a single root block, one with NodeLocal DNSCache's
// four blocks on the same port (cluster.local, in-addr.arpa, ip6.arpa
// and the root, each with cache settings of its own, so each becomes a
// chain of its own and every question is routed to its block first).
// Every name of the mix is in a zone file, answered on the fast path;
// the forwarders are never asked. The same dnsperf run at full load
// alternates between the two, blocksRounds times, and the median round's
// queries per server CPU-second of each, and the median of the rounds'
// ratios, are printed. It asserts nothing about speed; it fails when the
// two answer a question differently. It runs only with SHARDNS_BENCH=1.
func TestBlocksPerf(t *testing.T) {
	if os.Getenv("SHARDNS_BENCH") == "" {
		t.Skip("set SHARDNS_BENCH=1 (make bench)")
	}
	dir := t.TempDir()
	queries := writeBlocksZones(t, dir)
	qfile := filepath.Join(dir, "queries.txt")
	if err := os.WriteFile(qfile, []byte(strings.Join(queries, "\n")+"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	servers := []*benchServer{
		startBlocks(t, dir, "shardns-1-block", oneBlockCorefile),
		startBlocks(t, dir, "shardns-4-blocks", fourBlocksCorefile),
	}
	for _, s := range servers {
		testutil.Eventually(t, 30*time.Second, func() error {
			return harness.AnswerIs(s.addr, "svc0.ns0.svc.cluster.local.", "10.96.0.1")
		})
		s.dnsperf(t, qfile, "-l", "3") // warm the packed answers
	}
	compareAnswers(t, servers[0], servers[1], queries)
	for round := range blocksRounds {
		order := servers
		if round%2 == 1 {
			order = []*benchServer{servers[1], servers[0]}
		}
		for _, s := range order {
			s.measureLoad(t, round+1, qfile)
		}
	}
	one, four := servers[0], servers[1]
	var ratios []float64
	for i := range one.runs {
		ratios = append(ratios, four.runs[i].perCPUSecond()/one.runs[i].perCPUSecond())
		t.Logf("  round %d: %.0f / %.0f = %.3f×", i+1, four.runs[i].perCPUSecond(), one.runs[i].perCPUSecond(), ratios[i])
	}
	t.Logf("4 blocks/1 block queries per server CPU-second (median of %d rounds): %.0f / %.0f, median ratio %.3f× "+
		"(1.0: routing to a block's chain costs nothing; rounds spread %.3f–%.3f×)",
		blocksRounds, four.medianPerCPUSecond(), one.medianPerCPUSecond(), harness.Median(ratios), slices.Min(ratios), slices.Max(ratios))
}

// measureLoad is one dnsperf run of blocksRoundSeconds at full load
// (-c 4 -q 200), with the server's CPU time read around it and
// dnsperf's own CPU, the share of the two cores the server did not get.
func (s *benchServer) measureLoad(t *testing.T, round int, qfile string) {
	host, port, _ := strings.Cut(s.addr, ":")
	cpu0 := harness.CPUSeconds(t, s.pid)
	out, clientCPU, err := dnsperfCPU(t, "-s", host, "-p", port, "-d", qfile, "-l", fmt.Sprint(blocksRoundSeconds), "-c", "4", "-q", "200")
	if err != nil {
		t.Fatal(err)
	}
	run := benchRun{cpu: harness.CPUSeconds(t, s.pid) - cpu0, queries: field(out, `Queries completed:\s+(\d+)`)}
	t.Logf("%s round %d: max throughput %.0f qps, server CPU %.1f s, %.0f queries per server CPU-second, "+
		"latency avg %s s, lost %s, answers of %s bytes on average, dnsperf CPU %.1f s, RSS %s",
		s.name, round, field(out, `Queries per second:\s+([\d.]+)`), run.cpu, run.perCPUSecond(),
		fieldStr(out, `Average Latency \(s\):\s+([\d.]+)`), fieldStr(out, `Queries lost:\s+(\d+)`),
		fieldStr(out, `response (\d+)`), clientCPU, harness.RSS(t, s.pid))
	s.runs = append(s.runs, run)
}

// medianPerCPUSecond is the median round's queries per server CPU-second.
func (s *benchServer) medianPerCPUSecond() float64 {
	var v []float64
	for _, r := range s.runs {
		v = append(v, r.perCPUSecond())
	}
	return harness.Median(v)
}

// oneBlockCorefile serves every zone file from the root block. Its
// arguments: the DNS port, the folder of the zone files, the metrics port.
const oneBlockCorefile = `.:%[1]d {
    errors
    cache 30
    bind 127.0.0.1
    file %[2]s/cluster.local.db cluster.local
    file %[2]s/reverse4.db 10.in-addr.arpa
    file %[2]s/reverse6.db 6.9.0.0.0.1.0.0.0.0.d.f.ip6.arpa
    file %[2]s/example.org.db example.org
    forward . 127.0.0.1:9
    prometheus 127.0.0.1:%[3]d
}
`

// fourBlocksCorefile is NodeLocal DNSCache's four blocks on one port, each
// answering its own zone file. The blocks' cache settings differ (the
// cluster block's are NodeLocal DNSCache's) so that no block shares the
// root block's chain.
const fourBlocksCorefile = `cluster.local:%[1]d {
    errors
    cache {
        success 9984 30
        denial 9984 5
    }
    bind 127.0.0.1
    file %[2]s/cluster.local.db
    forward . 127.0.0.1:9 {
        force_tcp
    }
    prometheus 127.0.0.1:%[3]d
}
in-addr.arpa:%[1]d {
    errors
    cache 20
    bind 127.0.0.1
    file %[2]s/reverse4.db 10.in-addr.arpa
    forward . 127.0.0.1:9 {
        force_tcp
    }
    prometheus 127.0.0.1:%[3]d
}
ip6.arpa:%[1]d {
    errors
    cache 10
    bind 127.0.0.1
    file %[2]s/reverse6.db 6.9.0.0.0.1.0.0.0.0.d.f.ip6.arpa
    forward . 127.0.0.1:9 {
        force_tcp
    }
    prometheus 127.0.0.1:%[3]d
}
.:%[1]d {
    errors
    cache 30
    bind 127.0.0.1
    file %[2]s/example.org.db example.org
    forward . 127.0.0.1:9
    prometheus 127.0.0.1:%[3]d
}
`

// startBlocks runs serve --corefile with corefile's text for the zone
// files in dir, and stops it at test end.
func startBlocks(t *testing.T, dir, name, corefile string) *benchServer {
	t.Helper()
	port := harness.FreePort(t)
	path := filepath.Join(dir, name+".Corefile")
	if err := os.WriteFile(path, fmt.Appendf(nil, corefile, port, dir, harness.FreePort(t)), 0o644); err != nil {
		t.Fatal(err)
	}
	p := harness.Start(t, harness.Options{Args: []string{"--corefile", path}})
	return &benchServer{name: name, addr: p.Addr, pid: p.Cmd.Process.Pid}
}

// writeBlocksZones writes the four zone files into dir and returns the
// dnsperf questions about them: per service, A of its name in the
// cluster zone, PTR of its IPv4 and IPv6 addresses, and A of a host of
// example.org, the root block's zone.
func writeBlocksZones(t *testing.T, dir string) []string {
	t.Helper()
	const services = 500
	soa := func(origin string) string {
		return fmt.Sprintf("%s 30 IN SOA ns.dns.cluster.local. hostmaster.cluster.local. 1 7200 1800 86400 30\n%[1]s 30 IN NS ns.dns.cluster.local.\n", origin)
	}
	files := map[string]*strings.Builder{}
	for _, f := range []struct{ file, origin string }{{"cluster.local.db", "cluster.local."}, {"reverse4.db", "10.in-addr.arpa."},
		{"reverse6.db", "6.9.0.0.0.1.0.0.0.0.d.f.ip6.arpa."}, {"example.org.db", "example.org."}} {
		files[f.file] = &strings.Builder{}
		files[f.file].WriteString(soa(f.origin))
	}
	fmt.Fprintf(files["cluster.local.db"], "ns.dns.cluster.local. 30 IN A 10.96.0.10\n")
	var queries []string
	for i := range services {
		name := fmt.Sprintf("svc%d.ns%d.svc.cluster.local.", i, i%20)
		v4 := fmt.Sprintf("10.96.%d.%d", i/250, 1+i%250)
		v6 := fmt.Sprintf("fd00:10:96::%x", i+1)
		ptr4, _ := dns.ReverseAddr(v4)
		ptr6, _ := dns.ReverseAddr(v6)
		host := fmt.Sprintf("host%d.example.org.", i)
		fmt.Fprintf(files["cluster.local.db"], "%[1]s 30 IN A %[2]s\n%[1]s 30 IN AAAA %[3]s\n", name, v4, v6)
		fmt.Fprintf(files["reverse4.db"], "%s 30 IN PTR %s\n", ptr4, name)
		fmt.Fprintf(files["reverse6.db"], "%s 30 IN PTR %s\n", ptr6, name)
		fmt.Fprintf(files["example.org.db"], "%s 30 IN A 192.0.2.%d\n", host, 1+i%250)
		queries = append(queries, name+" A", ptr4+" PTR", ptr6+" PTR", host+" A")
	}
	for file, b := range files {
		if err := os.WriteFile(filepath.Join(dir, file), []byte(b.String()), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	return queries
}
