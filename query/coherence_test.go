package query

import (
	"context"
	"fmt"
	"sync/atomic"
	"testing"
	"time"

	"github.com/miekg/dns"

	"github.com/shardns/shardns/zone"
)

// An answer stored before an owner's word that covers its name is
// outdated: a label covers every name at or under label.zone, a zone's
// changed labels the names no label picks out, a zone's "all" every
// name of it, a ring change every name.
func TestFreshnessCurrent(t *testing.T) {
	clock := &ownerClock{}
	f := NewFreshness(time.Hour, clock.now)
	at := func(s int) time.Time { return time.Unix(1_000_000, 0).Add(time.Duration(s) * time.Second) }
	clock.set(10 * time.Second)
	f.Forget([]Change{{Zone: "ns.svc.cluster.local.", Labels: []string{"web"}}})
	clock.set(20 * time.Second)
	f.Forget([]Change{{Zone: "other.svc.cluster.local.", All: true},
		{Zone: "odd.svc.cluster.local.", Labels: []string{"a.b"}}})
	for _, tc := range []struct {
		zone, name string
		stored     int
		want       bool
	}{
		{"ns.svc.cluster.local.", "web.ns.svc.cluster.local.", 9, false},
		{"ns.svc.cluster.local.", "web.ns.svc.cluster.local.", 10, false}, // the same instant: outdated
		{"ns.svc.cluster.local.", "web.ns.svc.cluster.local.", 11, true},
		{"ns.svc.cluster.local.", "_http._tcp.web.ns.svc.cluster.local.", 9, false},
		{"ns.svc.cluster.local.", "pod-1.web.ns.svc.cluster.local.", 9, false},
		{"ns.svc.cluster.local.", "db.ns.svc.cluster.local.", 9, true},
		{"ns.svc.cluster.local.", "webx.ns.svc.cluster.local.", 9, true},
		{"ns.svc.cluster.local.", "xweb.ns.svc.cluster.local.", 9, true},
		{"ns.svc.cluster.local.", "ns.svc.cluster.local.", 9, false},   // the apex
		{"ns.svc.cluster.local.", "*.ns.svc.cluster.local.", 9, false}, // wildcards
		{"ns.svc.cluster.local.", "any.ns.svc.cluster.local.", 9, false},
		{"ns.svc.cluster.local.", "web.ns.svc.clusterset.local.", 9, false}, // outside the zone key
		{"ns.svc.cluster.local.", "ns.svc.cluster.local.", 11, true},
		{"other.svc.cluster.local.", "x.other.svc.cluster.local.", 19, false},
		{"other.svc.cluster.local.", "x.other.svc.cluster.local.", 21, true},
		{"odd.svc.cluster.local.", "x.odd.svc.cluster.local.", 19, false}, // not a label: the whole zone
		{"third.svc.cluster.local.", "db.third.svc.cluster.local.", 1, true},
	} {
		if got := f.Current(tc.zone, tc.name, at(tc.stored)); got != tc.want {
			t.Errorf("%s (zone %s) stored at %ds: current %v, want %v", tc.name, tc.zone, tc.stored, got, tc.want)
		}
	}
	clock.set(30 * time.Second)
	f.ForgetAll()
	if f.Current("third.svc.cluster.local.", "db.third.svc.cluster.local.", at(29)) {
		t.Error("an answer stored before a ring change is current")
	}
	if !f.Current("ns.svc.cluster.local.", "web.ns.svc.cluster.local.", at(31)) {
		t.Error("an answer stored after a ring change is outdated")
	}
	var none *Freshness
	none.Forget([]Change{{Zone: "ns.svc.cluster.local.", All: true}})
	none.ForgetAll()
	if !none.Current("ns.svc.cluster.local.", "web.ns.svc.cluster.local.", at(0)) {
		t.Error("no Freshness: an answer is outdated")
	}
}

