package cluster

import "testing"

func ring(members ...Member) *Ring { return NewRing("a", members, 0) }

// The live ring changes at once; the placement only when the members or
// their state differ, and the ring it replaces is kept one step.
func TestRingStatePlace(t *testing.T) {
	var s RingState
	if s.Live() != nil || s.Placed() != nil {
		t.Fatal("a zero RingState holds a ring")
	}
	if _, ok := s.Remote("a"); ok {
		t.Fatal("a member found in no ring")
	}
	r1 := ring(Member{Name: "a", Remote: "a:1", Owner: true}, Member{Name: "b", Remote: "b:1", Owner: true})
	s.Init(r1)
	if s.Live() != r1 || s.Placed() != r1 {
		t.Fatal("Init sets the live and the placed ring")
	}
	same := ring(Member{Name: "a", Remote: "a:1", Owner: true}, Member{Name: "b", Remote: "b:1", Owner: true})
	s.SetLive(same)
	if s.Place(same) {
		t.Fatal("the same ring placed again")
	}
	if s.Live() != same || s.Placed() != r1 {
		t.Fatal("live or placed ring wrong after an unchanged ring")
	}
	r2 := ring(Member{Name: "a", Remote: "a:1", Owner: true}, Member{Name: "c", Remote: "c:1", Owner: true})
	s.SetLive(r2)
	if !s.Place(r2) || s.Placed() != r2 {
		t.Fatal("a changed ring not placed")
	}
	// b left two rings ago: it is still reached through the replaced ring.
	for member, want := range map[string]string{"a": "a:1", "b": "b:1", "c": "c:1"} {
		if got, ok := s.Remote(member); !ok || got != want {
			t.Errorf("Remote(%s) = %q, %v; want %q", member, got, ok, want)
		}
	}
	r3 := ring(Member{Name: "a", Remote: "a:1", Owner: true})
	s.SetLive(r3)
	s.Place(r3)
	if _, ok := s.Remote("b"); ok {
		t.Error("a member gone for three rings is still reached")
	}
	if got, _ := s.Remote("c"); got != "c:1" {
		t.Errorf("Remote(c) = %q, want c:1 from the replaced ring", got)
	}
}

// While the placement is held (a replica widening its watches), the live
// ring moves on and the remotes of the placed ring stay reachable.
func TestRingStateRemotePrefersLive(t *testing.T) {
	var s RingState
	s.Init(ring(Member{Name: "a", Remote: "old:1"}))
	s.SetLive(ring(Member{Name: "a", Remote: "new:1"}, Member{Name: "b"}))
	if got, _ := s.Remote("a"); got != "new:1" {
		t.Errorf("Remote(a) = %q, want the live ring's new:1", got)
	}
	if _, ok := s.Remote("b"); ok {
		t.Error("a member with no remote address reported")
	}
}
