package node

import (
	"testing"
	"time"

	"github.com/miekg/dns"

	"github.com/shardns/shardns/cache"
	"github.com/shardns/shardns/config"
)

// The owners' cache keeps their answers past expiry for a window, the
// Corefile's serve_stale when it sets one: a replica that hears no owner
// in time answers stale rather than SERVFAIL.
func TestOwnersCacheServesStale(t *testing.T) {
	for _, tc := range []struct {
		name        string
		yaml        string
		stale, gone time.Duration // after the answer's TTL
	}{
		{"default window", "", 50 * time.Second, 2 * time.Minute},
		{"cache.serveStale", "cache: {serveStale: 2h}\n", time.Hour, 3 * time.Hour},
	} {
		cfg, err := config.Parse([]byte("kubernetes: {enabled: false}\n" + tc.yaml))
		if err != nil {
			t.Fatal(err)
		}
		c := ownersCache(cfg)
		m := new(dns.Msg)
		m.SetQuestion("web.ns.svc.cluster.local.", dns.TypeA)
		rr, _ := dns.NewRR("web.ns.svc.cluster.local. 5 IN A 10.0.0.1")
		m.Answer = []dns.RR{rr}
		key := cache.Key{Name: "web.ns.svc.cluster.local.", Type: dns.TypeA, Class: dns.ClassINET}
		at := time.Unix(1e9, 0)
		c.Put(key, m, at)
		if _, st, _ := c.Get(key, at.Add(5*time.Second+tc.stale)); st != cache.Stale {
			t.Errorf("%s: %v past its TTL: state %d, want stale", tc.name, tc.stale, st)
		}
		if _, st, _ := c.Get(key, at.Add(5*time.Second+tc.gone)); st != cache.Miss {
			t.Errorf("%s: %v past its TTL: state %d, want gone", tc.name, tc.gone, st)
		}
	}
}
