package cluster

import (
	"fmt"
	"slices"
	"testing"
	"time"
)

// An owner that leaves the ring is asked, by every replica, for the
// zones it owned until its grace ends: not one found down, nor one that
// owned nothing, nor self, nor one back on the ring.
func TestDepartedOwnersAreAskedThroughTheirGrace(t *testing.T) {
	at := time.Unix(1000, 0)
	old := NewRing("a", []Member{{Name: "a", Owner: true}, {Name: "b", Owner: true},
		{Name: "c", Owner: true}, {Name: "d", Owner: true, Down: true}, {Name: "n"}}, 1)
	now := NewRing("a", []Member{{Name: "a", Owner: true}, {Name: "b", Owner: true}}, 1)
	d := Departed(nil).Note(old, now, at, 10*time.Second)
	if names := []string{}; len(d) != 1 || d[0].Name != "c" {
		for _, x := range d {
			names = append(names, x.Name)
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
		if got := d.Holders(key, at.Add(time.Second)); !slices.Equal(got, []string{"c"}) {
			t.Fatalf("%s, owned by c: holders %q, want [c]", key, got)
		}
		order := QuestionOrder(now.Order(key), now.Replication, "x", d.Holders(key, at))
		if want := []string{now.Order(key)[0], "c"}; !slices.Equal(order[:2], want) {
			t.Fatalf("%s: ask order %q, want %q first", key, order, want)
		}
	}
	for _, key := range ownedByOthers {
		if got := d.Holders(key, at); len(got) != 0 {
			t.Fatalf("%s, not c's: holders %q", key, got)
		}
	}
	if got := d.Holders(ownedByC[0], at.Add(10*time.Second)); len(got) != 0 {
		t.Fatalf("past the grace: holders %q", got)
	}
	if left := d.Expire(at.Add(10 * time.Second)); len(left) != 0 || len(d) != 1 {
		t.Fatalf("expire left %d of %d", len(left), len(d))
	}

	// A later change keeps c through its grace, and forgets it once it
	// is back on the ring.
	if kept := d.Note(now, now, at.Add(time.Second), 10*time.Second); len(kept) != 1 || kept[0].Until != d[0].Until {
		t.Fatalf("a later ring change: %+v", kept)
	}
	if kept := d.Note(now, old, at.Add(time.Second), 10*time.Second); len(kept) != 0 {
		t.Fatalf("c back on the ring: %+v", kept)
	}
}

// A zone's questions go to its owners, then to the replicas that held
// it, then to the rest of the ring, never to self.
func TestQuestionOrder(t *testing.T) {
	for _, tc := range []struct {
		name          string
		ring          []string
		owners        int
		holders, want []string
	}{
		{"the ring's order, self left out", []string{"b", "a", "c"}, 1, nil, []string{"b", "c"}},
		{"then the replicas that held it", []string{"a", "c"}, 1, []string{"b", "c"}, []string{"b", "c"}},
		{"holders right after the owners", []string{"b", "c", "d", "e"}, 1, []string{"f"}, []string{"b", "f", "c", "d", "e"}},
		{"after every owner", []string{"b", "c", "d", "e"}, 2, []string{"f", "d"}, []string{"b", "c", "f", "d", "e"}},
		{"every owner holds every zone: holders last", []string{"b", "c"}, 0, []string{"f"}, []string{"b", "c", "f"}},
		{"more owners than members: holders last", []string{"b", "c"}, 3, []string{"f"}, []string{"b", "c", "f"}},
		{"alone on the ring: only its holders", []string{"a"}, 1, []string{"b"}, []string{"b"}},
		{"alone and no holder: nowhere", []string{"a"}, 1, nil, []string{}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := QuestionOrder(tc.ring, tc.owners, "a", tc.holders); !slices.Equal(got, tc.want) {
				t.Errorf("QuestionOrder = %q, want %q", got, tc.want)
			}
		})
	}
}
