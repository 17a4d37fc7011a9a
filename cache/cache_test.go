package cache

import (
	"fmt"
	"testing"
	"time"

	"github.com/miekg/dns"
)

func reply(rcode int, answer []string, ns []string) *dns.Msg {
	m := new(dns.Msg)
	m.SetQuestion("example.com.", dns.TypeA)
	m.Response = true
	m.Rcode = rcode
	for _, s := range answer {
		rr, _ := dns.NewRR(s)
		m.Answer = append(m.Answer, rr)
	}
	for _, s := range ns {
		rr, _ := dns.NewRR(s)
		m.Ns = append(m.Ns, rr)
	}
	return m
}

var (
	t0  = time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	key = Key{Name: "example.com.", Type: dns.TypeA, Class: dns.ClassINET}
	soa = "example.com. 3600 IN SOA ns. host. 1 2 3 4 60"
)

func testCache() *Cache {
	return New(Config{Size: 64, SuccessMaxTTL: 30 * time.Second, DenialMaxTTL: 10 * time.Second,
		MinTTL: 2 * time.Second, PrefetchHits: 3, PrefetchPercent: 20, ServeStale: time.Minute})
}

func ttlAt(t *testing.T, c *Cache, at time.Duration) (uint32, State) {
	t.Helper()
	m, st, _ := c.Get(key, t0.Add(at))
	if m == nil {
		return 0, st
	}
	if len(m.Answer) > 0 {
		return m.Answer[0].Header().Ttl, st
	}
	return m.Ns[0].Header().Ttl, st
}

func TestCachePositiveTTL(t *testing.T) {
	cases := []struct {
		name    string
		ttl     int
		at      time.Duration
		wantTTL uint32
		want    State
	}{
		{"counts down", 20, 5 * time.Second, 15, Fresh},
		{"capped at success max", 300, 0, 30, Fresh},
		{"capped then counted", 300, 10 * time.Second, 20, Fresh},
		{"floored at min TTL", 0, time.Second, 0, Fresh},
		{"stale after expiry", 20, 25 * time.Second, StaleTTL, Stale},
		{"gone after the stale window", 20, 2 * time.Minute, 0, Miss},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			c := testCache()
			if !c.Put(key, reply(dns.RcodeSuccess, []string{fmt.Sprintf("example.com. %d IN A 1.2.3.4", tc.ttl)}, nil), t0) {
				t.Fatal("not cached")
			}
			ttl, st := ttlAt(t, c, tc.at)
			if ttl != tc.wantTTL || st != tc.want {
				t.Fatalf("ttl %d state %d, want %d %d", ttl, st, tc.wantTTL, tc.want)
			}
		})
	}
}

func TestCacheNegative(t *testing.T) {
	c := testCache()
	if !c.Put(key, reply(dns.RcodeNameError, nil, []string{soa}), t0) {
		t.Fatal("NXDOMAIN with SOA not cached")
	}
	if ttl, st := ttlAt(t, c, 4*time.Second); st != Fresh || ttl != 6 {
		t.Fatalf("denial: ttl %d state %d, want 6 (capped at 10, 4 s old)", ttl, st)
	}
	if _, st := ttlAt(t, c, 11*time.Second); st != Stale {
		t.Fatalf("denial after its cap: state %d, want stale", st)
	}
	for name, m := range map[string]*dns.Msg{
		"SERVFAIL":       reply(dns.RcodeServerFailure, nil, nil),
		"REFUSED":        reply(dns.RcodeRefused, nil, nil),
		"NODATA, no SOA": reply(dns.RcodeSuccess, nil, nil),
		"truncated": func() *dns.Msg {
			m := reply(dns.RcodeSuccess, []string{"example.com. 5 IN A 1.2.3.4"}, nil)
			m.Truncated = true
			return m
		}(),
		"NXDOMAIN no SOA": reply(dns.RcodeNameError, nil, nil),
	} {
		if testCache().Put(key, m, t0) {
			t.Errorf("%s was cached", name)
		}
	}
}

