package query

import (
	"context"
	"io"
	"log/slog"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/miekg/dns"

	"github.com/shardns/shardns/cache"
	"github.com/shardns/shardns/internal/testutil"
	"github.com/shardns/shardns/zone"
)

// ownerClock is the cluster cache's clock in these tests: the time since
// a start.
type ownerClock struct{ since atomic.Int64 }

func (c *ownerClock) now() time.Time      { return time.Unix(1_000_000, c.since.Load()) }
func (c *ownerClock) set(d time.Duration) { c.since.Store(int64(d)) }

// ownerHandlers are a handler that asks the owner of ns.svc.cluster.local.
// (a replica holding testHandler's zones) and caches its answers, and one
// that answers the same way through the full path only (query logging
// turns the fast path off), on one clock.
func ownerHandlers(t testing.TB) (fast, full *Handler, clock *ownerClock) {
	t.Helper()
	owner := testHandler(t)
	clock = &ownerClock{}
	ask := func(_ context.Context, _, _, name string, qtype uint16, _ zone.Topology) (*dns.Msg, int, error) {
		m := new(dns.Msg)
		return m, 0, m.Unpack(owner.Serve(pack(t, query(name, qtype)), Transport{TCP: true}, nil))
	}
	make := func() *Handler {
		h, _ := movingHandler(t, &replicas{}, "b")
		h.Cluster.Ask = ask
		h.Cluster.Cache = cache.New(cache.Config{Size: 100, SuccessMaxTTL: 30 * time.Second, DenialMaxTTL: 5 * time.Second})
		h.Cluster.Now = clock.now
		return h
	}
	fast, full = make(), make()
	full.QueryLog = slog.New(slog.NewTextHandler(io.Discard, nil))
	return fast, full, clock
}

// An owner's cached answer served from packed wire is, once unpacked, the
// full path's answer to the same request: records with their TTLs counted
// down to the entry's age, flags, sections, truncation, the question's
// case, the OPT record; and what is not cached, or has expired, is asked
// of the owner again on both paths.
func TestOwnerFastPathMatchesFullPath(t *testing.T) {
	fast, full, clock := ownerHandlers(t)
	cases := []struct {
		name  string
		qtype uint16
		edns  uint16
		tcp   bool
	}{
		{"web.ns.svc.cluster.local.", dns.TypeA, 0, false},
		{"WEB.Ns.svc.cluster.local.", dns.TypeA, 1232, false},
		{"web.ns.svc.cluster.local.", dns.TypeAAAA, 0, false},
		{"_http._tcp.web.ns.svc.cluster.local.", dns.TypeSRV, 4096, false},
		{"big.ns.svc.cluster.local.", dns.TypeA, 0, false},
		{"big.ns.svc.cluster.local.", dns.TypeA, 1232, false},
		{"big.ns.svc.cluster.local.", dns.TypeA, 0, true},
		{"Missing.ns.svc.cluster.local.", dns.TypeA, 0, false},
	}
	for _, h := range []*Handler{fast, full} { // the owner's answers, cached
		asked := map[dns.Question]bool{}
		for _, c := range cases {
			if q := (dns.Question{Name: strings.ToLower(c.name), Qtype: c.qtype}); !asked[q] {
				asked[q] = true
				askLateFor(t, h, c.name, c.qtype)
			}
		}
	}
	for _, age := range []time.Duration{0, 1500 * time.Millisecond, 2 * time.Second, 4900 * time.Millisecond} {
		clock.set(age)
		for _, c := range cases {
			for round := range 2 { // build, then reuse
				m := query(c.name, c.qtype)
				m.Id, m.RecursionDesired, m.CheckingDisabled = uint16(1000+round), round == 0, round == 1
				if c.edns > 0 {
					m.SetEdns0(c.edns, false)
				}
				req, tr := pack(t, m), Transport{TCP: c.tcp}
				got, want := serve(t, fast, req, tr), serve(t, full, req, tr)
				if got.String() != want.String() {
					t.Fatalf("%s %s at %v (round %d):\nfast:\n%v\nfull:\n%v", c.name, dns.TypeToString[c.qtype], age, round, got, want)
				}
			}
		}
	}
	// Past the TTL (5 s, the owner's), both ask the owner again.
	clock.set(5100 * time.Millisecond)
	for _, h := range []*Handler{fast, full} {
		if r, _ := askLateFor(t, h, "web.ns.svc.cluster.local.", dns.TypeA); len(r.Answer) != 1 || r.Answer[0].Header().Ttl != 5 {
			t.Fatalf("refreshed answer %v, want one A with TTL 5", r.Answer)
		}
	}
}

// With loadbalance, each answer from the cache is one of the shuffles of
// the owner's records, all of them, each time.
func TestOwnerFastPathShuffles(t *testing.T) {
	fast, _, _ := ownerHandlers(t)
	fast.LoadBalance = true
	name := "big.ns.svc.cluster.local."
	askLateFor(t, fast, name, dns.TypeA)
	want := recordSet(serve(t, fast, pack(t, query(name, dns.TypeA)), Transport{TCP: true}).Answer)
	if len(want) != 300 {
		t.Fatalf("%d records over TCP, want the owner's 300", len(want))
	}
	orders := map[string]bool{}
	for range 50 {
		r := serve(t, fast, pack(t, query(name, dns.TypeA)), Transport{TCP: true})
		if got := recordSet(r.Answer); !slices.Equal(got, want) {
			t.Fatalf("cached answer of %d records differs from the owner's %d", len(got), len(want))
		}
		orders[r.Answer[0].String()] = true
	}
	if len(orders) < 2 {
		t.Fatalf("50 answers all begin with %v: not shuffled", orders)
	}
}

func recordSet(rrs []dns.RR) []string {
	var out []string
	for _, rr := range rrs {
		out = append(out, rr.String())
	}
	slices.Sort(out)
	return out
}

// A cache hit allocates nothing.
func TestOwnerFastPathAllocatesNothing(t *testing.T) {
	fast, _, _ := ownerHandlers(t)
	askLateFor(t, fast, "web.ns.svc.cluster.local.", dns.TypeA)
	req, out := pack(t, query("web.ns.svc.cluster.local.", dns.TypeA)), make([]byte, 0, 512)
	if n := testing.AllocsPerRun(100, func() { fast.Serve(req, Transport{}, out) }); n != 0 && !testutil.RaceEnabled {
		t.Fatalf("%v allocations per cached owner's answer, want 0", n)
	}
}

// BenchmarkServeOwnerCached is a node-local cache hit: a name whose zone
// another replica holds, answered from the cluster cache.
func BenchmarkServeOwnerCached(b *testing.B) {
	fast, _, _ := ownerHandlers(b)
	for _, name := range []string{"web.ns.svc.cluster.local.", "missing.ns.svc.cluster.local."} {
		askLateFor(b, fast, name, dns.TypeA)
	}
	for _, bc := range []struct{ name, qname string }{
		{"A", "web.ns.svc.cluster.local."},
		{"NXDOMAIN", "missing.ns.svc.cluster.local."},
	} {
		b.Run(bc.name, func(b *testing.B) {
			req, out := pack(b, query(bc.qname, dns.TypeA)), make([]byte, 0, 512)
			b.ReportAllocs()
			for b.Loop() {
				out = fast.Serve(req, Transport{}, out)
			}
		})
	}
}
