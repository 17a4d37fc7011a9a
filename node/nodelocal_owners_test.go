package node

import (
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/shardns/shardns/cluster"
	"github.com/shardns/shardns/zone"
)

// A node-local process asks an owner that left the ring for its zones
// right after their new owner, which may still be loading them, until
// its grace ends; the order of every other zone is the ring's.
func TestNodeLocalAsksAnOwnerThatLeft(t *testing.T) {
	three := cluster.NewRing("node", []cluster.Member{{Name: "a", Owner: true}, {Name: "b", Owner: true}, {Name: "c", Owner: true}, {Name: "node"}}, 1)
	two := cluster.NewRing("node", []cluster.Member{{Name: "a", Owner: true}, {Name: "b", Owner: true}, {Name: "node"}}, 1)
	live := three
	v := newOwnersReader(&zone.Config{}, func() *cluster.Ring { return live }, nil, 200*time.Millisecond)
	var ofC, ofOthers []string
	for i := range 64 {
		key := fmt.Sprintf("n%d.svc.cluster.local.", i)
		if three.Owns("c", key) {
			ofC = append(ofC, key)
		} else {
			ofOthers = append(ofOthers, key)
		}
		if got := v.Remote(key); !slices.Equal(got, three.Order(key)) {
			t.Fatalf("%s on a ring of three: %q, want the ring's %q", key, got, three.Order(key))
		}
	}
	if len(ofC) == 0 || len(ofOthers) == 0 {
		t.Fatal("c owned no zone, or every zone: the test checks nothing")
	}
	live = two
	for _, key := range ofC {
		if got, want := v.Remote(key), []string{two.Order(key)[0], "c", two.Order(key)[1]}; !slices.Equal(got, want) {
			t.Fatalf("%s, c's, once c left: %q, want %q", key, got, want)
		}
	}
	for _, key := range ofOthers {
		if got := v.Remote(key); !slices.Equal(got, two.Order(key)) {
			t.Fatalf("%s, not c's, once c left: %q, want the ring's %q", key, got, two.Order(key))
		}
	}
	// Past the grace, the ring's order alone.
	deadline := time.Now().Add(5 * time.Second)
	for slices.Contains(v.Remote(ofC[0]), "c") {
		if time.Now().After(deadline) {
			t.Fatalf("%s: c still asked 5 s after its grace of 200 ms", ofC[0])
		}
		time.Sleep(10 * time.Millisecond)
	}
	if got := v.Remote(ofC[0]); !slices.Equal(got, two.Order(ofC[0])) {
		t.Fatalf("%s past the grace: %q, want the ring's %q", ofC[0], got, two.Order(ofC[0]))
	}
}

// A reverse name's fan-out asks the ring's owners alone: every share is
// needed to deny a name, and an owner that left may have exited.
func TestNodeLocalFanOutLeavesOutAnOwnerThatLeft(t *testing.T) {
	three := cluster.NewRing("node", []cluster.Member{{Name: "a", Owner: true}, {Name: "b", Owner: true}, {Name: "c", Owner: true}, {Name: "node"}}, 1)
	two := cluster.NewRing("node", []cluster.Member{{Name: "a", Owner: true}, {Name: "b", Owner: true}, {Name: "node"}}, 1)
	live := three
	v := newOwnersReader(&zone.Config{}, func() *cluster.Ring { return live }, nil, time.Minute)
	key := ""
	for i := range 64 {
		if k := fmt.Sprintf("%d.96.10.in-addr.arpa.", i); three.Owns("c", k) {
			key = k
			break
		}
	}
	if key == "" {
		t.Fatal("c owns no reverse zone: the test checks nothing")
	}
	if got := v.FanOut(key); !slices.Equal(got, three.Order(key)) {
		t.Fatalf("on a ring of three: %q, want %q", got, three.Order(key))
	}
	live = two
	if got := v.FanOut(key); !slices.Equal(got, two.Order(key)) {
		t.Fatalf("once c left: %q, want the ring's %q", got, two.Order(key))
	}
}
