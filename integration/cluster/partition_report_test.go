package cluster

import (
	"fmt"
	"maps"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/miekg/dns"
)

// What TestPartition's clients saw, phase by phase, and its verdict.

// partitionPhase is one cut: when it began, was healed, the replicas
// converged and then dropped the zones they held over (settled), as
// times since the load's start.
type partitionPhase struct {
	inboundOnly                   bool
	cut, heal, converged, settled time.Duration
}

func (ph partitionPhase) GoString() string {
	return fmt.Sprintf("{cut %.2f s, healed %.2f s, converged %.2f s, settled %.2f s}",
		ph.cut.Seconds(), ph.heal.Seconds(), ph.converged.Seconds(), ph.settled.Seconds())
}

func (ph partitionPhase) String() string {
	if ph.inboundOnly {
		return "one-way cut (the replica drops what it receives from the others)"
	}
	return "cut both ways"
}

// failedZone sums the SERVFAILs and unanswered questions of one zone from
// one replica, by the time they were sent.
type failedZone struct {
	n           int
	first, last time.Duration
}

// report logs what clients saw during the phase: the outcomes, the
// SERVFAIL window and the zones and replicas it came from, and the
// convergence time after the heal.
func (ph partitionPhase) report(t *testing.T, rep killReport) {
	t.Helper()
	var count [outcomes]int
	var stale, slow int
	servfailSecs, staleSecs := map[int]bool{}, map[int]bool{}
	zones := map[string]*failedZone{}
	for i, s := range rep.sent {
		if s < ph.cut || s >= ph.settled || rep.result[i] < 0 {
			continue
		}
		count[rep.result[i]]++
		sec := int((s - ph.cut) / time.Second)
		if rep.stale[i] {
			stale++
			staleSecs[sec] = true
		}
		if late(rep, i) {
			slow++
		}
		if rep.result[i] == answeredServfail {
			servfailSecs[sec] = true
		}
		if rep.result[i] != answeredServfail && rep.result[i] != answeredNot {
			continue
		}
		key := zoneOf(rep.asked[i].name) + " from " + rep.to[i]
		if s >= ph.converged {
			key += " after the heal"
		}
		z := zones[key]
		if z == nil {
			z = &failedZone{first: s}
			zones[key] = z
		}
		z.n++
		z.last = s
	}
	total := 0
	for _, c := range count {
		total += c
	}
	t.Logf("%s for %v: %d queries from the cut until the replicas settled, %.1f%% right (%d of them stale), %d SERVFAIL, "+
		"%d not answered within %v (%d not at all)", ph, partitionCut, total, 100*float64(count[answeredRight])/float64(max(total, 1)),
		stale, count[answeredServfail], slow, answerWithin, count[answeredNot])
	t.Logf("%s: SERVFAIL in %d seconds (%s), stale answers in %d seconds (%s), counted from the cut",
		ph, len(servfailSecs), secondsList(servfailSecs), len(staleSecs), secondsList(staleSecs))
	t.Logf("%s: rings and answers converged %.2f s after the heal", ph, (ph.converged - ph.heal).Seconds())
	keys := make([]string, 0, len(zones))
	for k := range zones {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	for _, k := range keys {
		z := zones[k]
		t.Logf("  %s: %d failed, sent %+.2f s to %+.2f s from the cut", k, z.n, (z.first - ph.cut).Seconds(), (z.last - ph.cut).Seconds())
	}
}

// secondsList is the seconds of secs in order, as "0-3, 7".
func secondsList(secs map[int]bool) string {
	keys := slices.Sorted(maps.Keys(secs))
	var out []string
	for i := 0; i < len(keys); {
		j := i
		for j+1 < len(keys) && keys[j+1] == keys[j]+1 {
			j++
		}
		if j == i {
			out = append(out, strconv.Itoa(keys[i]))
		} else {
			out = append(out, fmt.Sprintf("%d-%d", keys[i], keys[j]))
		}
		i = j + 1
	}
	return strings.Join(out, ", ")
}

// outcomeNames names the outcomes of a kill load in logs.
var outcomeNames = [outcomes]string{answeredRight: "right", answeredServfail: "SERVFAIL",
	answeredNXDOMAIN: "NXDOMAIN for a name that exists", answeredWrong: "a wrong answer", answeredNot: "no answer"}

// late reports whether query i got no answer within answerWithin.
func late(rep killReport, i int) bool {
	return rep.result[i] == answeredNot || rep.result[i] >= 0 && rep.took[i] > answerWithin
}

// checkPartitionLoad fails the test on any wrong answer or false
// NXDOMAIN, any question not answered within answerWithin, a convergence
// slower than convergeWithin, and on a failure outside the phases (before
// a cut, or after the convergence that followed its heal).
func checkPartitionLoad(t *testing.T, rep killReport, phases []partitionPhase) {
	t.Helper()
	if rep.wrong() > 0 {
		t.Errorf("%d wrong answers; e.g. %s %s", rep.wrong(), rep.example[answeredNXDOMAIN], rep.example[answeredWrong])
	}
	slow := 0
	for i := range rep.sent {
		if !late(rep, i) {
			continue
		}
		slow++
		if slow <= 5 {
			t.Logf("not answered within %v: %s %s to %s, sent at %.2f s of the load, %s after %v (phases %#v)",
				answerWithin, rep.asked[i].name, dns.TypeToString[rep.asked[i].qtype], rep.to[i], rep.sent[i].Seconds(),
				outcomeNames[rep.result[i]], rep.took[i], phases)
		}
	}
	if slow > 0 {
		t.Errorf("%d questions not answered within %v", slow, answerWithin)
	}
	for _, ph := range phases {
		if took := ph.converged - ph.heal; took > convergeWithin {
			t.Errorf("%s: converged %.2f s after the heal, want within %v", ph, took.Seconds(), convergeWithin)
		}
	}
	outside := 0
	for i, s := range rep.sent {
		if rep.result[i] != answeredServfail && rep.result[i] != answeredNot {
			continue
		}
		in := false
		for _, ph := range phases {
			in = in || (s >= ph.cut && s < ph.settled)
		}
		if !in {
			outside++
			if outside <= 5 {
				t.Logf("failed outside the partitions: %s %s to %s, sent at %.2f s of the load (phases %#v)",
					rep.asked[i].name, dns.TypeToString[rep.asked[i].qtype], rep.to[i], s.Seconds(), phases)
			}
		}
	}
	if outside > 0 {
		t.Errorf("%d queries failed outside the partitions", outside)
	}
	right := float64(rep.count[answeredRight]) / float64(max(rep.total, 1))
	t.Logf("success rate of the clients over the whole run: %.1f%%", 100*right)
	if right < 0.5 {
		t.Errorf("only %.1f%% of the questions were answered right", 100*right)
	}
}

// zoneOf is the zone key of the load's names: the namespace's service
// zone, or the /24 reverse zone.
func zoneOf(name string) string {
	labels := dns.SplitDomainName(name)
	n := 4
	if strings.HasSuffix(name, ".in-addr.arpa.") {
		n = 5
	}
	return strings.Join(labels[max(len(labels)-n, 0):], ".") + "."
}
