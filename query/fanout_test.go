package query

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sort"
	"testing"
	"time"

	"github.com/miekg/dns"

	"github.com/shardns/shardns/cache"
	"github.com/shardns/shardns/zone"
)

// fanView holds its reverse zones partial: a reverse name it lacks goes
// to every member of fan.
type fanView struct {
	*zone.Static
	fan []string
}

func (v *fanView) FanOut(string) []string { return v.fan }

const reverseSOA = "in-addr.arpa. 5 IN SOA ns.dns.in-addr.arpa. hostmaster.in-addr.arpa. 1 7200 1800 86400 5"

func fanHandler(t *testing.T, r *replicas, members ...string) *Handler {
	t.Helper()
	h := testHandler(t)
	h.Zones = &fanView{Static: h.Zones.(*zone.Static), fan: members}
	h.Cluster = &Cluster{Ask: r.ask, Cache: cache.New(cache.Config{Size: 100, SuccessMaxTTL: time.Minute, DenialMaxTTL: time.Minute}),
		Timeout: 100 * time.Millisecond, Attempts: 3, MaxInFlight: 10, Now: time.Now}
	return h
}

// askFan serves one PTR question that this replica's share lacks and
// returns the late answer, and how long it took.
func askFan(t *testing.T, h *Handler, name string) (*dns.Msg, time.Duration) {
	t.Helper()
	return askLateFor(t, h, name, dns.TypePTR)
}

func rr(t *testing.T, s string) dns.RR {
	t.Helper()
	r, err := dns.NewRR(s)
	if err != nil {
		t.Fatal(err)
	}
	return r
}

// reply is what a member that serves the zone answers.
func reply(t *testing.T, rcode int, answer []string, ns ...string) func(context.Context) (*dns.Msg, error) {
	m := new(dns.Msg)
	m.SetQuestion("9.0.0.10.in-addr.arpa.", dns.TypePTR)
	m.Response, m.Authoritative, m.Rcode = true, true, rcode
	for _, s := range answer {
		m.Answer = append(m.Answer, rr(t, s))
	}
	for _, s := range ns {
		m.Ns = append(m.Ns, rr(t, s))
	}
	return func(context.Context) (*dns.Msg, error) { return m.Copy(), nil }
}

func sortedStrings(rrs []dns.RR) []string {
	out := make([]string, len(rrs))
	for i, r := range rrs {
		out[i] = r.String()
	}
	sort.Strings(out)
	return out
}

const missing = "9.0.0.10.in-addr.arpa." // in a zone held here, not in its share

// Each member holds part of the name's records: the client gets all of
// them, once each, authoritative with no authority section; and the
// merged answer is cached like an owner's.
func TestFanOutMergesRecords(t *testing.T) {
	r := &replicas{asked: map[string]int{}, answer: map[string]func(context.Context) (*dns.Msg, error){
		"b": reply(t, dns.RcodeSuccess, []string{missing + " 5 IN PTR a.nsb.svc.cluster.local."}),
		"c": reply(t, dns.RcodeSuccess, []string{
			missing + " 5 IN PTR c.nsc.svc.cluster.local.",
			missing + " 5 IN PTR a.nsb.svc.cluster.local.", // held by both
		}),
		"d": reply(t, dns.RcodeNameError, nil, reverseSOA),
	}}
	h := fanHandler(t, r, "b", "c", "d")
	m, _ := askFan(t, h, missing)
	want := []string{
		missing + "\t5\tIN\tPTR\ta.nsb.svc.cluster.local.",
		missing + "\t5\tIN\tPTR\tc.nsc.svc.cluster.local.",
	}
	if m.Rcode != dns.RcodeSuccess || !m.Authoritative || !slices.Equal(sortedStrings(m.Answer), want) || len(m.Ns) != 0 {
		t.Fatalf("answer %v, want NOERROR AA with the PTRs of b and c and no authority", m)
	}
	for _, member := range []string{"b", "c", "d"} {
		if n := r.count(member); n != 1 {
			t.Fatalf("%s asked %d times, want once", member, n)
		}
	}
	out := h.Serve(pack(t, query(missing, dns.TypePTR)), Transport{Late: make(lateAnswers, 1)}, nil)
	if out == nil {
		t.Fatal("asked the members again; want the merged answer from the cache")
	}
	cached := new(dns.Msg)
	if err := cached.Unpack(out); err != nil || !slices.Equal(sortedStrings(cached.Answer), want) {
		t.Fatalf("cached answer %v (%v), want the merged PTRs", cached, err)
	}
}

// Every member says the name is not in its share: NXDOMAIN, with the SOA.
func TestFanOutAllNXDOMAIN(t *testing.T) {
	r := &replicas{asked: map[string]int{}, answer: map[string]func(context.Context) (*dns.Msg, error){
		"b": reply(t, dns.RcodeNameError, nil, reverseSOA),
		"c": reply(t, dns.RcodeNameError, nil, reverseSOA),
	}}
	m, _ := askFan(t, fanHandler(t, r, "b", "c"), missing)
	if m.Rcode != dns.RcodeNameError || !m.Authoritative || len(m.Answer) != 0 ||
		len(m.Ns) != 1 || m.Ns[0].Header().Rrtype != dns.TypeSOA || m.Ns[0].Header().Name != "in-addr.arpa." {
		t.Fatalf("answer %v, want NXDOMAIN AA with the SOA of in-addr.arpa.", m)
	}
}

