package query

import (
	"context"
	"fmt"
	"net/netip"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/miekg/dns"

	"github.com/shardns/shardns/cache"
	"github.com/shardns/shardns/zone"
)

// movingReader holds zone ns.svc.cluster.local. elsewhere (at the replicas
// of order) until here is set, then here. While loading is set, the zone
// is loading here; loaded, if set, runs when that is first asked.
type movingReader struct {
	*zone.Static
	here    atomic.Bool
	order   atomic.Pointer[[]string]
	loading atomic.Bool
	loaded  func()
	once    sync.Once
}

const movingZone = "ns.svc.cluster.local."

func (v *movingReader) Zone(key string) *zone.Snapshot {
	if key == movingZone && !v.here.Load() {
		return nil
	}
	return v.Static.Zone(key)
}

func (v *movingReader) Remote(key string) []string {
	if key == movingZone && !v.here.Load() {
		return *v.order.Load()
	}
	return nil
}

func (v *movingReader) Loading(key string) bool {
	if key != movingZone || !v.loading.Load() {
		return false
	}
	if v.loaded != nil {
		v.once.Do(v.loaded)
	}
	return true
}

// lateAnswers collects what the handler writes late.
type lateAnswers chan []byte

func (l lateAnswers) WriteLate(b []byte, _ netip.AddrPort) { l <- append([]byte(nil), b...) }

// replicas plays the other replicas: each answers with what its function
// returns, and counts the questions it was asked.
type replicas struct {
	mu     sync.Mutex
	asked  map[string]int
	answer map[string]func(ctx context.Context) (*dns.Msg, error)
}

func (r *replicas) ask(ctx context.Context, member, zoneKey, name string, qtype uint16, _ zone.Topology) (*dns.Msg, int, error) {
	r.mu.Lock()
	r.asked[member]++
	f := r.answer[member]
	r.mu.Unlock()
	m, err := f(ctx)
	return m, 0, err
}

func (r *replicas) count(member string) int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.asked[member]
}

func silent(ctx context.Context) (*dns.Msg, error) { <-ctx.Done(); return nil, ctx.Err() }

func notServed(context.Context) (*dns.Msg, error) { return nil, fmt.Errorf("b: %w", ErrNotServed) }

func movingHandler(t testing.TB, r *replicas, order ...string) (*Handler, *movingReader) {
	t.Helper()
	base := testHandler(t)
	v := &movingReader{Static: base.Zones.(*zone.Static)}
	v.order.Store(&order)
	base.Zones = v
	base.Cluster = &Cluster{Ask: r.ask, Cache: cache.New(cache.Config{Size: 100, SuccessMaxTTL: time.Minute}),
		Timeout: 100 * time.Millisecond, Attempts: 3, MaxInFlight: 10, Now: time.Now}
	return base, v
}

// askLate serves one question for the moving zone and returns the late
// answer, and how long it took.
func askLate(t *testing.T, h *Handler) (*dns.Msg, time.Duration) {
	t.Helper()
	return askLateFor(t, h, "web.ns.svc.cluster.local.", dns.TypeA)
}

// askLateFor asks h for name and qtype, which it must answer late, and
// returns the answer and how long it took.
func askLateFor(t testing.TB, h *Handler, name string, qtype uint16) (*dns.Msg, time.Duration) {
	t.Helper()
	return askLateMsg(t, h, query(name, qtype))
}

// askLateMsg asks h q, which it must answer late, and returns the answer and
// how long it took.
func askLateMsg(t testing.TB, h *Handler, q *dns.Msg) (*dns.Msg, time.Duration) {
	t.Helper()
	late := make(lateAnswers, 1)
	start := time.Now()
	if out := h.Serve(pack(t, q), Transport{Late: late}, nil); out != nil {
		m := new(dns.Msg)
		_ = m.Unpack(out)
		t.Fatalf("answered at once (%v); want other replicas asked", m)
	}
	select {
	case b := <-late:
		m := new(dns.Msg)
		if err := m.Unpack(b); err != nil {
			t.Fatal(err)
		}
		return m, time.Since(start)
	case <-time.After(5 * time.Second):
		t.Fatal("no late answer")
	}
	return nil, 0
}

// The owner does not answer and the next replica does not hold the zone:
// when the zone moves here meanwhile (this replica found the owner gone
// and loaded it), the question is answered from it, not SERVFAIL, and the
// silent owner is asked once.
func TestAskOwnersAnswersFromAZoneThatMovedHere(t *testing.T) {
	var v *movingReader
	r := &replicas{asked: map[string]int{}, answer: map[string]func(context.Context) (*dns.Msg, error){
		"x": silent,
		"b": func(ctx context.Context) (*dns.Msg, error) {
			v.here.Store(true) // meanwhile, the zone loaded here
			return notServed(ctx)
		}}}
	h, v := movingHandler(t, r, "x", "b")
	m, _ := askLate(t, h)
	if m.Rcode != dns.RcodeSuccess || len(m.Answer) != 1 || m.Answer[0].(*dns.A).A.String() != "10.0.0.1" {
		t.Fatalf("answer %v, want the zone's own", m)
	}
	if n := r.count("x"); n != 1 {
		t.Fatalf("the silent owner was asked %d times, want once", n)
	}
}

