package zonemanager

import (
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/shardns/shardns/cluster"
)

// An owner that leaves the ring is asked, by every replica, for the
// zones it owned until its grace ends: not one found down, nor one that
// owned nothing, nor self, nor one back on the ring.
func TestDepartedOwnersAreAskedThroughTheirGrace(t *testing.T) {
	at := time.Unix(1000, 0)
	old := cluster.NewRing("a", []cluster.Member{{Name: "a", Owner: true}, {Name: "b", Owner: true},
		{Name: "c", Owner: true}, {Name: "d", Owner: true, Down: true}, {Name: "n"}}, 1)
	now := cluster.NewRing("a", []cluster.Member{{Name: "a", Owner: true}, {Name: "b", Owner: true}}, 1)
	d := departed(nil).note(old, now, at, 10*time.Second)
	if names := []string{}; len(d) != 1 || d[0].name != "c" {
		for _, x := range d {
			names = append(names, x.name)
		}
		t.Fatalf("departed %q, want [c]: d was found down, n owned nothing", names)
	}

	// c is asked for the zones it owned, after the ring's owner (b or a).
	var ownedByC, ownedByOthers []string
	for i := range 64 {
		key := fmt.Sprintf("n%d.svc.cluster.local.", i)
		if old.Owns("c", key) {
			ownedByC = append(ownedByC, key)
		} else {
			ownedByOthers = append(ownedByOthers, key)
		}
	}
	if len(ownedByC) == 0 || len(ownedByOthers) == 0 {
		t.Fatal("c owned no zone, or every zone: the test checks nothing")
	}
	for _, key := range ownedByC {
		if got := d.holders(key, at.Add(time.Second)); !slices.Equal(got, []string{"c"}) {
			t.Fatalf("%s, owned by c: holders %q, want [c]", key, got)
		}
		order := askOrder(now.Order(key), now.Replication, "x", d.holders(key, at))
		if want := []string{now.Order(key)[0], "c"}; !slices.Equal(order[:2], want) {
			t.Fatalf("%s: ask order %q, want %q first", key, order, want)
		}
	}
	for _, key := range ownedByOthers {
		if got := d.holders(key, at); len(got) != 0 {
			t.Fatalf("%s, not c's: holders %q", key, got)
		}
	}
	if got := d.holders(ownedByC[0], at.Add(10*time.Second)); len(got) != 0 {
		t.Fatalf("past the grace: holders %q", got)
	}
	if left := d.expire(at.Add(10 * time.Second)); len(left) != 0 || len(d) != 1 {
		t.Fatalf("expire left %d of %d", len(left), len(d))
	}

	// A later change keeps c through its grace, and forgets it once it
	// is back on the ring.
	if kept := d.note(now, now, at.Add(time.Second), 10*time.Second); len(kept) != 1 || kept[0].until != d[0].until {
		t.Fatalf("a later ring change: %+v", kept)
	}
	if kept := d.note(now, old, at.Add(time.Second), 10*time.Second); len(kept) != 0 {
		t.Fatalf("c back on the ring: %+v", kept)
	}
}
