package zone

import (
	"slices"
	"testing"

	"github.com/miekg/dns"
)

// partialView holds the zones of a static reader, minus those in missing,
// and reverse zones partial: a reverse miss goes to fan.
type partialView struct {
	*Static
	fan     []string
	missing map[string]bool
	remote  map[string][]string
}

func (v *partialView) Zone(key string) *Snapshot {
	if v.missing[key] {
		return nil
	}
	return v.Static.Zone(key)
}

func (v *partialView) Remote(key string) []string { return v.remote[key] }

func (v *partialView) FanOut(string) []string { return v.fan }

func newPartialView(t *testing.T, cfg *Config, synced bool, fan []string) *partialView {
	t.Helper()
	return &partialView{Static: NewStatic(cfg, testCluster(), synced), fan: fan,
		missing: map[string]bool{}, remote: map[string][]string{}}
}

// What the share held here knows is answered here: a PTR, and NODATA for
// a name that exists with other types.
func TestAnswerPartialReverseHit(t *testing.T) {
	cfg := testConfig()
	v := newPartialView(t, cfg, true, []string{"b", "c"})
	runCases(t, v, cfg, []tc{
		{qname: "1.0.0.10.in-addr.arpa.", qtype: PTRt, answer: []string{"1.0.0.10.in-addr.arpa. 5 IN PTR svc1.ns1.svc.cluster.local."}},
		{qname: "1.0.0.10.in-addr.arpa.", qtype: A, soa: "in-addr.arpa."},
	})
}

// A name this share lacks, in a zone held here or not, may be in another
// replica's share: every member is asked, never NXDOMAIN from here.
func TestAnswerPartialReverseMissFansOut(t *testing.T) {
	cfg := testConfig()
	v := newPartialView(t, cfg, true, []string{"b", "c"})
	for _, c := range []struct{ name, key string }{
		{"9.0.0.10.in-addr.arpa.", "0.0.10.in-addr.arpa."},     // zone held, name missing
		{"3.0.16.172.in-addr.arpa.", "0.16.172.in-addr.arpa."}, // held, but not ready here
		{"1.3.2.10.in-addr.arpa.", "3.2.10.in-addr.arpa."},     // zone not held here at all
	} {
		r := Answer(cfg, v, Question{Name: c.name, Type: PTRt})
		if !r.FanOut || r.Zone != c.key || !slices.Equal(r.Remote, []string{"b", "c"}) || r.Rcode != OK || len(r.Ns) != 0 {
			t.Errorf("%s: %+v, want a fan-out of zone %s to b and c", c.name, r, c.key)
		}
	}
}

// A replica asked by another answers from its share alone: a miss is
// NXDOMAIN with the reverse zone's SOA (SERVFAIL before the first sync),
// never a question sent on.
func TestAnswerPartialReverseLocalOnly(t *testing.T) {
	cfg := testConfig()
	for _, synced := range []bool{true, false} {
		v := newPartialView(t, cfg, synced, []string{"b", "c"})
		for _, name := range []string{"9.0.0.10.in-addr.arpa.", "3.0.16.172.in-addr.arpa.", "1.3.2.10.in-addr.arpa."} {
			r := Answer(cfg, v, Question{Name: name, Type: PTRt, LocalOnly: true})
			if r.FanOut || len(r.Remote) != 0 || len(r.Answer) != 0 {
				t.Errorf("%s (synced %v): %+v, want this share's answer", name, synced, r)
				continue
			}
			switch {
			case !synced && r.Rcode != dns.RcodeServerFailure:
				t.Errorf("%s before sync: rcode %s, want SERVFAIL", name, dns.RcodeToString[r.Rcode])
			case synced && (r.Rcode != NX || len(r.Ns) != 1 || r.Ns[0].Header().Name != "in-addr.arpa."):
				t.Errorf("%s: rcode %s, ns %v, want NXDOMAIN with the SOA of in-addr.arpa.", name, dns.RcodeToString[r.Rcode], r.Ns)
			}
		}
		r := Answer(cfg, v, Question{Name: "1.0.0.10.in-addr.arpa.", Type: PTRt, LocalOnly: true})
		if len(r.Answer) != 1 {
			t.Errorf("a hit asked local only (synced %v): %+v, want the PTR", synced, r)
		}
	}
}

