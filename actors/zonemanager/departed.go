package zonemanager

import (
	"slices"
	"time"

	"github.com/shardns/shardns/cluster"
)

// departure is an owner that left the ring without being found down: a
// replica leaving in its lameduck (a scale-in, a rolling update), which
// still answers the zones it owned while their new owners load them.
// Every replica asks it for those zones after their new owners, not
// only the replicas that gained them (handoff.go's holders): a new
// owner still loading says it does not hold the zone, and the replicas
// after it in the ring's order never held it, so a question would wait
// out its budget for the load and end in SERVFAIL.
type departure struct {
	name  string
	was   *cluster.Ring // the last ring it owned zones in
	until time.Time     // the end of its grace (cluster.handoffGrace)
}

// departed are the owners that left the ring within their grace.
type departed []departure

// note returns d with the owners of old that are not members of now
// added, each for grace from at; those past their grace, or on the ring
// again, are dropped. A member found down (its port refusing
// connections) is not added: it answers nothing.
func (d departed) note(old, now *cluster.Ring, at time.Time, grace time.Duration) departed {
	kept := departed{}
	for _, x := range d {
		if _, back := now.Member(x.name); at.Before(x.until) && !back {
			kept = append(kept, x)
		}
	}
	for _, m := range old.Members {
		if !m.Owner || m.Down || m.Name == now.Self {
			continue
		}
		if _, ok := now.Member(m.Name); !ok {
			kept = append(kept, departure{name: m.Name, was: old, until: at.Add(grace)})
		}
	}
	return kept
}

// holders lists the departed members that owned key in the ring they
// left, as of at: those within their grace.
func (d departed) holders(key string, at time.Time) []string {
	var out []string
	for _, x := range d {
		if at.Before(x.until) && x.was.Owns(x.name, key) && !slices.Contains(out, x.name) {
			out = append(out, x.name)
		}
	}
	return out
}

// expire returns d without the departures past their grace at at.
func (d departed) expire(at time.Time) departed {
	return slices.DeleteFunc(slices.Clone(d), func(x departure) bool { return !at.Before(x.until) })
}

// departuresOver makes the Manager publish its placement again once the
// departures it noted are past their grace, without them.
type departuresOver struct{}
