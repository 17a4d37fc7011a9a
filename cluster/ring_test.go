package cluster

import (
	"fmt"
	"slices"
	"testing"
)

func TestOwnersTable(t *testing.T) {
	members := []string{"shardns-0", "shardns-1", "shardns-2"}
	cases := []struct {
		name string
		r    int
		want int
	}{
		{"one owner", 1, 1},
		{"two owners", 2, 2},
		{"zero means all", 0, 3},
		{"more than members means all", 5, 3},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			got := Owners(members, "ns1.svc.cluster.local.", c.r)
			if len(got) != c.want {
				t.Fatalf("Owners = %v, want %d owners", got, c.want)
			}
			for _, g := range got {
				if !slices.Contains(members, g) {
					t.Fatalf("owner %q is not a member", g)
				}
			}
		})
	}
}

// Every node must agree, whatever order it learned the members in.
func TestOwnersIgnoresMemberOrder(t *testing.T) {
	a := Owners([]string{"a", "b", "c", "d"}, "k.", 2)
	b := Owners([]string{"d", "c", "b", "a"}, "k.", 2)
	if !slices.Equal(a, b) {
		t.Fatalf("owners depend on member order: %v vs %v", a, b)
	}
}

// A joining member takes about 1/N of the zones and moves no others.
func TestOwnersMoveOnJoin(t *testing.T) {
	before := []string{"n0", "n1", "n2", "n3"}
	after := append(slices.Clone(before), "n4")
	const zones = 5000
	moved := 0
	for i := range zones {
		key := fmt.Sprintf("ns%d.svc.cluster.local.", i)
		o1, o2 := Owners(before, key, 1)[0], Owners(after, key, 1)[0]
		if o1 != o2 {
			moved++
			if o2 != "n4" {
				t.Fatalf("zone %s moved between old members %s → %s", key, o1, o2)
			}
		}
	}
	share := float64(moved) / zones
	if share < 0.15 || share > 0.25 {
		t.Fatalf("%.3f of zones moved on join, want about 1/5", share)
	}
}

func TestOwnersBalance(t *testing.T) {
	members := []string{"n0", "n1", "n2"}
	count := map[string]int{}
	for i := range 3000 {
		count[Owners(members, fmt.Sprintf("%d.0.10.in-addr.arpa.", i), 1)[0]]++
	}
	for m, c := range count {
		if c < 800 || c > 1200 {
			t.Fatalf("member %s owns %d of 3000 zones, want about 1000", m, c)
		}
	}
}

func TestRingOwnership(t *testing.T) {
	members := []Member{{Name: "a", Owner: true}, {Name: "b", Owner: true}, {Name: "c", Owner: true}, {Name: "local", Owner: false}}
	r := NewRing("a", members, 2)
	for i := range 200 {
		key := fmt.Sprintf("ns%d.svc.cluster.local.", i)
		order := r.Order(key)
		if len(order) != 3 || slices.Contains(order, "local") {
			t.Fatalf("order %v: want the three owners only", order)
		}
		owners := 0
		for _, m := range []string{"a", "b", "c", "local"} {
			if r.Owns(m, key) {
				owners++
				if !slices.Contains(order[:2], m) {
					t.Fatalf("%s owns %s but is not among the first two of %v", m, key, order)
				}
			}
		}
		if owners != 2 {
			t.Fatalf("%s has %d owners, want 2", key, owners)
		}
	}
	all := NewRing("a", members, 0)
	if !all.Owns("b", "x.") || all.Owns("local", "x.") {
		t.Fatal("replication 0: every owning member owns every zone, non-owners none")
	}
}

// After a member joins, the member that lost a zone comes right after the
// new owner in the order: queries reach it while the new owner loads.
func TestRingLoserIsNextCandidate(t *testing.T) {
	before := NewRing("a", []Member{{Name: "a", Owner: true}, {Name: "b", Owner: true}}, 1)
	after := NewRing("a", []Member{{Name: "a", Owner: true}, {Name: "b", Owner: true}, {Name: "n", Owner: true}}, 1)
	moved := 0
	for i := range 300 {
		key := fmt.Sprintf("%d.0.10.in-addr.arpa.", i)
		old, order := before.Order(key)[0], after.Order(key)
		if order[0] == "n" {
			moved++
			if order[1] != old {
				t.Fatalf("%s: old owner %s is not next after the new one in %v", key, old, order)
			}
		}
	}
	if moved == 0 {
		t.Fatal("no zone moved to the new member")
	}
}

// A ring of node-local members only has no one to ask.
func TestRingHasOwners(t *testing.T) {
	if NewRing("nl", []Member{{Name: "nl"}}, 2).HasOwners() {
		t.Error("a ring without owners says it has one")
	}
	if !NewRing("nl", []Member{{Name: "nl"}, {Name: "r0", Owner: true}}, 2).HasOwners() {
		t.Error("a ring with an owner says it has none")
	}
}

