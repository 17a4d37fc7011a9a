package cluster

import "testing"

// A replica's life as its announcements follow it: joins pending,
// announces once synced, says it is leaving once, and stands last only
// if it owned zones.
func TestLifecycleReplica(t *testing.T) {
	l := NewLifecycle(false)
	step := func(what string, got, want any) {
		t.Helper()
		if got != want {
			t.Fatalf("%s: %v, want %v", what, got, want)
		}
	}
	step("role on joining", l.Role(), RolePending)
	step("announce before sync", l.NextAnnounce(false), AnnounceWait)
	step("announce once synced", l.NextAnnounce(true), AnnounceNow)
	step("owner before the announcement went out", l.Owner(), false)
	step("say leaving before owning", l.SayLeaving(), false)
	l.Stop()
	step("last standing without owning", l.LastStanding(), false)

	l = NewLifecycle(false)
	l.Announced()
	step("owner", l.Owner(), true)
	step("role", l.Role(), RoleOwner)
	step("announce again", l.NextAnnounce(true), AnnounceDone)
	step("last standing before stopping", l.LastStanding(), false)
	l.Stop()
	step("last standing once stopping", l.LastStanding(), true)
	step("say leaving", l.SayLeaving(), true)
	step("role once said", l.Role(), RoleLeaving)
	step("say leaving twice", l.SayLeaving(), false)
}

// A failed announcement is asked again: nothing changes until Announced.
func TestLifecycleAnnounceRetried(t *testing.T) {
	l := NewLifecycle(false)
	if l.NextAnnounce(true) != AnnounceNow || l.NextAnnounce(true) != AnnounceNow {
		t.Fatal("an announcement that did not go out is not asked again")
	}
}

// A node-local process owns nothing, ever, and says nothing.
func TestLifecycleNodeLocal(t *testing.T) {
	l := NewLifecycle(true)
	if got := l.NextAnnounce(true); got != AnnounceDone {
		t.Fatalf("NextAnnounce = %v, want AnnounceDone", got)
	}
	l.Announced()
	l.Stop()
	if l.Owner() || l.LastStanding() || l.SayLeaving() || l.Role() != RoleNone {
		t.Fatalf("a node-local process owns: owner %v, last %v, role %q", l.Owner(), l.LastStanding(), l.Role())
	}
}
