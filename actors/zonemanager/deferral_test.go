package zonemanager

import (
	"slices"
	"testing"
	"time"

	"github.com/shardns/shardns/cluster"
)

// The wait for the replicas still syncing, decided from the rings alone.
func TestPendingWaitStep(t *testing.T) {
	joining := cluster.NewRing("a", []cluster.Member{{Name: "a"}, {Name: "b", Pending: true}}, 1)
	announced := cluster.NewRing("a", []cluster.Member{{Name: "a", Owner: true}, {Name: "b", Pending: true}}, 1)
	bothOwners := cluster.NewRing("a", []cluster.Member{{Name: "a", Owner: true}, {Name: "b", Owner: true}}, 1)
	alone := cluster.NewRing("a", []cluster.Member{{Name: "a", Owner: true}}, 1)
	defers := func(*cluster.Ring) bool { return true }
	defersNothing := func(*cluster.Ring) bool { return false }
	waiting := announced.Eventual()
	for _, tc := range []struct {
		name      string
		old, now  *cluster.Ring
		waiting   *cluster.Ring
		defers    func(*cluster.Ring) bool
		wantWait  bool // an eventual ring to wait for
		wantStart bool
	}{
		{"announces while b syncs: the wait starts", joining, announced, nil, defers, true, true},
		{"announces while b syncs, nothing would be deferred: no wait", joining, announced, nil, defersNothing, false, false},
		{"announces alone: nothing to wait for", joining, alone, nil, defers, false, false},
		{"already an owner, no wait under way: nothing", announced, announced, nil, defers, false, false},
		{"b announces during the wait: it ends", announced, bothOwners, waiting, defers, false, false},
		{"a ring change during the wait, b still syncing: followed, no new timer", announced, announced, waiting, defers, true, false},
		{"no ring: the wait is left as it is", announced, nil, waiting, defers, true, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			eventual, start := pendingWaitStep(tc.old, tc.now, "a", tc.waiting, tc.defers)
			if (eventual != nil) != tc.wantWait || start != tc.wantStart {
				t.Errorf("waits %v (eventual %v), starts %v; want waits %v, starts %v", eventual != nil, eventual, start, tc.wantWait, tc.wantStart)
			}
		})
	}
}

func TestPendingWait(t *testing.T) {
	for _, tc := range []struct {
		configured, grace, want time.Duration
	}{
		{time.Second, time.Minute, time.Second},
		{0, time.Minute, 30 * time.Second},
		{0, 0, DefaultPendingWait},
	} {
		if got := pendingWait(tc.configured, tc.grace); got != tc.want {
			t.Errorf("pendingWait(%v, %v) = %v, want %v", tc.configured, tc.grace, got, tc.want)
		}
	}
}

// Once the wait ends without the replicas still syncing, the deferred
// zones without an actor load; the others are there already.
func TestDeferredToLoad(t *testing.T) {
	f := facts{owned: []string{"d1", "d2", "kept"}, deferred: []string{"d1", "d2"}, active: []string{"d2", "kept"}}
	if got := deferredToLoad(f, slices.Values([]string{"d1", "d2", "kept", "other"})); !slices.Equal(got, []string{"d1"}) {
		t.Errorf("loads %q, want the deferred zone without an actor", got)
	}
}