// Rings of the same members in any order are the same; a member's
// address or state, another self or replication make another ring.
func TestRingSame(t *testing.T) {
	members := []Member{{Name: "r0", Remote: "a:1", Owner: true}, {Name: "r1", Remote: "b:1", Owner: true}}
	r := NewRing("r0", members, 1)
	if !r.Same(NewRing("r0", []Member{members[1], members[0]}, 1)) {
		t.Error("the same members in another order make another ring")
	}
	for name, other := range map[string]*Ring{
		"another self":        NewRing("r1", members, 1),
		"another replication": NewRing("r0", members, 2),
		"a member down":       NewRing("r0", []Member{members[0], {Name: "r1", Remote: "b:1", Owner: true, Down: true}}, 1),
		"a member pending":    NewRing("r0", []Member{members[0], {Name: "r1", Remote: "b:1", Pending: true}}, 1),
		"another address":     NewRing("r0", []Member{members[0], {Name: "r1", Remote: "b:2", Owner: true}}, 1),
		"a member fewer":      NewRing("r0", members[:1], 1),
		"none":                nil,
	} {
		if r.Same(other) {
			t.Errorf("%s: the same ring", name)
		}
	}
}

// A member found down owns nothing: each of its zones goes to the member
// that came after it in the order, and no other zone moves, so a replica
// that takes a down member out of its ring only gains zones.
func TestRingDownMemberHandsItsZonesToTheNext(t *testing.T) {
	up := []Member{{Name: "a", Owner: true}, {Name: "b", Owner: true}, {Name: "c", Owner: true}}
	down := slices.Clone(up)
	down[2].Down = true
	before, after := NewRing("a", up, 1), NewRing("a", down, 1)
	moved := 0
	for i := range 300 {
		key := fmt.Sprintf("ns%d.svc.cluster.local.", i)
		old, order := before.Order(key), after.Order(key)
		if slices.Contains(order, "c") || after.Owns("c", key) {
			t.Fatalf("%s: down member c is still in %v", key, order)
		}
		want := slices.DeleteFunc(slices.Clone(old), func(m string) bool { return m == "c" })
		if !slices.Equal(order, want) {
			t.Fatalf("%s: order %v with c down, want %v (was %v)", key, order, want, old)
		}
		if old[0] == "c" {
			moved++
		}
		for _, m := range []string{"a", "b"} {
			if before.Owns(m, key) && !after.Owns(m, key) {
				t.Fatalf("%s: %s lost the zone when c went down", key, m)
			}
		}
	}
	if moved == 0 {
		t.Fatal("c owned no zone")
	}
	if NewRing("a", down, 0).Owns("c", "x.") {
		t.Fatal("replication 0: a down member owns a zone")
	}
	if NewRing("a", []Member{{Name: "r0", Owner: true, Down: true}}, 1).HasOwners() {
		t.Fatal("a ring whose only owner is down says it has one")
	}
}

// A replica that has not announced itself is given, in the ring
// Prospective makes, what it will own once it and the other pending
// replicas have announced: exactly that when they all do, a subset when
// one of them never does, and node-local members (neither owners nor
// pending) count for nothing.
func TestRingProspective(t *testing.T) {
	owners := []Member{{Name: "a", Owner: true}, {Name: "b", Owner: true}, {Name: "c", Owner: true}, {Name: "local"}}
	now := NewRing("d", append(slices.Clone(owners), Member{Name: "d", Pending: true}, Member{Name: "e", Pending: true}), 1)
	prospective := now.Prospective("d")
	both := NewRing("d", append(slices.Clone(owners), Member{Name: "d", Owner: true}, Member{Name: "e", Owner: true}), 1)
	dOnly := NewRing("d", append(slices.Clone(owners), Member{Name: "d", Owner: true}, Member{Name: "e", Pending: true}), 1)
	gained := 0
	for i := range 300 {
		key := fmt.Sprintf("ns%d.svc.cluster.local.", i)
		if now.Owns("d", key) {
			t.Fatalf("d owns %s before it announced itself", key)
		}
		if prospective.Owns("d", key) != both.Owns("d", key) {
			t.Fatalf("%s: Prospective gives d %v, the ring where d and e announced %v", key, prospective.Owns("d", key), both.Owns("d", key))
		}
		if prospective.Owns("d", key) && !dOnly.Owns("d", key) {
			t.Fatalf("%s: d owns it in the prospective ring but not once it alone announced", key)
		}
		if prospective.Owns("local", key) {
			t.Fatalf("%s: a node-local member owns it in the prospective ring", key)
		}
		if prospective.Owns("d", key) {
			gained++
		}
	}
	if gained < 30 || gained > 100 {
		t.Fatalf("d would own %d of 300 zones, want about a fifth", gained)
	}
	if now.Prospective("a") != now || now.Prospective("nobody") != now {
		t.Fatal("Prospective of an owner or a stranger must return the ring itself")
	}
	down := NewRing("d", append(slices.Clone(owners), Member{Name: "d", Down: true}), 1)
	if down.Prospective("d") != down {
		t.Fatal("Prospective of a member found down must return the ring itself")
	}
}
