package query

import (
	"net"
	"slices"
	"testing"

	"github.com/miekg/dns"
)

// An answer ordered for the asker's zone (topology: prefer) keeps its
// preferred addresses first under loadbalance: each run is shuffled on
// its own, and both are, so every address still gets its turn first in
// its run.
func TestShuffledRunsKeepPreferredFirst(t *testing.T) {
	a := func(ip string) dns.RR {
		return &dns.A{Hdr: dns.RR_Header{Name: "db.", Rrtype: dns.TypeA}, A: net.ParseIP(ip)}
	}
	answer := []dns.RR{a("10.0.1.1"), a("10.0.1.2"), a("10.0.0.1"), a("10.0.0.2"), a("10.0.0.3")}
	near, far := []string{"10.0.1.1", "10.0.1.2"}, []string{"10.0.0.1", "10.0.0.2", "10.0.0.3"}
	firsts, thirds := map[string]bool{}, map[string]bool{}
	for range 200 {
		got := addrs(shuffledRuns(answer, 2))
		if !sameSet(got[:2], near) || !sameSet(got[2:], far) {
			t.Fatalf("runs mixed: %v, want %v then %v", got, near, far)
		}
		firsts[got[0]], thirds[got[2]] = true, true
	}
	if len(firsts) != len(near) || len(thirds) != len(far) {
		t.Fatalf("runs not shuffled: first addresses %v, third %v", firsts, thirds)
	}
	if got := addrs(answer); !slices.Equal(got, append(slices.Clone(near), far...)) {
		t.Fatalf("the answer given was modified: %v", got)
	}
	// 0, or a count past the answer, is one run: every address may lead.
	for _, preferred := range []int{0, 5, 9} {
		firsts := map[string]bool{}
		for range 200 {
			firsts[addrs(shuffledRuns(answer, preferred))[0]] = true
		}
		if len(firsts) != len(answer) {
			t.Errorf("preferred %d: only %v came first", preferred, firsts)
		}
	}
	// A run of one address stays where it is; the other is shuffled.
	one := []dns.RR{a("10.0.1.1"), a("10.0.0.1"), a("10.0.0.2")}
	for range 50 {
		if got := addrs(shuffledRuns(one, 1)); got[0] != "10.0.1.1" {
			t.Fatalf("the preferred address moved: %v", got)
		}
	}
}

func addrs(rrs []dns.RR) []string {
	var out []string
	for _, rr := range rrs {
		out = append(out, rr.(*dns.A).A.String())
	}
	return out
}

func sameSet(a, b []string) bool {
	a, b = slices.Clone(a), slices.Clone(b)
	slices.Sort(a)
	slices.Sort(b)
	return slices.Equal(a, b)
}