func TestCacheDoesNotShareRecords(t *testing.T) {
	c := testCache()
	c.Put(key, reply(dns.RcodeSuccess, []string{"example.com. 20 IN A 1.2.3.4"}, nil), t0)
	m, _, _ := c.Get(key, t0)
	m.Answer[0].Header().Ttl = 9999
	if ttl, _ := ttlAt(t, c, 0); ttl != 20 {
		t.Fatalf("a caller's change reached the cache: ttl %d", ttl)
	}
}

func TestCacheSizeBound(t *testing.T) {
	c := New(Config{Size: 32, SuccessMaxTTL: time.Minute})
	for i := range 1000 {
		k := Key{Name: fmt.Sprintf("n%d.example.", i), Type: dns.TypeA}
		c.Put(k, reply(dns.RcodeSuccess, []string{"example.com. 20 IN A 1.2.3.4"}, nil), t0)
	}
	if n := c.Len(); n > 32 {
		t.Fatalf("%d entries, want at most 32", n)
	}
}

func TestCachePrefetchOncePopularAndNearExpiry(t *testing.T) {
	c := testCache()
	c.Put(key, reply(dns.RcodeSuccess, []string{"example.com. 30 IN A 1.2.3.4"}, nil), t0)
	for i := range 3 {
		if _, _, pf := c.Get(key, t0.Add(time.Second)); pf {
			t.Fatalf("prefetch on hit %d, early in the TTL", i+1)
		}
	}
	if _, _, pf := c.Get(key, t0.Add(26*time.Second)); !pf {
		t.Fatal("popular entry near expiry: no prefetch")
	}
	if _, _, pf := c.Get(key, t0.Add(27*time.Second)); pf {
		t.Fatal("prefetch asked twice")
	}
}

// bigAnswer is an answer for name with n A records, as a domain a client
// controls can make its upstream send.
func bigAnswer(name string, n int) *dns.Msg {
	m := new(dns.Msg)
	m.SetQuestion(name, dns.TypeA)
	m.Response = true
	for i := range n {
		m.Answer = append(m.Answer, &dns.A{Hdr: dns.RR_Header{Name: name, Rrtype: dns.TypeA, Class: dns.ClassINET, Ttl: 300},
			A: []byte{10, byte(i >> 16), byte(i >> 8), byte(i)}})
	}
	return m
}

func TestCacheIsBoundedInBytes(t *testing.T) {
	const maxBytes = 1 << 20
	c := New(Config{Size: 10000, MaxBytes: maxBytes, SuccessMaxTTL: 30 * time.Second, DenialMaxTTL: 10 * time.Second})
	// Answers of 200 records (about 3 KB on the wire, 29 KB counted)
	// under many names: entries alone would let 10,000 of them in.
	kept := 0
	for i := range 200 {
		name := fmt.Sprintf("n%d.attacker.example.", i)
		if c.Put(Key{Name: name, Type: dns.TypeA, Class: dns.ClassINET}, bigAnswer(name, 200), t0) {
			kept++
		}
		if b := c.Bytes(); b > maxBytes {
			t.Fatalf("after %d answers the cache holds %d bytes, over its %d", i+1, b, maxBytes)
		}
	}
	if c.Len() == 0 || c.Len() > 2*shards {
		t.Errorf("%d of %d answers held, want at most two a shard (each is over a third of its share)", c.Len(), kept)
	}
	// An answer larger than a shard's share is not cached at all.
	huge := bigAnswer("huge.attacker.example.", 4000)
	if EntryCost(huge) <= maxBytes/shards {
		t.Fatalf("test answer too small: %d", EntryCost(huge))
	}
	if c.Put(Key{Name: "huge.attacker.example.", Type: dns.TypeA, Class: dns.ClassINET}, huge, t0) {
		t.Error("an answer over a shard's share was cached")
	}
	// Small answers still fit, many of them.
	for i := range 1000 {
		name := fmt.Sprintf("s%d.example.", i)
		if !c.Put(Key{Name: name, Type: dns.TypeA, Class: dns.ClassINET}, bigAnswer(name, 1), t0) {
			t.Fatalf("a small answer was not cached")
		}
	}
	if c.Bytes() > maxBytes {
		t.Errorf("%d bytes held, over %d", c.Bytes(), maxBytes)
	}
}

