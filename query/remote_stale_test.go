package query

import (
	"context"
	"testing"
	"time"

	"github.com/miekg/dns"

	"github.com/shardns/shardns/cache"
)

// staleHandler is movingHandler whose owners' cache serves answers up to
// an hour past expiry, holding web.ns.svc.cluster.local. A 10.0.0.9 that
// expired a minute ago.
func staleHandler(t *testing.T, r *replicas, order ...string) *Handler {
	t.Helper()
	h, _ := movingHandler(t, r, order...)
	h.Cluster.Cache = cache.New(cache.Config{Size: 100, SuccessMaxTTL: time.Minute, ServeStale: time.Hour})
	m := new(dns.Msg)
	m.SetQuestion("web.ns.svc.cluster.local.", dns.TypeA)
	m.Response, m.Authoritative = true, true
	m.Answer = []dns.RR{rr(t, "web.ns.svc.cluster.local. 5 IN A 10.0.0.9")}
	key := cache.Key{Name: "web.ns.svc.cluster.local.", Type: dns.TypeA, Class: dns.ClassINET}
	if !h.Cluster.Cache.Put(key, m, time.Now().Add(-time.Minute)) {
		t.Fatal("the owner's answer was not cached")
	}
	return h
}

// askEDNS asks h for web.ns.svc.cluster.local. A with EDNS0, so that an
// extended error can come back, and returns the late answer.
func askEDNS(t *testing.T, h *Handler) (*dns.Msg, time.Duration) {
	t.Helper()
	q := query("web.ns.svc.cluster.local.", dns.TypeA)
	q.SetEdns0(1232, false)
	return askLateMsg(t, h, q)
}

// staleCode is the extended error code of m's OPT record, or -1.
func staleCode(m *dns.Msg) int {
	if opt := m.IsEdns0(); opt != nil {
		for _, o := range opt.Option {
			if e, ok := o.(*dns.EDNS0_EDE); ok {
				return int(e.InfoCode)
			}
		}
	}
	return -1
}

// No owner answers within the question's budget, and the owners' cache
// holds their answer past its TTL: the client gets that answer, marked
// Stale Answer (RFC 8914) with the stale TTL, not SERVFAIL.
func TestAskOwnersAnswersStaleWhenNoOwnerAnswers(t *testing.T) {
	r := &replicas{asked: map[string]int{}, answer: map[string]func(context.Context) (*dns.Msg, error){"x": silent}}
	h := staleHandler(t, r, "x")
	m, _ := askEDNS(t, h)
	if m.Rcode != dns.RcodeSuccess || len(m.Answer) != 1 || m.Answer[0].(*dns.A).A.String() != "10.0.0.9" {
		t.Fatalf("answer %v, want the owner's answer held stale", m)
	}
	if m.Answer[0].Header().Ttl != cache.StaleTTL {
		t.Fatalf("TTL %d, want the stale TTL %d", m.Answer[0].Header().Ttl, cache.StaleTTL)
	}
	if code := staleCode(m); code != int(dns.ExtendedErrorCodeStaleAnswer) {
		t.Fatalf("extended error %d, want Stale Answer", code)
	}
}

// An owner that answers is the answer, though a stale one is held.
func TestAskOwnersPrefersTheOwnerToStale(t *testing.T) {
	r := &replicas{asked: map[string]int{}, answer: map[string]func(context.Context) (*dns.Msg, error){
		"x": silent,
		"b": func(context.Context) (*dns.Msg, error) {
			m := new(dns.Msg)
			m.SetQuestion("web.ns.svc.cluster.local.", dns.TypeA)
			m.Response, m.Authoritative = true, true
			m.Answer = []dns.RR{rr(t, "web.ns.svc.cluster.local. 5 IN A 10.0.0.1")}
			return m, nil
		}}}
	h := staleHandler(t, r, "x", "b")
	m, _ := askEDNS(t, h)
	if m.Rcode != dns.RcodeSuccess || len(m.Answer) != 1 || m.Answer[0].(*dns.A).A.String() != "10.0.0.1" {
		t.Fatalf("answer %v, want the second owner's", m)
	}
	if code := staleCode(m); code != -1 {
		t.Fatalf("extended error %d on an owner's answer", code)
	}
}