// A member that does not answer may hold the name: SERVFAIL, never
// NXDOMAIN, within the question's budget.
func TestFanOutSilentMemberIsNotNXDOMAIN(t *testing.T) {
	r := &replicas{asked: map[string]int{}, answer: map[string]func(context.Context) (*dns.Msg, error){
		"b": reply(t, dns.RcodeNameError, nil, reverseSOA),
		"x": silent,
		"c": reply(t, dns.RcodeNameError, nil, reverseSOA),
	}}
	h := fanHandler(t, r, "b", "x", "c")
	m, took := askFan(t, h, missing)
	if m.Rcode != dns.RcodeServerFailure || len(m.Answer) != 0 {
		t.Fatalf("answer %v, want SERVFAIL", m)
	}
	if budget := time.Duration(h.Cluster.Attempts) * h.Cluster.Timeout; took > 3*budget {
		t.Fatalf("SERVFAIL after %v, want within about %v", took, budget)
	}
	if r.count("x") != 1 {
		t.Fatalf("the silent member was asked %d times, want once", r.count("x"))
	}
}

// A member that does not serve the zone (its reverse zones are whole and
// this one is not its) adds nothing: the other's NXDOMAIN is the answer.
func TestFanOutNotServedIsNeutral(t *testing.T) {
	r := &replicas{asked: map[string]int{}, answer: map[string]func(context.Context) (*dns.Msg, error){
		"b": notServed,
		"c": reply(t, dns.RcodeNameError, nil, reverseSOA),
	}}
	m, _ := askFan(t, fanHandler(t, r, "b", "c"), missing)
	if m.Rcode != dns.RcodeNameError || len(m.Ns) != 1 || m.Ns[0].Header().Rrtype != dns.TypeSOA {
		t.Fatalf("answer %v, want NXDOMAIN with the SOA", m)
	}
}

// Records found are an answer even when another member is silent.
func TestFanOutPositiveDespiteSilence(t *testing.T) {
	r := &replicas{asked: map[string]int{}, answer: map[string]func(context.Context) (*dns.Msg, error){
		"x": silent,
		"b": reply(t, dns.RcodeSuccess, []string{missing + " 5 IN PTR a.nsb.svc.cluster.local."}),
	}}
	m, _ := askFan(t, fanHandler(t, r, "x", "b"), missing)
	if m.Rcode != dns.RcodeSuccess || !m.Authoritative || len(m.Answer) != 1 ||
		m.Answer[0].(*dns.PTR).Ptr != "a.nsb.svc.cluster.local." || len(m.Ns) != 0 {
		t.Fatalf("answer %v, want b's PTR", m)
	}
}

// A name in this replica's share is answered here, and nobody is asked.
func TestFanOutLocalHitAsksNobody(t *testing.T) {
	r := &replicas{asked: map[string]int{}, answer: map[string]func(context.Context) (*dns.Msg, error){}}
	h := fanHandler(t, r, "b", "c")
	m := serve(t, h, pack(t, query("1.0.0.10.in-addr.arpa.", dns.TypePTR)), Transport{Late: make(lateAnswers, 1)})
	if m.Rcode != dns.RcodeSuccess || len(m.Answer) != 1 || m.Answer[0].(*dns.PTR).Ptr != "web.ns.svc.cluster.local." {
		t.Fatalf("answer %v, want the PTR held here", m)
	}
	if r.count("b")+r.count("c") != 0 {
		t.Fatal("members were asked for a name held here")
	}
}

// The rest of the merge rules, on the members' replies alone.
func TestMergeShares(t *testing.T) {
	ok := func(rcode int, answer []string, ns ...string) share {
		m, _ := reply(t, rcode, answer, ns...)(context.Background())
		return share{member: "m", msg: m}
	}
	nx := ok(dns.RcodeNameError, nil, reverseSOA)
	nodata := ok(dns.RcodeSuccess, nil, reverseSOA)
	ptr := ok(dns.RcodeSuccess, []string{missing + " 5 IN PTR a.nsb.svc.cluster.local."})
	ns := share{member: "n", err: fmt.Errorf("dispatch: %w", ErrNotServed)}
	down := share{member: "x", err: context.DeadlineExceeded}
	fail := ok(dns.RcodeServerFailure, nil) // a replica not synced yet
	for _, c := range []struct {
		name   string
		shares []share
		rcode  int // -1: an error, for a SERVFAIL
		answer int
		soa    bool
	}{
		{"nodata and nxdomain", []share{nx, nodata}, dns.RcodeSuccess, 0, true},
		{"nodata despite silence", []share{down, nodata}, dns.RcodeSuccess, 0, true},
		{"records beat nodata", []share{nodata, ptr, down}, dns.RcodeSuccess, 1, false},
		{"nobody serves the zone", []share{ns, ns}, -1, 0, false},
		{"nobody", nil, -1, 0, false},
		{"an unsynced member may hold it", []share{nx, fail}, -1, 0, false},
		{"not served and silent", []share{ns, down}, -1, 0, false},
	} {
		m, err := mergeShares(missing, dns.TypePTR, c.shares)
		if c.rcode < 0 {
			if err == nil {
				t.Errorf("%s: %v, want an error (SERVFAIL)", c.name, m)
			}
			continue
		}
		if err != nil {
			t.Errorf("%s: %v", c.name, err)
			continue
		}
		hasSOA := len(m.Ns) == 1 && m.Ns[0].Header().Rrtype == dns.TypeSOA
		if m.Rcode != c.rcode || len(m.Answer) != c.answer || hasSOA != c.soa || !m.Authoritative {
			t.Errorf("%s: %v, want rcode %s, %d records, SOA %v", c.name, m, dns.RcodeToString[c.rcode], c.answer, c.soa)
		}
	}
	_, err := mergeShares(missing, dns.TypePTR, []share{nx, down})
	if !errors.Is(err, context.DeadlineExceeded) {
		t.Errorf("the error %v does not say why a share is unknown", err)
	}
}