// With no other member, this node's share is the whole zone: a miss is
// its NXDOMAIN. A node that holds no share of its own (a node-local
// cache, whose owners view places the zone with nobody) says SERVFAIL.
func TestAnswerPartialReverseNoMembers(t *testing.T) {
	cfg := testConfig()
	v := newPartialView(t, cfg, true, []string{})
	runCases(t, v, cfg, []tc{
		{qname: "9.0.0.10.in-addr.arpa.", qtype: PTRt, rcode: NX, soa: "in-addr.arpa."},
		{qname: "1.3.2.10.in-addr.arpa.", qtype: PTRt, rcode: NX, soa: "in-addr.arpa."},
		{qname: "1.0.0.10.in-addr.arpa.", qtype: PTRt, answer: []string{"1.0.0.10.in-addr.arpa. 5 IN PTR svc1.ns1.svc.cluster.local."}},
	})
	v.remote["3.2.10.in-addr.arpa."] = []string{}
	if r := Answer(cfg, v, Question{Name: "1.3.2.10.in-addr.arpa.", Type: PTRt}); r.Rcode != dns.RcodeServerFailure {
		t.Errorf("no share held and nobody to ask: %+v, want SERVFAIL", r)
	}
}

// Fan-out concerns reverse zones only, and a nil FanOut keeps reverse
// zones whole: a zone held elsewhere goes to its owners as before.
func TestAnswerFanOutLeavesOtherZonesAlone(t *testing.T) {
	cfg := testConfig()
	v := newPartialView(t, cfg, true, []string{"b", "c"})
	v.missing["ns1.svc.cluster.local."] = true
	v.remote["ns1.svc.cluster.local."] = []string{"o"}
	r := Answer(cfg, v, Question{Name: "svc1.ns1.svc.cluster.local.", Type: A})
	if r.FanOut || !slices.Equal(r.Remote, []string{"o"}) {
		t.Errorf("service name: %+v, want its owner o", r)
	}
	r = Answer(cfg, v, Question{Name: "nope.ns2.svc.cluster.local.", Type: A})
	if r.FanOut || r.Rcode != NX {
		t.Errorf("service zone held here: %+v, want its NXDOMAIN", r)
	}

	v.fan = nil
	v.missing["0.0.10.in-addr.arpa."] = true
	v.remote["0.0.10.in-addr.arpa."] = []string{"o", "p"}
	r = Answer(cfg, v, Question{Name: "1.0.0.10.in-addr.arpa.", Type: PTRt})
	if r.FanOut || !slices.Equal(r.Remote, []string{"o", "p"}) || r.Zone != "0.0.10.in-addr.arpa." {
		t.Errorf("whole reverse zone held elsewhere: %+v, want its owners o, p", r)
	}
	if r := Answer(cfg, v, Question{Name: "9.0.16.172.in-addr.arpa.", Type: PTRt}); r.Rcode != NX || len(r.Remote) != 0 {
		t.Errorf("whole reverse zone held here: %+v, want its NXDOMAIN", r)
	}
}

// A table returns the members it was given for every reverse key, nil
// once fan-out is off. Turning fan-out on or off, or gaining the first
// other member, publishes the directory again (same content), so answers
// packed from the old one are rebuilt; a change of members alone does not.
func TestTableFanOut(t *testing.T) {
	cfg := testConfig()
	dir := NewDirectory(cfg, map[string]struct{}{"ns1": {}}, true, 7)
	tb := NewTable(dir)
	if tb.FanOut("0.0.10.in-addr.arpa.") != nil {
		t.Fatal("a new table fans out")
	}
	step := func(members []string, republished bool) {
		t.Helper()
		before := tb.Directory()
		tb.SetFanOut(members)
		after := tb.Directory()
		if got := tb.FanOut("1.2.3.in-addr.arpa."); !slices.Equal(got, members) || (got == nil) != (members == nil) {
			t.Fatalf("FanOut = %#v after SetFanOut(%#v)", got, members)
		}
		if (after != before) != republished {
			t.Fatalf("SetFanOut(%#v): directory republished %v, want %v", members, after != before, republished)
		}
		if after.Serial != 7 || !after.HasNamespace("ns1") || len(after.soa["in-addr.arpa."]) != 1 {
			t.Fatalf("the republished directory differs: %+v", after)
		}
	}
	step([]string{}, true)          // on, alone
	step([]string{"b"}, true)       // a member to ask
	step([]string{"b", "c"}, false) // more members: misses still go out
	step([]string{}, true)          // alone again
	step(nil, true)                 // off
	step(nil, false)
}
