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
