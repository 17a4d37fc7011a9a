package bench

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/miekg/dns"

	"github.com/shardns/shardns/integration/harness"
	"github.com/shardns/shardns/internal/testutil"
)

// floodLimits are the flood settings docs/configuration.md recommends
// ("Settings against floods"): a per-address query rate above what a busy
// pod or a node-local cache sends, and RRL rates above what a node's pods
// ask of one name.
const floodLimits = `
  rateLimit: {perSecond: 2000}
  rrl: {responsesPerSecond: 500, nxdomainsPerSecond: 200}`

// floodConfig serves the demo cluster on port with limits under dns
// (none: the defaults) and the records' TTL ttl.
func floodConfig(port int, limits string, ttl int) string {
	return fmt.Sprintf(`dns:
  listen: ["127.0.0.1:%d"]%s
http: {listen: "127.0.0.1:0", lameduck: 0s}
kubernetes: {enabled: false, ttl: %d}
manifests: {files: [demo-cluster.yaml]}
cluster: {replicationFactor: 0}
forward: {upstreams: []}
`, port, limits, ttl)
}

// floodServer is bin/shardns serving the demo cluster, and its
// configuration file.
type floodServer struct {
	*harness.Process
	dir, http string
	port      int
}

func startFloodServer(t *testing.T, limits string) *floodServer {
	t.Helper()
	s := &floodServer{dir: t.TempDir(), port: harness.FreePort(t)}
	demo, err := os.ReadFile("../../deploy/local/demo-cluster.yaml")
	if err != nil {
		t.Fatal(err)
	}
	writeAt(t, filepath.Join(s.dir, "demo-cluster.yaml"), demo)
	writeAt(t, filepath.Join(s.dir, "shardns.yaml"), []byte(floodConfig(s.port, limits, 5)))
	s.Process = harness.Start(t, harness.Options{Args: []string{"--config", filepath.Join(s.dir, "shardns.yaml")}})
	s.WaitReady(t)
	s.http = s.HTTPAddr(t)
	return s
}

// reload rewrites the configuration with limits and TTL ttl, as a
// ConfigMap update does (a new file renamed over the old), sends SIGHUP
// and waits until answers carry the new TTL.
func (s *floodServer) reload(t *testing.T, limits string, ttl int) {
	t.Helper()
	path := filepath.Join(s.dir, "shardns.yaml")
	writeAt(t, path+".new", []byte(floodConfig(s.port, limits, ttl)))
	if err := os.Rename(path+".new", path); err != nil {
		t.Fatal(err)
	}
	s.Cmd.Process.Signal(syscall.SIGHUP)
	testutil.Eventually(t, 30*time.Second, func() error {
		r, err := testutil.Exchange(s.Addr, "tcp", legitimateNames[0].name, dns.TypeA)
		if err != nil {
			return err
		}
		if len(r.Answer) != 1 || r.Answer[0].Header().Ttl != uint32(ttl) {
			return fmt.Errorf("answer %v, want TTL %d", r.Answer, ttl)
		}
		return nil
	})
}

func writeAt(t testing.TB, path string, data []byte) {
	t.Helper()
	if err := os.WriteFile(path, data, 0o644); err != nil {
		t.Fatal(err)
	}
}

// floodLoad is the size of a flood run.
type floodLoad struct {
	water                   int // water torture queries a second, from 127.0.10.1
	any                     int // ANY and SRV queries a second from anySources addresses
	anyPrefixes, anySources int
	duration                time.Duration // at least, and at least a third of it after during returns
}

// floodResult is what a flood run saw.
type floodResult struct {
	water, any floodStats
	legit      legitResult
	elapsed    time.Duration
}

// flood runs both floods against server, and the legitimate client
// from 127.0.20.1 at about 1,000 queries a second; during is called a
// third of the way in.
func flood(t *testing.T, server string, load floodLoad, during func()) *floodResult {
	t.Helper()
	res := &floodResult{}
	ctx, stop := context.WithCancel(context.Background())
	defer stop()
	start := time.Now()
	water := waterTorture(ctx, t, "127.0.10.1", server, "data.svc.cluster.local.", load.water, &res.water)
	floods := anyFlood(ctx, t, server, load.anyPrefixes, load.anySources, load.any, &res.any)
	legitCtx, stopLegit := context.WithCancel(ctx)
	var wg sync.WaitGroup
	wg.Go(func() { res.legit = legitimateClient(legitCtx, t, "127.0.20.1", server) })

	third := load.duration / 3
	time.Sleep(third) // the load runs meanwhile: this is its length, not a wait for a state
	if during != nil {
		during()
	}
	time.Sleep(max(third, load.duration-time.Since(start)))
	stopLegit()
	wg.Wait()
	res.elapsed = time.Since(start)
	stop()
	water.Wait()
	floods.Wait()
	return res
}