// Records older than the longest an answer is kept are dropped with the
// next word; Keep only grows.
func TestFreshnessPrunes(t *testing.T) {
	clock := &ownerClock{}
	f := NewFreshness(5*time.Second, clock.now)
	f.Keep(time.Second)
	clock.set(10 * time.Second)
	f.Forget([]Change{{Zone: "a.svc.cluster.local.", Labels: []string{"web"}}, {Zone: "b.svc.cluster.local.", All: true}})
	clock.set(14 * time.Second)
	f.Forget([]Change{{Zone: "c.svc.cluster.local.", Labels: []string{"db"}}})
	if v := f.view.Load(); len(v.zones) != 3 || len(v.names) != 2 {
		t.Fatalf("within 5 s: %d zones, %d names recorded; want 3 and 2", len(v.zones), len(v.names))
	}
	clock.set(16 * time.Second)
	f.Forget([]Change{{Zone: "c.svc.cluster.local.", Labels: []string{"api"}}})
	if v := f.view.Load(); len(v.zones) != 1 || len(v.names) != 2 {
		t.Fatalf("6 s after the first words: %d zones, %d names recorded; want 1 and 2", len(v.zones), len(v.names))
	}
}

// countingOwners are ownerHandlers whose owner counts the questions it
// is asked; told, if set, runs while a question is in flight.
func countingOwners(t *testing.T) (fast, full *Handler, clock *ownerClock, asked *atomic.Int32, told *atomic.Pointer[func()]) {
	fast, full, clock = ownerHandlers(t)
	asked, told = &atomic.Int32{}, &atomic.Pointer[func()]{}
	fresh := NewFreshness(time.Minute, clock.now)
	for _, h := range []*Handler{fast, full} {
		ask := h.Cluster.Ask
		h.Cluster.Fresh = fresh
		h.Cluster.Ask = func(ctx context.Context, member, zoneKey, name string, qtype uint16, topo zone.Topology) (*dns.Msg, int, error) {
			asked.Add(1)
			if f := told.Load(); f != nil {
				(*f)()
			}
			return ask(ctx, member, zoneKey, name, qtype, topo)
		}
	}
	return fast, full, clock, asked, told
}

// An owner's word that a name changed drops the cached answers of that
// name (and of names under it) on the fast and the full path: the next
// question asks the owner again. Other names keep their answers.
func TestToldChangeAsksOwnerAgain(t *testing.T) {
	fast, full, clock, asked, _ := countingOwners(t)
	names := []struct {
		name  string
		qtype uint16
	}{{"web.ns.svc.cluster.local.", dns.TypeA}, {"_http._tcp.web.ns.svc.cluster.local.", dns.TypeSRV},
		{"big.ns.svc.cluster.local.", dns.TypeA}}
	for _, h := range []*Handler{fast, full} {
		for _, n := range names {
			askLateFor(t, h, n.name, n.qtype)
		}
	}
	clock.set(time.Second)
	fast.Cluster.Fresh.Forget([]Change{{Zone: "ns.svc.cluster.local.", Labels: []string{"web"}}})
	clock.set(2 * time.Second)
	for _, h := range []*Handler{fast, full} {
		before := asked.Load()
		for _, n := range names[:2] {
			if r, _ := askLateFor(t, h, n.name, n.qtype); len(r.Answer) == 0 {
				t.Fatalf("%s asked again: no records", n.name)
			}
		}
		if got := asked.Load() - before; got != 2 {
			t.Errorf("the owner was asked %d times for the 2 changed names, want 2", got)
		}
		// Asked again, answered from the cache.
		for _, n := range names {
			if r := serve(t, h, pack(t, query(n.name, n.qtype)), Transport{}); len(r.Answer) == 0 {
				t.Fatalf("%s from the cache: no records", n.name)
			}
		}
	}
}

