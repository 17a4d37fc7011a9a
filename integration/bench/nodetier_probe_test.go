package bench

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/miekg/dns"

	"github.com/shardns/shardns/integration/harness"
	"github.com/shardns/shardns/internal/testutil"
)

// nodeLocalProbe is a real node-local process beside the simulated
// nodes, its clients asking the names of a simulated node's clients at
// the same rate: its owners' cache hit rate is what a node sees under the
// churn. With SHARDNS_NODE_BASELINE_BIN, a second one runs that binary
// (one built before owners told caches of changes, say), for the hit
// rate without invalidations.
type nodeLocalProbe struct {
	label  string
	p      *harness.Process
	http   string
	asked  atomic.Int64 // questions its clients asked
	failed atomic.Int64 // questions not answered NOERROR with records
}

// startNodeLocalProbe starts bin in mode nodelocal, reading the ring from
// replicas, with the node-local credential in credFile.
func startNodeLocalProbe(t *testing.T, bin, label string, replicas []string, credFile string) *nodeLocalProbe {
	t.Helper()
	quoted := make([]string, len(replicas))
	for i, r := range replicas {
		quoted[i] = fmt.Sprintf("%q", r)
	}
	cfg := fmt.Sprintf(`mode: nodelocal
dns: {listen: ["127.0.0.1:0"]}
http: {listen: "127.0.0.1:0", lameduck: 0s}
forward: {upstreams: []}
cluster:
  nodeName: probe-%s
  replicas: [%s]
  remote: "127.0.0.1:%d"
  credentialFile: %s
`, label, strings.Join(quoted, ", "), harness.FreePort(t), credFile)
	path := filepath.Join(t.TempDir(), "shardns.yaml")
	if err := os.WriteFile(path, []byte(cfg), 0o644); err != nil {
		t.Fatal(err)
	}
	p := harness.Start(t, harness.Options{Cmd: exec.Command(bin, "serve", "--config", path)})
	p.WaitReady(t)
	return &nodeLocalProbe{label: label, p: p, http: p.HTTPAddr(t)}
}

// askProbes has each probe's clients ask every name once every interval
// until quit closes.
func askProbes(probes []*nodeLocalProbe, names []simName, every time.Duration, quit <-chan struct{}) *sync.WaitGroup {
	var wg sync.WaitGroup
	for _, p := range probes {
		wg.Go(func() {
			tick := time.NewTicker(every)
			defer tick.Stop()
			for {
				for _, n := range names {
					p.asked.Add(1)
					r, err := testutil.Exchange(p.p.Addr, "udp", n.fqdn, dns.TypeA)
					if err != nil || r.Rcode != dns.RcodeSuccess || len(r.Answer) == 0 {
						p.failed.Add(1)
					}
				}
				select {
				case <-quit:
					return
				case <-tick.C:
				}
			}
		})
	}
	return &wg
}

// probeWindow is the probes' counts at the start of a window: the
// questions their clients asked, and those of them that missed the
// cache and were asked of an owner.
type probeWindow struct {
	asked, failed []int64
	missed        []float64
}

func startProbeWindow(t *testing.T, probes []*nodeLocalProbe) probeWindow {
	t.Helper()
	var w probeWindow
	for _, p := range probes {
		w.asked, w.failed = append(w.asked, p.asked.Load()), append(w.failed, p.failed.Load())
		w.missed = append(w.missed, harness.Scrape(t, p.http, "shardns_cluster_cache_misses_total"))
	}
	return w
}

// hitRates are, by label, the share of each probe's clients' questions
// since w that it answered without asking an owner, and the questions
// that failed meanwhile. A miss counts once however many owners it was
// asked of.
func (w probeWindow) hitRates(t *testing.T, probes []*nodeLocalProbe) (map[string]float64, int64) {
	t.Helper()
	rates, failed := map[string]float64{}, int64(0)
	for i, p := range probes {
		if asked := p.asked.Load() - w.asked[i]; asked > 0 {
			rates[p.label] = 1 - (harness.Scrape(t, p.http, "shardns_cluster_cache_misses_total")-w.missed[i])/float64(asked)
		}
		failed += p.failed.Load() - w.failed[i]
	}
	return rates, failed
}
