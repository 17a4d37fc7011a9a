package cluster

import (
	"slices"
	"testing"
)

func TestBuildRing(t *testing.T) {
	self := RingBuild{Self: "a", SelfRemote: "10.0.0.1:8090", Replication: 2}
	stopping := self
	stopping.LastStanding = true
	for _, c := range []struct {
		name        string
		build       RingBuild
		candidates  []Candidate
		owners      []string
		pending     []string
		down        []string
		wantMembers []string
	}{
		{name: "owners that may own own zones",
			build: self,
			candidates: []Candidate{{Name: "a", Role: RoleOwner, Remote: "10.0.0.1:8090"},
				{Name: "b", Role: RoleOwner, Remote: "10.0.0.2:8090", MayOwn: true},
				{Name: "c", Role: RoleLeaving, Remote: "10.0.0.3:8090", MayOwn: true}},
			owners: []string{"a", "b", "c"}, wantMembers: []string{"a", "b", "c"}},
		{name: "what a member says counts only if it may own",
			build: self,
			candidates: []Candidate{{Name: "a", Role: RoleOwner},
				{Name: "b", Role: RoleOwner}, {Name: "c", Role: RolePending}},
			owners: []string{"a"}, wantMembers: []string{"a", "b", "c"}},
		{name: "self may own and is never down whatever its checks say",
			build:      self,
			candidates: []Candidate{{Name: "a", Role: RoleOwner, Down: true}},
			owners:     []string{"a"}, wantMembers: []string{"a"}},
		{name: "pending and non-owners",
			build: self,
			candidates: []Candidate{{Name: "a", Role: RolePending},
				{Name: "b", Role: RolePending, MayOwn: true}, {Name: "n", Role: RoleNone, MayOwn: true}},
			pending: []string{"a", "b"}, wantMembers: []string{"a", "b", "n"}},
		{name: "a member found down owns nothing",
			build: self,
			candidates: []Candidate{{Name: "a", Role: RoleOwner},
				{Name: "b", Role: RoleOwner, MayOwn: true, Down: true}},
			owners: []string{"a"}, down: []string{"b"}, wantMembers: []string{"a", "b"}},
		{name: "last one standing owns alone once the others have gone",
			build:      stopping,
			candidates: []Candidate{{Name: "b", Role: RoleLeaving, MayOwn: true, Down: true}},
			owners:     []string{"a"}, down: []string{"b"}, wantMembers: []string{"a", "b"}},
		{name: "not the last one standing while another owner lives",
			build:      stopping,
			candidates: []Candidate{{Name: "b", Role: RoleOwner, MayOwn: true}},
			owners:     []string{"b"}, wantMembers: []string{"b"}},
		{name: "a replica that never owned does not stand last",
			build:       self,
			candidates:  nil,
			wantMembers: []string{}},
	} {
		t.Run(c.name, func(t *testing.T) {
			r := BuildRing(c.build, c.candidates)
			if r.Self != "a" || r.Replication != 2 {
				t.Fatalf("ring of %q with replication %d", r.Self, r.Replication)
			}
			names, pending, down := []string{}, []string(nil), []string(nil)
			for _, m := range r.Members {
				names = append(names, m.Name)
				if m.Pending {
					pending = append(pending, m.Name)
				}
				if m.Down {
					down = append(down, m.Name)
				}
			}
			if !slices.Equal(names, c.wantMembers) {
				t.Errorf("members %v, want %v", names, c.wantMembers)
			}
			if !slices.Equal(r.Owners(), c.owners) {
				t.Errorf("owners %v, want %v", r.Owners(), c.owners)
			}
			if !slices.Equal(pending, c.pending) {
				t.Errorf("pending %v, want %v", pending, c.pending)
			}
			if !slices.Equal(down, c.down) {
				t.Errorf("down %v, want %v", down, c.down)
			}
		})
	}
}

// The last one standing answers at its own remote address.
func TestBuildRingLastStandingRemote(t *testing.T) {
	r := BuildRing(RingBuild{Self: "a", SelfRemote: "10.0.0.1:8090", LastStanding: true}, nil)
	if m, ok := r.Member("a"); !ok || !m.Owner || m.Remote != "10.0.0.1:8090" {
		t.Fatalf("self in the ring: %+v, %v", m, ok)
	}
}

func TestOthersStay(t *testing.T) {
	for _, c := range []struct {
		name       string
		candidates []Candidate
		want       bool
	}{
		{"alone", []Candidate{{Name: "a", Role: RoleOwner}}, false},
		{"another owner", []Candidate{{Name: "a", Role: RoleLeaving}, {Name: "b", Role: RoleOwner}}, true},
		{"the other is leaving too", []Candidate{{Name: "a", Role: RoleLeaving}, {Name: "b", Role: RoleLeaving}}, false},
		{"the other is down", []Candidate{{Name: "b", Role: RoleOwner, Down: true}}, false},
		{"the other has not announced", []Candidate{{Name: "b", Role: RolePending}}, false},
		{"a node-local cache takes nothing over", []Candidate{{Name: "n", Role: RoleNone}}, false},
	} {
		if got := OthersStay("a", c.candidates); got != c.want {
			t.Errorf("%s: OthersStay = %v, want %v", c.name, got, c.want)
		}
	}
}

// A node-local process asks the replica that answered last first, then
// the owners, then the others; it reaches every owner that has not
// answered once.
func TestFeedOrder(t *testing.T) {
	members := []Candidate{{Name: "p", Role: RolePending, Remote: "p:1"}, {Name: "o1", Role: RoleOwner, Remote: "o1:1"},
		{Name: "n", Role: RoleNone, Remote: "n:1"}, {Name: "o2", Role: RoleOwner, Remote: "o2:1"}}
	for _, c := range []struct {
		last string
		want []string
	}{
		{"", []string{"o1:1", "o2:1", "p:1", "n:1"}},
		{"o2:1", []string{"o2:1", "o1:1", "p:1", "n:1"}},
		{"p:1", []string{"p:1", "o1:1", "o2:1", "n:1"}},
		{"gone:1", []string{"gone:1", "o1:1", "o2:1", "p:1", "n:1"}},
	} {
		if got := AskOrder(members, c.last); !slices.Equal(got, c.want) {
			t.Errorf("AskOrder(last %q) = %v, want %v", c.last, got, c.want)
		}
	}
	if got := Unreached(members, map[string]bool{"o1:1": true, "p:1": true}); !slices.Equal(got, []string{"o2:1"}) {
		t.Errorf("Unreached = %v, want [o2:1]", got)
	}
}
