package node

import (
	"fmt"
	"os"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/miekg/dns"

	"github.com/shardns/shardns/internal/testutil"
)

// startWatched starts a demo node whose config file is watched.
func startWatched(t *testing.T, cfgText string) (*Node, string, *testutil.SyncBuffer) {
	t.Helper()
	return startDemoNode(t, cfgText, true)
}

const watchedConfig = `
dns: {listen: ["127.0.0.1:0"]}
http: {listen: "127.0.0.1:0"}
kubernetes: {enabled: false, ttl: %d}
manifests: {files: [demo-cluster.yaml], interval: 50ms}
forward: {upstreams: []}
`

// A reload applies without dropping a query: queries run all along, and
// every one gets a correct answer, from the old or the new configuration.
func TestReloadWithQueriesInFlight(t *testing.T) {
	n, path, _ := startWatched(t, fmt.Sprintf(watchedConfig, 5))
	addr := n.DNSAddrs()[0]

	var stop atomic.Bool
	var wg sync.WaitGroup
	var asked, bad atomic.Int64
	var firstBad atomic.Value
	for range 2 {
		wg.Go(func() {
			for !stop.Load() {
				asked.Add(1)
				r, err := testutil.Exchange(addr, "udp", "frontend.shop.svc.cluster.local.", dns.TypeA)
				if err != nil || r.Rcode != dns.RcodeSuccess || len(r.Answer) != 1 ||
					r.Answer[0].(*dns.A).A.String() != "10.96.10.10" {
					bad.Add(1)
					firstBad.CompareAndSwap(nil, fmt.Sprintf("%v %v", r, err))
				}
			}
		})
	}
	next := strings.Replace(fmt.Sprintf(watchedConfig, 7), `listen: ["127.0.0.1:0"]`, `listen: ["127.0.0.1:0", "127.0.0.2:0"]`, 1)
	if err := os.WriteFile(path, []byte(next), 0o644); err != nil {
		t.Fatal(err)
	}
	n.ReloadNow()
	testutil.Eventually(t, 10*time.Second, func() error {
		r, err := testutil.Exchange(addr, "udp", "frontend.shop.svc.cluster.local.", dns.TypeA)
		if err != nil {
			return err
		}
		if r.Answer[0].Header().Ttl != 7 {
			return fmt.Errorf("ttl %d, want the reloaded 7", r.Answer[0].Header().Ttl)
		}
		return nil
	})
	stop.Store(true)
	wg.Wait()
	if bad.Load() > 0 {
		t.Fatalf("%d of %d queries failed during the reload; first: %v", bad.Load(), asked.Load(), firstBad.Load())
	}
	addrs := n.DNSAddrs()
	if len(addrs) != 2 || addrs[0] != addr {
		t.Fatalf("listeners after reload: %v, want the same first socket and a second one", addrs)
	}
	r, err := testutil.Exchange(addrs[1], "tcp", "redis.data.svc.cluster.local.", dns.TypeA)
	if err != nil || len(r.Answer) != 1 {
		t.Fatalf("new listener: %v %v", r, err)
	}
}

// An invalid change is logged and the running configuration keeps serving.
func TestReloadRejectsInvalidConfig(t *testing.T) {
	n, path, logs := startWatched(t, fmt.Sprintf(watchedConfig, 5))
	addr := n.DNSAddrs()[0]
	if err := os.WriteFile(path, []byte(fmt.Sprintf(watchedConfig, 99999)), 0o644); err != nil {
		t.Fatal(err)
	}
	n.ReloadNow()
	testutil.Eventually(t, 10*time.Second, func() error {
		if !strings.Contains(logs.String(), "kubernetes.ttl") {
			return fmt.Errorf("rejection not logged yet")
		}
		return nil
	})
	r, err := testutil.Exchange(addr, "udp", "frontend.shop.svc.cluster.local.", dns.TypeA)
	if err != nil || len(r.Answer) != 1 || r.Answer[0].Header().Ttl != 5 {
		t.Fatalf("after a rejected reload: %v %v", r, err)
	}
}