// An answer past the stale window is gone: SERVFAIL, never NXDOMAIN.
func TestAskOwnersServfailPastTheStaleWindow(t *testing.T) {
	r := &replicas{asked: map[string]int{}, answer: map[string]func(context.Context) (*dns.Msg, error){"x": silent}}
	h := staleHandler(t, r, "x")
	h.Cluster.Now = func() time.Time { return time.Now().Add(2 * time.Hour) }
	m, _ := askEDNS(t, h)
	if m.Rcode != dns.RcodeServerFailure {
		t.Fatalf("rcode %s, want SERVFAIL", dns.RcodeToString[m.Rcode])
	}
}

// The budget bounds the question, however many owners and attempts: each
// silent owner gets a share of it, and the client its answer in time.
func TestAskOwnersKeepsToTheBudget(t *testing.T) {
	r := &replicas{asked: map[string]int{}, answer: map[string]func(context.Context) (*dns.Msg, error){
		"x": silent, "y": silent, "z": silent}}
	h, _ := movingHandler(t, r, "x", "y", "z")
	h.Cluster.Timeout, h.Cluster.Budget = time.Second, 150*time.Millisecond
	m, took := askLate(t, h)
	if m.Rcode != dns.RcodeServerFailure {
		t.Fatalf("rcode %s, want SERVFAIL", dns.RcodeToString[m.Rcode])
	}
	// A bound, not a measurement: far below one attempt's timeout.
	if took > 5*h.Cluster.Budget {
		t.Fatalf("SERVFAIL after %v, want within about %v", took, h.Cluster.Budget)
	}
	for _, member := range []string{"x", "y", "z"} {
		if n := r.count(member); n != 1 {
			t.Fatalf("%s asked %d times, want once", member, n)
		}
	}
}

// A fan-out whose share is missing answers with the merge it holds,
// stale, rather than SERVFAIL.
func TestFanOutAnswersStaleWhenAShareIsMissing(t *testing.T) {
	r := &replicas{asked: map[string]int{}, answer: map[string]func(context.Context) (*dns.Msg, error){
		"a": silent, "b": reply(t, dns.RcodeNameError, nil, reverseSOA)}}
	h := fanHandler(t, r, "a", "b")
	h.Cluster.Cache = cache.New(cache.Config{Size: 100, SuccessMaxTTL: time.Minute, ServeStale: time.Hour})
	m := new(dns.Msg)
	m.SetQuestion(missing, dns.TypePTR)
	m.Response, m.Authoritative = true, true
	m.Answer = []dns.RR{rr(t, missing+" 5 IN PTR web.ns.svc.cluster.local.")}
	h.Cluster.Cache.Put(cache.Key{Name: missing, Type: dns.TypePTR, Class: dns.ClassINET}, m, time.Now().Add(-time.Minute))
	got, _ := askFan(t, h, missing)
	if got.Rcode != dns.RcodeSuccess || len(got.Answer) != 1 {
		t.Fatalf("answer %v, want the merge held stale", got)
	}
}

func TestAttemptTimeout(t *testing.T) {
	ms := time.Millisecond
	for _, tc := range []struct {
		name          string
		left, timeout time.Duration
		owners        []string
		silent        map[string]bool
		want          time.Duration
	}{
		{"one owner, the whole attempt", 600 * ms, 500 * ms, []string{"a"}, nil, 500 * ms},
		{"one owner, what is left", 300 * ms, 500 * ms, []string{"a"}, nil, 300 * ms},
		{"two owners share", 600 * ms, 500 * ms, []string{"a", "b"}, nil, 300 * ms},
		{"silent owners take no share", 600 * ms, 500 * ms, []string{"a", "b", "c"}, map[string]bool{"b": true}, 300 * ms},
		{"every owner silent", 600 * ms, 500 * ms, []string{"a"}, map[string]bool{"a": true}, 0},
		{"nothing left", 0, 500 * ms, []string{"a"}, nil, 0},
		{"no owner", 600 * ms, 500 * ms, nil, nil, 0},
	} {
		if got := attemptTimeout(tc.left, tc.timeout, tc.owners, tc.silent); got != tc.want {
			t.Errorf("%s: %v, want %v", tc.name, got, tc.want)
		}
	}
}
