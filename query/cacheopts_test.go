package query

import (
	"sync/atomic"
	"testing"
	"time"

	"github.com/miekg/dns"

	"github.com/shardns/shardns/cache"
	"github.com/shardns/shardns/forward"
)

// countingUpstream answers SERVFAIL for names under fail. and an A
// record with TTL 20 for the others, and counts the questions it gets.
func countingUpstream(t *testing.T) (*forward.Forwarder, *atomic.Int32) {
	t.Helper()
	var asked atomic.Int32
	f := udpForwarder(t, func(w dns.ResponseWriter, r *dns.Msg) {
		asked.Add(1)
		m := new(dns.Msg)
		m.SetReply(r)
		if dns.IsSubDomain("fail.", r.Question[0].Name) {
			m.Rcode = dns.RcodeServerFailure
		} else {
			rr, _ := dns.NewRR(r.Question[0].Name + " 20 IN A 192.0.2.7")
			m.Answer = []dns.RR{rr}
		}
		w.WriteMsg(m)
	})
	return f, &asked
}

// TestForwardCacheOptions asks each name twice, the second time after
// a while, and checks what the client gets and whether the upstream was
// asked again.
func TestForwardCacheOptions(t *testing.T) {
	for _, c := range []struct {
		desc      string
		cfg       cache.Config
		name      string
		after     time.Duration
		rcode     int
		ttl       uint32 // of the second answer's record
		askedOnce bool
	}{
		{"an upstream's SERVFAIL kept for servfail", cache.Config{ServfailTTL: 5 * time.Second},
			"x.fail.", 4 * time.Second, dns.RcodeServerFailure, 0, true},
		{"and asked again after it", cache.Config{ServfailTTL: 5 * time.Second},
			"x.fail.", 6 * time.Second, dns.RcodeServerFailure, 0, false},
		{"SERVFAIL not kept without servfail", cache.Config{},
			"x.fail.", time.Second, dns.RcodeServerFailure, 0, false},
		{"TTLs counted down", cache.Config{},
			"www.example.", 5 * time.Second, dns.RcodeSuccess, 15, true},
		{"keepttl: TTLs as the upstream gave them", cache.Config{KeepTTL: true},
			"www.example.", 5 * time.Second, dns.RcodeSuccess, 20, true},
		{"a name in the cache's zones", cache.Config{Zones: []string{"example."}},
			"www.example.", time.Second, dns.RcodeSuccess, 19, true},
		{"a name outside them", cache.Config{Zones: []string{"example."}},
			"www.other.", time.Second, dns.RcodeSuccess, 20, false},
	} {
		t.Run(c.desc, func(t *testing.T) {
			f, asked := countingUpstream(t)
			now := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
			c.cfg.Size, c.cfg.SuccessMaxTTL, c.cfg.DenialMaxTTL = 64, time.Minute, time.Minute
			h := testHandler(t)
			h.Upstream = &Upstream{Forwarder: f, Cache: cache.New(c.cfg), Deadline: 2 * time.Second,
				Now: func() time.Time { return now }}
			late := Transport{Late: make(lateAnswers, 1)}
			if r := serveMaybeLate(t, h, pack(t, query(c.name, dns.TypeA)), late); r.Rcode != c.rcode {
				t.Fatalf("first answer %s", dns.RcodeToString[r.Rcode])
			}
			now = now.Add(c.after)
			r := serveMaybeLate(t, h, pack(t, query(c.name, dns.TypeA)), late)
			if r.Rcode != c.rcode || (c.ttl > 0 && (len(r.Answer) != 1 || r.Answer[0].Header().Ttl != c.ttl)) {
				t.Fatalf("second answer %s %v, want %s with TTL %d", dns.RcodeToString[r.Rcode], r.Answer,
					dns.RcodeToString[c.rcode], c.ttl)
			}
			if got := asked.Load() == 1; got != c.askedOnce {
				t.Fatalf("upstream asked %d times", asked.Load())
			}
		})
	}
}
