package cache

import (
	"testing"
	"time"

	"github.com/miekg/dns"
)

func TestCacheKeepTTL(t *testing.T) {
	for _, c := range []struct {
		desc    string
		keep    bool
		ttl     string
		at      time.Duration
		wantTTL uint32
		want    State
	}{
		{"counted down without keepttl", false, "20", 5 * time.Second, 15, Fresh},
		{"as stored with keepttl", true, "20", 5 * time.Second, 20, Fresh},
		{"capped at the entry's life with keepttl", true, "300", 10 * time.Second, 30, Fresh},
		{"still expires with keepttl", true, "20", 25 * time.Second, StaleTTL, Stale},
	} {
		t.Run(c.desc, func(t *testing.T) {
			ca := New(Config{Size: 64, SuccessMaxTTL: 30 * time.Second, DenialMaxTTL: 10 * time.Second, ServeStale: time.Minute, KeepTTL: c.keep})
			ca.Put(key, reply(dns.RcodeSuccess, []string{"example.com. " + c.ttl + " IN A 1.2.3.4"}, nil), t0)
			ttl, st := ttlAt(t, ca, c.at)
			if ttl != c.wantTTL || st != c.want {
				t.Fatalf("ttl %d state %d, want %d %d", ttl, st, c.wantTTL, c.want)
			}
		})
	}
}

func TestCacheServfail(t *testing.T) {
	servfail := reply(dns.RcodeServerFailure, nil, nil)
	for _, c := range []struct {
		desc   string
		ttl    time.Duration
		at     time.Duration
		cached bool
		want   State
	}{
		{"not kept by default", 0, 0, false, Miss},
		{"kept for servfail", 5 * time.Second, 4 * time.Second, true, Fresh},
		{"not floored by the minimum TTL", time.Second, 1500 * time.Millisecond, true, Miss},
		{"not capped by the denial TTL", time.Minute, 50 * time.Second, true, Fresh},
		{"never served stale", 5 * time.Second, 6 * time.Second, true, Miss},
	} {
		t.Run(c.desc, func(t *testing.T) {
			ca := New(Config{Size: 64, SuccessMaxTTL: 30 * time.Second, DenialMaxTTL: 10 * time.Second,
				MinTTL: 2 * time.Second, ServeStale: time.Hour, ServfailTTL: c.ttl})
			if got := ca.Put(key, servfail, t0); got != c.cached {
				t.Fatalf("Put = %v, want %v", got, c.cached)
			}
			m, st, _ := ca.Get(key, t0.Add(c.at))
			if st != c.want || (st == Fresh && m.Rcode != dns.RcodeServerFailure) {
				t.Fatalf("state %d %v, want %d", st, m, c.want)
			}
		})
	}
	truncated := reply(dns.RcodeServerFailure, nil, nil)
	truncated.Truncated = true
	if New(Config{Size: 64, ServfailTTL: time.Second}).Put(key, truncated, t0) {
		t.Fatal("a truncated SERVFAIL was kept")
	}
}

func TestCacheZones(t *testing.T) {
	ca := New(Config{Size: 64, SuccessMaxTTL: 30 * time.Second, Zones: []string{"example.com.", "corp."}})
	for _, c := range []struct {
		name string
		want bool
	}{
		{"example.com.", true},
		{"www.example.com.", true},
		{"x.corp.", true},
		{"badexample.com.", false}, // a label boundary
		{"example.org.", false},
		{"com.", false},
	} {
		k := Key{Name: c.name, Type: dns.TypeA, Class: dns.ClassINET}
		m := reply(dns.RcodeSuccess, []string{c.name + " 20 IN A 1.2.3.4"}, nil)
		if got := ca.Put(k, m, t0); got != c.want {
			t.Errorf("%s: Put = %v, want %v", c.name, got, c.want)
		}
		if _, st, _ := ca.Get(k, t0); (st == Fresh) != c.want {
			t.Errorf("%s: state %d after Put", c.name, st)
		}
	}
	if !New(Config{Size: 64, SuccessMaxTTL: time.Minute, Zones: []string{"."}}).Put(key, reply(dns.RcodeSuccess,
		[]string{"example.com. 20 IN A 1.2.3.4"}, nil), t0) {
		t.Fatal("the root zone holds every name")
	}
}

// An upstream's SERVFAIL does not push out an answer that may still be
// served stale when the upstreams fail.
func TestCacheServfailKeepsStaleAnswer(t *testing.T) {
	ca := New(Config{Size: 64, SuccessMaxTTL: 30 * time.Second, ServeStale: time.Minute, ServfailTTL: 5 * time.Second})
	ca.Put(key, reply(dns.RcodeSuccess, []string{"example.com. 20 IN A 1.2.3.4"}, nil), t0)
	if ca.Put(key, reply(dns.RcodeServerFailure, nil, nil), t0.Add(25*time.Second)) {
		t.Fatal("the SERVFAIL replaced an answer within its stale window")
	}
	if m, st, _ := ca.Get(key, t0.Add(26*time.Second)); st != Stale || m.Rcode != dns.RcodeSuccess {
		t.Fatalf("state %d %v, want the stale answer", st, m)
	}
	if !ca.Put(key, reply(dns.RcodeServerFailure, nil, nil), t0.Add(2*time.Minute)) {
		t.Fatal("the SERVFAIL was not kept once the answer was past serving")
	}
	if m, st, _ := ca.Get(key, t0.Add(2*time.Minute+time.Second)); st != Fresh || m.Rcode != dns.RcodeServerFailure {
		t.Fatalf("state %d %v, want the SERVFAIL", st, m)
	}
}
