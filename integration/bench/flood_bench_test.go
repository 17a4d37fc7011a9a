package bench

import (
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"testing"
	"time"

	"github.com/shardns/shardns/integration/harness"
	"github.com/shardns/shardns/internal/testutil"
)

// benchFlood is the flood of the spec: the water torture at 50k queries
// a second from one address (SHARDNS_FLOOD_RATE to change it), and an
// ANY and SRV flood at 10k a second from 32 addresses in 8 prefixes,
// for 10 s.
func benchFlood(t *testing.T) floodLoad {
	rate := 50000
	if s := os.Getenv("SHARDNS_FLOOD_RATE"); s != "" {
		var err error
		if rate, err = strconv.Atoi(s); err != nil {
			t.Fatalf("SHARDNS_FLOOD_RATE: %v", err)
		}
	}
	return floodLoad{water: rate, any: 10000, anyPrefixes: 8, anySources: 32, duration: 10 * time.Second}
}

// TestFloodBench is `make bench`: the flood of TestFloodBinary at the
// spec's size against bin/shardns with its defaults, with the
// recommended limits (reloaded once during the flood), and CoreDNS 1.15
// serving the same names from a zone file (its build has no RRL; the
// rrl plugin is an external one). It prints the rate the flooders
// reached, the legitimate client's success rate and p50/p99 latency
// (first query to right answer, retries included), and the server's
// CPU; it asserts nothing about speed. Only with SHARDNS_BENCH=1.
func TestFloodBench(t *testing.T) {
	if os.Getenv("SHARDNS_BENCH") == "" {
		t.Skip("set SHARDNS_BENCH=1 (make bench)")
	}
	load := benchFlood(t)
	corednsBin := harness.BuildCoreDNS(t)
	t.Run("shardns defaults", func(t *testing.T) {
		s := startFloodServer(t, "")
		benchFloodRun(t, "shardns, defaults", s.Addr, s.Cmd.Process.Pid, load, nil)
	})
	t.Run("shardns limits", func(t *testing.T) {
		s := startFloodServer(t, floodLimits)
		benchFloodRun(t, "shardns, recommended limits", s.Addr, s.Cmd.Process.Pid, load,
			func() { s.reload(t, floodLimits, 7) })
	})
	t.Run("coredns", func(t *testing.T) {
		c := startZoneCoreDNS(t, corednsBin)
		benchFloodRun(t, "coredns 1.15, file + cache", c.addr, c.pid, load, nil)
	})
}

// benchFloodRun floods server, whose process is pid, and prints what
// the flooders reached and what the legitimate client saw.
func benchFloodRun(t *testing.T, name, server string, pid int, load floodLoad, during func()) {
	cpu0 := harness.CPUSeconds(t, pid)
	res := flood(t, server, load, during)
	cpu := harness.CPUSeconds(t, pid) - cpu0
	secs := res.elapsed.Seconds()
	t.Logf("%s: flood reached %.0f water torture + %.0f ANY/SRV queries a second; server %.2f cores, RSS %s",
		name, float64(res.water.sent.Load())/secs, float64(res.any.sent.Load())/secs, cpu/secs, harness.RSS(t, pid))
	res.log(t, name)
}

// clusterZone is the demo cluster's names that the flood tests ask, as
// a zone file for CoreDNS's file plugin.
const clusterZone = `$ORIGIN cluster.local.
@ 5 IN SOA ns.dns.cluster.local. hostmaster.cluster.local. 1 7200 1800 86400 5
@ 5 IN NS ns.dns.cluster.local.
ns.dns 5 IN A 127.0.0.1
redis.data.svc 5 IN A 10.96.20.10
kubernetes.default.svc 5 IN A 10.96.0.1
frontend.shop.svc 5 IN A 10.96.10.10
cart.shop.svc 5 IN A 10.96.10.11
postgres.data.svc 5 IN A 10.244.3.20
postgres.data.svc 5 IN A 10.244.3.21
postgres-0.postgres.data.svc 5 IN A 10.244.3.20
postgres-1.postgres.data.svc 5 IN A 10.244.3.21
_pg._tcp.postgres.data.svc 5 IN SRV 0 50 5432 postgres-0.postgres.data.svc
_pg._tcp.postgres.data.svc 5 IN SRV 0 50 5432 postgres-1.postgres.data.svc
`

// startZoneCoreDNS runs CoreDNS serving clusterZone with a 30 s cache,
// on a free loopback port, until test end.
func startZoneCoreDNS(t *testing.T, bin string) *benchServer {
	t.Helper()
	zone := filepath.Join(t.TempDir(), "cluster.local.zone")
	writeAt(t, zone, []byte(clusterZone))
	port := harness.FreePort(t)
	c := runCoreDNS(t, bin, "coredns", port,
		fmt.Appendf(nil, ".:%d {\n    bind 127.0.0.1\n    errors\n    file %s cluster.local\n    cache 30\n}\n", port, zone))
	testutil.Eventually(t, 20*time.Second, func() error {
		r, err := testutil.Exchange(c.addr, "udp", legitimateNames[0].name, 1)
		if err != nil {
			return err
		}
		return isAddress(r, legitimateNames[0].ip)
	})
	return c
}
