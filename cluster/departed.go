package cluster

import (
	"slices"
	"time"
)

// Departure is an owner that left the ring without being found down: a
// replica leaving in its lameduck (a scale-in, a rolling update), which
// still answers the zones it owned while their new owners load them.
// Every process asks it for those zones right after their new owners
// (QuestionOrder), not only the replicas that gained them: a new owner still
// loading says it does not hold the zone, and the replicas after it in
// the ring's order never held it, so a question would wait out its
// budget for the load and end in SERVFAIL.
type Departure struct {
	Name  string
	Was   *Ring     // the last ring it owned zones in
	Until time.Time // the end of its grace (cluster.handoffGrace)
}

// Departed are the owners that left the ring within their grace.
type Departed []Departure

// Note returns d with the owners of old that are not members of now
// added, each for grace from at; those past their grace, or on the ring
// again, are dropped. A member found down (its port refusing
// connections) is not added: it answers nothing.
func (d Departed) Note(old, now *Ring, at time.Time, grace time.Duration) Departed {
	kept := Departed{}
	for _, x := range d {
		if _, back := now.Member(x.Name); at.Before(x.Until) && !back {
			kept = append(kept, x)
		}
	}
	for _, m := range old.Members {
		if !m.Owner || m.Down || m.Name == now.Self {
			continue
		}
		if _, ok := now.Member(m.Name); !ok {
			kept = append(kept, Departure{Name: m.Name, Was: old, Until: at.Add(grace)})
		}
	}
	return kept
}

// Holders lists the departed members that owned key in the ring they
// left, as of at: those within their grace.
func (d Departed) Holders(key string, at time.Time) []string {
	var out []string
	for _, x := range d {
		if at.Before(x.Until) && x.Was.Owns(x.Name, key) && !slices.Contains(out, x.Name) {
			out = append(out, x.Name)
		}
	}
	return out
}

// Expire returns d without the departures past their grace at at.
func (d Departed) Expire(at time.Time) Departed {
	return slices.DeleteFunc(slices.Clone(d), func(x Departure) bool { return !at.Before(x.Until) })
}

// FirstEnd is when the first of d's graces ends; the zero time when d
// is empty.
func (d Departed) FirstEnd() time.Time {
	var first time.Time
	for _, x := range d {
		if first.IsZero() || x.Until.Before(first) {
			first = x.Until
		}
	}
	return first
}

// QuestionOrder is where a question for a zone goes when it is not answered
// here: the ring's order for the zone (ringOrder, of which owners lead
// it as the zone's owners; 0 or more than there are when every owner
// holds every zone), self left out, with the replicas that held the zone
// and may still answer it (holders) right after its owners: those a
// replica gained it from while it loads there (through their grace, or
// in their lameduck when they left the ring), and owners that left while
// another loads it (Departed). A question is asked of the first few of
// the order alone (query.Cluster.Attempts), so holders placed after the
// whole ring would not be asked on a ring of more than a few replicas.
func QuestionOrder(ringOrder []string, owners int, self string, holders []string) []string {
	if owners <= 0 || owners > len(ringOrder) {
		owners = len(ringOrder)
	}
	order := []string{}
	add := func(names []string) {
		for _, name := range names {
			if name != self && !slices.Contains(order, name) {
				order = append(order, name)
			}
		}
	}
	add(ringOrder[:owners])
	add(holders)
	add(ringOrder[owners:])
	return order
}