// A word that arrives while the question is in flight outdates its
// answer: the answer is given to the client that asked, and the next
// question asks the owner again.
func TestToldChangeInFlightOutdatesTheAnswer(t *testing.T) {
	fast, _, clock, asked, told := countingOwners(t)
	forget := func() {
		fast.Cluster.Fresh.Forget([]Change{{Zone: "ns.svc.cluster.local.", Labels: []string{"web"}}})
		clock.set(clock.now().Sub(time.Unix(1_000_000, 0)) + time.Millisecond) // the answer arrives after the word
		told.Store(nil)
	}
	told.Store(&forget)
	if r, _ := askLateFor(t, fast, "web.ns.svc.cluster.local.", dns.TypeA); len(r.Answer) != 1 {
		t.Fatalf("answer in flight: %v", r.Answer)
	}
	askLateFor(t, fast, "web.ns.svc.cluster.local.", dns.TypeA) // not from the cache
	if n := asked.Load(); n != 2 {
		t.Fatalf("owner asked %d times, want 2", n)
	}
}

// An answer an owner said is outdated is never served stale: with its
// owner silent the question gets SERVFAIL.
func TestToldChangeIsNotServedStale(t *testing.T) {
	r := &replicas{asked: map[string]int{}, answer: map[string]func(context.Context) (*dns.Msg, error){"x": silent}}
	h := staleHandler(t, r, "x")
	h.Cluster.Fresh = NewFreshness(time.Hour, time.Now)
	if m, _ := askEDNS(t, h); m.Rcode != dns.RcodeSuccess || len(m.Answer) != 1 {
		t.Fatalf("before the word: %v, want the stale answer", m)
	}
	h.Cluster.Fresh.Forget([]Change{{Zone: "ns.svc.cluster.local.", Labels: []string{"web"}}})
	if m, _ := askEDNS(t, h); m.Rcode != dns.RcodeServerFailure {
		t.Fatalf("after the word: %s %v, want SERVFAIL", dns.RcodeToString[m.Rcode], m.Answer)
	}
}

// BenchmarkServeOwnerCachedTold is BenchmarkServeOwnerCached with the
// owners' words checked: none since the answer was stored (the usual
// case), and words about other names of the same zone and of 1,000
// other zones since then (every lookup made).
func BenchmarkServeOwnerCachedTold(b *testing.B) {
	fast, _, clock := ownerHandlers(b)
	fast.Cluster.Fresh = NewFreshness(time.Minute, clock.now)
	askLateFor(b, fast, "web.ns.svc.cluster.local.", dns.TypeA)
	req, out := pack(b, query("web.ns.svc.cluster.local.", dns.TypeA)), make([]byte, 0, 512)
	b.Run("none", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			out = fast.Serve(req, Transport{}, out)
		}
	})
	clock.set(time.Second)
	changes := []Change{{Zone: "ns.svc.cluster.local.", Labels: []string{"db", "api"}}}
	for i := range 1000 {
		changes = append(changes, Change{Zone: fmt.Sprintf("n%d.svc.cluster.local.", i), Labels: []string{"web"}})
	}
	fast.Cluster.Fresh.Forget(changes)
	b.Run("others", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			if out = fast.Serve(req, Transport{}, out); out == nil {
				b.Fatal("not answered from the cache")
			}
		}
	})
}

// BenchmarkFreshnessCurrent is the check a hit adds: an answer stored
// after every word (the usual case), and one stored before words about
// other names of its zone and of 1,000 other zones.
func BenchmarkFreshnessCurrent(b *testing.B) {
	clock := &ownerClock{}
	f := NewFreshness(time.Minute, clock.now)
	clock.set(time.Second)
	changes := []Change{{Zone: "ns.svc.cluster.local.", Labels: []string{"db", "api"}}}
	for i := range 1000 {
		changes = append(changes, Change{Zone: fmt.Sprintf("n%d.svc.cluster.local.", i), Labels: []string{"web"}})
	}
	f.Forget(changes)
	for _, bc := range []struct {
		name   string
		stored time.Duration
	}{{"after", 2 * time.Second}, {"before", 0}} {
		stored := time.Unix(1_000_000, int64(bc.stored))
		b.Run(bc.name, func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				if !f.Current("ns.svc.cluster.local.", "_http._tcp.web.ns.svc.cluster.local.", stored) {
					b.Fatal("outdated")
				}
			}
		})
	}
}