func (r *floodResult) log(t *testing.T, what string) {
	t.Logf("%s, %v: water torture: %v", what, r.elapsed.Round(time.Millisecond), &r.water)
	t.Logf("%s: ANY flood: %v", what, &r.any)
	t.Logf("%s: legitimate client: %v (last error: %v)", what, r.legit, r.legit.last)
}

// ciFlood fits a shared 2-core machine beside other builds: the water
// torture from one address at five times the recommended rate limit,
// the ANY flood from 16 addresses in 4 prefixes at twice the
// recommended RRL rate per prefix and name.
var ciFlood = floodLoad{water: 10000, any: 8000, anyPrefixes: 4, anySources: 16, duration: 4500 * time.Millisecond}

// The built binary serving the demo cluster under a water torture flood
// from one address and an ANY and SRV flood from 16 addresses, beside a
// client asking about 1,000 times a second from another prefix: with
// the recommended limits, at least 99.9 % of that client's queries are
// answered right, also across a reload during the flood, and RRL's
// limited answers go out empty with TC (never without it). With the
// defaults nothing is limited: the flooders get every answer in full,
// more bytes than they sent.
func TestFloodBinary(t *testing.T) {
	var ampDefault float64
	t.Run("defaults", func(t *testing.T) {
		s := startFloodServer(t, "")
		res := flood(t, s.Addr, ciFlood, nil)
		res.log(t, "defaults")
		if n := res.water.slipped.Load() + res.any.slipped.Load(); n != 0 {
			t.Errorf("%d answers slipped without dns.rrl", n)
		}
		ampDefault = float64(res.any.bytesOut.Load()) / float64(res.any.bytesIn.Load())
		if ampDefault <= 1 {
			t.Errorf("without limits the ANY flood got %.2f× its bytes back, want more than it sent", ampDefault)
		}
	})
	t.Run("limits", func(t *testing.T) {
		s := startFloodServer(t, floodLimits)
		res := flood(t, s.Addr, ciFlood, func() { s.reload(t, floodLimits, 7) })
		res.log(t, "limits")
		checkLegitimate(t, res.legit)
		for name, st := range map[string]*floodStats{"water torture": &res.water, "ANY flood": &res.any} {
			if st.slipped.Load() == 0 {
				t.Errorf("%s: no limited answer slipped with TC: %v", name, st)
			}
			if st.bare.Load() != 0 {
				t.Errorf("%s: %d answers without records and without TC", name, st.bare.Load())
			}
		}
		if amp := float64(res.any.bytesOut.Load()) / float64(res.any.bytesIn.Load()); ampDefault != 0 && amp >= ampDefault {
			t.Errorf("ANY flood: %.2f× its bytes back with RRL, %.2f× without", amp, ampDefault)
		}
		if got := harness.ScrapeLabelled(t, s.http, "shardns_dns_rrl_responses_total", `action="slipped"`); got == 0 {
			t.Error("shardns_dns_rrl_responses_total{action=\"slipped\"} did not count")
		}
		if got := harness.ScrapeLabelled(t, s.http, "shardns_dns_dropped_total", `reason="ratelimit"`); got == 0 {
			t.Error("shardns_dns_dropped_total{reason=\"ratelimit\"} did not count the water torture")
		}
	})
}

// checkLegitimate asserts that at least 99.9 % of the legitimate
// client's queries were answered right, out of at least a second's worth.
func checkLegitimate(t *testing.T, r legitResult) {
	t.Helper()
	if r.asked < 500 {
		t.Errorf("the legitimate client asked %d questions, too few to judge", r.asked)
	}
	if r.right*1000 < r.asked*999 {
		t.Errorf("legitimate client: %v, want at least 99.9%% right (last error: %v)", r, r.last)
	}
}