// A replica that said it does not hold the zone yet (it is loading it) is
// asked again, and its answer is the answer.
func TestAskOwnersAsksAgainAReplicaThatWasLoading(t *testing.T) {
	var asked atomic.Int32
	owner := func(ctx context.Context) (*dns.Msg, error) {
		if asked.Add(1) < 3 {
			return notServed(ctx) // still loading
		}
		m := new(dns.Msg)
		m.SetQuestion("web.ns.svc.cluster.local.", dns.TypeA)
		m.Authoritative = true
		rr, _ := dns.NewRR("web.ns.svc.cluster.local. 5 IN A 10.0.0.1")
		m.Answer = []dns.RR{rr}
		return m, nil
	}
	r := &replicas{asked: map[string]int{}, answer: map[string]func(context.Context) (*dns.Msg, error){"b": owner}}
	h, _ := movingHandler(t, r, "b")
	m, _ := askLate(t, h)
	if m.Rcode != dns.RcodeSuccess || len(m.Answer) != 1 {
		t.Fatalf("answer %v, want the loaded replica's", m)
	}
}

// Nobody ever answers: SERVFAIL, never NXDOMAIN, within Attempts × Timeout
// and a pause.
func TestAskOwnersGivesUpWithServfail(t *testing.T) {
	r := &replicas{asked: map[string]int{}, answer: map[string]func(context.Context) (*dns.Msg, error){
		"x": silent, "b": notServed}}
	h, _ := movingHandler(t, r, "x", "b")
	m, took := askLate(t, h)
	if m.Rcode != dns.RcodeServerFailure {
		t.Fatalf("rcode %s, want SERVFAIL", dns.RcodeToString[m.Rcode])
	}
	// A bound, not a measurement: the question must not outlive its
	// budget by much, however slow the machine.
	if budget := time.Duration(h.Cluster.Attempts) * h.Cluster.Timeout; took > 3*budget {
		t.Fatalf("SERVFAIL after %v, want within about %v", took, budget)
	}
	if r.count("x") != 1 || r.count("b") < 2 {
		t.Fatalf("asked x %d and b %d times; want x once, b again after pauses", r.count("x"), r.count("b"))
	}
}

// The zone is loading here and no other replica serves it (the last
// replica standing as every replica stops, or the only owner left): the
// question waits for the load and is answered from the zone, where it
// used to get SERVFAIL at once.
func TestLoadingZoneWithNoOtherOwnerWaitsForTheLoad(t *testing.T) {
	r := &replicas{asked: map[string]int{}}
	h, v := movingHandler(t, r)
	v.order.Store(&[]string{}) // placed, with no other replica to ask
	v.loading.Store(true)
	v.loaded = func() { v.here.Store(true) } // the load ends right after the first look
	m, _ := askLate(t, h)
	if m.Rcode != dns.RcodeSuccess || len(m.Answer) != 1 || m.Answer[0].(*dns.A).A.String() != "10.0.0.1" {
		t.Fatalf("answer %v, want the zone's own once loaded", m)
	}
}

// A load that does not end in the question's budget: SERVFAIL, never
// NXDOMAIN, within Attempts × Timeout and a pause.
func TestLoadingZoneWithNoOtherOwnerGivesUpWithServfail(t *testing.T) {
	r := &replicas{asked: map[string]int{}}
	h, v := movingHandler(t, r)
	v.order.Store(&[]string{}) // placed, with no other replica to ask
	v.loading.Store(true)
	m, took := askLate(t, h)
	if m.Rcode != dns.RcodeServerFailure {
		t.Fatalf("rcode %s, want SERVFAIL", dns.RcodeToString[m.Rcode])
	}
	if budget := time.Duration(h.Cluster.Attempts) * h.Cluster.Timeout; took > 3*budget {
		t.Fatalf("SERVFAIL after %v, want within about %v", took, budget)
	}
}

// A zone that no replica serves and that is not loading here (no owner
// announced yet) is SERVFAIL at once: there is nothing to wait for.
func TestPlacedZoneWithNoOwnerIsServfailAtOnce(t *testing.T) {
	r := &replicas{asked: map[string]int{}}
	h, v := movingHandler(t, r)
	v.order.Store(&[]string{}) // placed, with no replica to ask
	out := h.Serve(pack(t, query("web.ns.svc.cluster.local.", dns.TypeA)), Transport{Late: make(lateAnswers, 1)}, nil)
	if out == nil {
		t.Fatal("answered late; want SERVFAIL at once")
	}
	m := new(dns.Msg)
	if err := m.Unpack(out); err != nil {
		t.Fatal(err)
	}
	if m.Rcode != dns.RcodeServerFailure {
		t.Fatalf("rcode %s, want SERVFAIL", dns.RcodeToString[m.Rcode])
	}
}
