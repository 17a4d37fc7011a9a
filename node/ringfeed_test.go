package node

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/shardns/shardns/cluster"
	"github.com/shardns/shardns/cluster/wire"
)

// replicasAnswering is a fetch where the replicas at the addresses of
// rings answer with that ring (version: its index + 1), and any other
// address fails. It records the addresses asked.
type replicasAnswering struct {
	rings map[string][]*wire.RingMember
	asked []string

	mu      sync.Mutex
	reached []string // the owners asked only to connect, in any order
	down    map[string]bool
}

// reach answers for the replicas that are not down; owners are asked at
// once, so it locks.
func (r *replicasAnswering) reach(_ context.Context, addr string, _ uint64) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.reached = append(r.reached, addr)
	if r.down[addr] {
		return errors.New("refused")
	}
	return nil
}

func (r *replicasAnswering) fetch(_ context.Context, addr string, known uint64) (uint64, []*wire.RingMember, error) {
	r.asked = append(r.asked, addr)
	members, ok := r.rings[addr]
	if !ok {
		return 0, nil, errors.New("refused")
	}
	version := uint64(len(members))
	if version == known {
		return known, nil, nil
	}
	return version, members, nil
}

func testFeed(r *replicasAnswering, seeds ...string) *ringFeed {
	return &ringFeed{fetch: r.fetch, reach: r.reach, seeds: func(context.Context) ([]string, error) { return seeds, nil },
		interval: time.Second, timeout: time.Second, log: slog.New(slog.NewTextHandler(io.Discard, nil)), now: time.Now,
		changed: make(chan struct{}, 1), reached: map[string]bool{}, stop: make(chan struct{}), done: make(chan struct{})}
}

// A node-local process reads the ring from a seed, then asks the replica
// that answered; when that one fails it asks the ring's owners, and a
// ring it holds already changes nothing and signals nothing.
func TestRingFeedFollowsTheReplicas(t *testing.T) {
	a := &wire.RingMember{Name: "r0", Remote: "10.0.0.1:8090", Owner: true}
	b := &wire.RingMember{Name: "r1", Remote: "10.0.0.2:8090", Owner: true}
	c := &wire.RingMember{Name: "r2", Remote: "10.0.0.3:8090", Pending: true}
	r := &replicasAnswering{rings: map[string][]*wire.RingMember{"10.0.0.1:8090": {a, b}}}
	f := testFeed(r, "10.0.0.9:8090", "10.0.0.1:8090")

	f.poll()
	if !slices.Equal(r.asked, []string{"10.0.0.9:8090", "10.0.0.1:8090"}) {
		t.Fatalf("asked %v, want the seeds in turn", r.asked)
	}
	if got := memberNames(f); !slices.Equal(got, []string{"r0", "r1"}) || len(f.changed) != 1 {
		t.Fatalf("members %v (changed %d), want r0 and r1, signalled", got, len(f.changed))
	}
	<-f.changed

	r.asked = nil
	f.poll()
	if !slices.Equal(r.asked, []string{"10.0.0.1:8090"}) || len(f.changed) != 0 {
		t.Fatalf("asked %v, changed %d: want the replica that answered last, and no change", r.asked, len(f.changed))
	}

	// r0 is gone; r1 tells a ring with r2 pending.
	delete(r.rings, "10.0.0.1:8090")
	r.rings["10.0.0.2:8090"] = []*wire.RingMember{b, c, {Name: "", Remote: "10.0.0.4:8090"}}
	r.asked = nil
	f.poll()
	if !slices.Equal(r.asked, []string{"10.0.0.1:8090", "10.0.0.2:8090"}) {
		t.Fatalf("asked %v, want the last one, then the other owner", r.asked)
	}
	if got := memberNames(f); !slices.Equal(got, []string{"r1", "r2"}) || len(f.changed) != 1 {
		t.Fatalf("members %v (changed %d), want r1 and r2 (a member without a name dropped), signalled", got, len(f.changed))
	}
	<-f.changed
	for _, m := range f.Members() {
		role, addr := cluster.DecodeMeta(m.Meta)
		if want := map[string]cluster.Role{"r1": cluster.RoleOwner, "r2": cluster.RolePending}[m.Name]; role != want || addr != m.Addr {
			t.Fatalf("%s: role %c at %s, want %c at %s", m.Name, role, addr, want, m.Addr)
		}
	}
}