func TestCacheBytesFollowReplacedAndExpiredEntries(t *testing.T) {
	c := New(Config{Size: 100, MaxBytes: 1 << 20, SuccessMaxTTL: 30 * time.Second})
	k := Key{Name: "a.example.", Type: dns.TypeA, Class: dns.ClassINET}
	c.Put(k, bigAnswer("a.example.", 10), t0)
	c.Put(k, bigAnswer("a.example.", 3), t0) // replaced: only the second counts
	if want := EntryCost(bigAnswer("a.example.", 3)); c.Bytes() != want {
		t.Errorf("after a replace %d bytes, want %d", c.Bytes(), want)
	}
	if _, st, _ := c.Get(k, t0.Add(time.Hour)); st != Miss {
		t.Fatalf("state %v an hour later, want Miss", st)
	}
	if c.Bytes() != 0 || c.Len() != 0 {
		t.Errorf("after expiry %d bytes in %d entries, want none", c.Bytes(), c.Len())
	}
}

// An entry found outdated by other means than its TTL goes; a newer
// answer stored since stays. Its stored time is the time Put was given,
// and no entry outlives MaxLife.
func TestCacheRemoveOutdatedEntry(t *testing.T) {
	c := testCache()
	c.Put(key, reply(dns.RcodeSuccess, []string{"example.com. 300 IN A 10.0.0.1"}, nil), t0)
	old, st, _ := c.Peek(key, t0.Add(time.Second))
	if st != Fresh || !old.Entry.Stored().Equal(t0) {
		t.Fatalf("peek: state %d, stored %v; want fresh, stored %v", st, old.Entry.Stored(), t0)
	}
	c.Put(key, reply(dns.RcodeSuccess, []string{"example.com. 300 IN A 10.0.0.2"}, nil), t0.Add(2*time.Second))
	c.Remove(key, old.Entry)
	if m, st, _ := c.Get(key, t0.Add(3*time.Second)); st != Fresh || m.Answer[0].(*dns.A).A.String() != "10.0.0.2" {
		t.Fatalf("removing the replaced entry removed the new one: %v %d", m, st)
	}
	now, _, _ := c.Peek(key, t0.Add(3*time.Second))
	c.Remove(key, now.Entry)
	if _, st, _ := c.Get(key, t0.Add(3*time.Second)); st != Miss {
		t.Fatalf("removed entry still answers: state %d", st)
	}
	if got, want := c.MaxLife(), 30*time.Second+time.Minute; got != want {
		t.Errorf("MaxLife %v, want %v (largest cap and serve stale)", got, want)
	}
}

// An answer stored with its preferred records first keeps their count,
// fresh and stale, until an answer without one takes its place.
func TestCacheKeepsPreferred(t *testing.T) {
	c := testCache()
	m := reply(dns.RcodeSuccess, []string{"example.com. 20 IN A 10.0.1.1", "example.com. 20 IN A 10.0.0.1"}, nil)
	if _, stored := c.PutPreferredAsHit(key, m, 1, t0); !stored {
		t.Fatal("not cached")
	}
	for _, at := range []time.Duration{0, 25 * time.Second} {
		if h, st, _ := c.Peek(key, t0.Add(at)); st == Miss || h.Entry.Preferred() != 1 {
			t.Fatalf("at %v: state %d, preferred %d, want 1", at, st, h.Entry.Preferred())
		}
	}
	c.Put(key, m, t0.Add(time.Second))
	if h, _, _ := c.Peek(key, t0.Add(time.Second)); h.Entry.Preferred() != 0 {
		t.Fatalf("an answer put without a count has preferred %d", h.Entry.Preferred())
	}
}
