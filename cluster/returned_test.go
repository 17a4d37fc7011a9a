package cluster

import (
	"slices"
	"testing"
)

func TestReturned(t *testing.T) {
	a := Member{Name: "a", Remote: "10.0.0.1:8090", Owner: true}
	b := Member{Name: "b", Remote: "10.0.0.2:8090", Owner: true}
	c := Member{Name: "c", Remote: "10.0.0.3:8090", Owner: true}
	down := func(m Member) Member { m.Down = true; return m }
	moved := func(m Member) Member { m.Remote = "10.0.0.9:8090"; return m }
	pending := func(m Member) Member { m.Owner, m.Pending = false, true; return m }
	ring := func(ms ...Member) *Ring { return NewRing("a", ms, 1) }
	cases := []struct {
		name       string
		prev, next *Ring
		want       []string
	}{
		{"first ring", nil, ring(a, b, c), nil},
		{"nothing changed", ring(a, b, c), ring(a, b, c), nil},
		{"back after gossip declared it dead", ring(a, b), ring(a, b, c), []string{c.Remote}},
		{"the cut side sees both others back", ring(a), ring(a, b, c), []string{b.Remote, c.Remote}},
		{"back after found down", ring(a, b, down(c)), ring(a, b, c), []string{c.Remote}},
		{"back and not an owner yet", ring(a, b), ring(a, b, pending(c)), []string{c.Remote}},
		{"found down: nothing to ask it", ring(a, b, c), ring(a, b, down(c)), nil},
		{"gone", ring(a, b, c), ring(a, b), nil},
		{"a new remote address", ring(a, b, c), ring(a, b, moved(c)), []string{moved(c).Remote}},
		{"a change of role keeps the connection", ring(a, b, c), ring(a, b, pending(c)), nil},
		{"itself never", ring(b, c), ring(a, b, c), nil},
		{"no next ring", ring(a, b), nil, nil},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			if got := Returned(tc.prev, tc.next); !slices.Equal(got, tc.want) {
				t.Fatalf("Returned = %v, want %v", got, tc.want)
			}
		})
	}
}