// When every replica of the ring it knows is gone (all replaced), the
// feed asks the seeds again.
func TestRingFeedFallsBackToTheSeeds(t *testing.T) {
	a := &wire.RingMember{Name: "r0", Remote: "10.0.0.1:8090", Owner: true}
	b := &wire.RingMember{Name: "r0", Remote: "10.0.0.5:8090", Owner: true}
	r := &replicasAnswering{rings: map[string][]*wire.RingMember{"10.0.0.1:8090": {a}}}
	seeds := []string{"10.0.0.1:8090"}
	f := testFeed(r)
	f.seeds = func(context.Context) ([]string, error) { return seeds, nil }
	f.poll()
	r.rings = map[string][]*wire.RingMember{"10.0.0.5:8090": {b, {Name: "r1", Remote: "10.0.0.6:8090"}}}
	seeds = []string{"10.0.0.5:8090"}
	r.asked = nil
	f.poll()
	if !slices.Equal(r.asked, []string{"10.0.0.1:8090", "10.0.0.5:8090"}) || !slices.Equal(memberNames(f), []string{"r0", "r1"}) {
		t.Fatalf("asked %v, members %v: want the old replica, then the new seed's ring", r.asked, memberNames(f))
	}
}

// Once it has a ring, the feed asks each owner it has not heard from, so
// the connections are up before the process is ready; the replica that
// told the ring, pending members, and owners that answered before are
// not asked again, and an owner that does not answer holds readiness
// back for one round only, and is asked again at the next.
func TestRingFeedReachesEveryOwnerBeforeReady(t *testing.T) {
	told := []*wire.RingMember{
		{Name: "r0", Remote: "10.0.0.1:8090", Owner: true},
		{Name: "r1", Remote: "10.0.0.2:8090", Owner: true},
		{Name: "r2", Remote: "10.0.0.3:8090", Owner: true},
		{Name: "r3", Remote: "10.0.0.4:8090", Pending: true},
	}
	r := &replicasAnswering{rings: map[string][]*wire.RingMember{"10.0.0.1:8090": told},
		down: map[string]bool{"10.0.0.3:8090": true}}
	f := testFeed(r, "10.0.0.1:8090")
	if f.reachedOwners() {
		t.Fatal("ready to answer before any ring was read")
	}
	f.poll()
	slices.Sort(r.reached)
	if want := []string{"10.0.0.2:8090", "10.0.0.3:8090"}; !slices.Equal(r.reached, want) {
		t.Fatalf("asked %v to connect, want the owners other than the one that told the ring: %v", r.reached, want)
	}
	if !f.reachedOwners() {
		t.Fatal("not ready after every owner was asked once")
	}
	r.reached = nil
	f.poll()
	if want := []string{"10.0.0.3:8090"}; !slices.Equal(r.reached, want) {
		t.Fatalf("asked %v to connect at the next poll, want only the owner that did not answer: %v", r.reached, want)
	}
}

// Asked to stop, the feed's loop ends and Close returns.
func TestRingFeedStops(t *testing.T) {
	f := testFeed(&replicasAnswering{rings: map[string][]*wire.RingMember{}}, "10.0.0.1:8090")
	f.start()
	if err := f.Close(); err != nil {
		t.Fatal(err)
	}
	if err := f.Close(); err != nil {
		t.Fatal(err)
	}
}

func memberNames(f *ringFeed) []string {
	var out []string
	for _, m := range f.Members() {
		out = append(out, m.Name)
	}
	return out
}
