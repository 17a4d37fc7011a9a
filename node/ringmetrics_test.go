package node

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/shardns/shardns/cluster"
	"github.com/shardns/shardns/cluster/wire"
)

// Processes that route alike show the same fingerprint whoever they are
// and whatever owns nothing beside the owners; an owner more, one found
// down or another replication factor changes it; it fits a float64.
func TestRingFingerprint(t *testing.T) {
	owners := []cluster.Member{{Name: "r0", Owner: true}, {Name: "r1", Owner: true}, {Name: "r2", Owner: true}}
	with := func(extra ...cluster.Member) []cluster.Member {
		return append(append([]cluster.Member{}, owners...), extra...)
	}
	base := ringFingerprint(cluster.NewRing("r0", owners, 2))
	for name, r := range map[string]*cluster.Ring{
		"seen by another replica":         cluster.NewRing("r2", with(), 2),
		"seen by a node-local process":    cluster.NewRing("nl", with(cluster.Member{Name: "nl"}), 2),
		"with a replica not yet an owner": cluster.NewRing("r0", with(cluster.Member{Name: "r3", Pending: true}), 2),
		"members listed in another order": cluster.NewRing("r1", []cluster.Member{owners[2], owners[0], owners[1]}, 2),
	} {
		if got := ringFingerprint(r); got != base {
			t.Errorf("%s: fingerprint %d, want %d (same routing)", name, got, base)
		}
	}
	down := with()
	down[1].Down = true
	for name, r := range map[string]*cluster.Ring{
		"an owner more":          cluster.NewRing("r0", with(cluster.Member{Name: "r3", Owner: true}), 2),
		"an owner found down":    cluster.NewRing("r0", down, 2),
		"another replication":    cluster.NewRing("r0", owners, 1),
		"an owner gone":          cluster.NewRing("r0", owners[:2], 2),
		"owners named otherwise": cluster.NewRing("r0", []cluster.Member{{Name: "r0r", Owner: true}, {Name: "1", Owner: true}, owners[2]}, 2),
	} {
		if got := ringFingerprint(r); got == base {
			t.Errorf("%s: fingerprint %d equals the ring's before", name, got)
		}
	}
	if base >= 1<<53 || float64(base) != float64(int64(base)) || uint64(float64(base)) != base {
		t.Fatalf("fingerprint %d does not survive a float64", base)
	}
}

// A node-local process's feed tells when a replica last told it the
// ring, an unchanged ring included, and counts the polls no replica
// answered.
func TestRingFeedReportsReadsAndFailures(t *testing.T) {
	a := &wire.RingMember{Name: "r0", Remote: "10.0.0.1:8090", Owner: true}
	r := &replicasAnswering{rings: map[string][]*wire.RingMember{"10.0.0.1:8090": {a}}}
	f := testFeed(r, "10.0.0.1:8090")
	clock := time.Unix(1_000, 0)
	f.now = func() time.Time { return clock }
	f.readAt.Store(clock.UnixNano()) // as start does

	clock = clock.Add(time.Second)
	f.poll()
	if got := f.lastRead(); !got.Equal(time.Unix(1_001, 0)) || f.failures() != 0 {
		t.Fatalf("after a ring was told: last read %v, failures %d; want 1001 s and none", got.Unix(), f.failures())
	}
	clock = clock.Add(time.Second)
	f.poll() // the same ring: only its version is answered
	if got := f.lastRead(); !got.Equal(time.Unix(1_002, 0)) {
		t.Fatalf("after the ring was confirmed unchanged: last read %v, want 1002 s", got.Unix())
	}
	delete(r.rings, "10.0.0.1:8090")
	for range 3 {
		clock = clock.Add(time.Second)
		f.poll()
	}
	if got := f.lastRead(); !got.Equal(time.Unix(1_002, 0)) || f.failures() != 3 {
		t.Fatalf("with no replica answering: last read %v, failures %d; want 1002 s and 3", got.Unix(), f.failures())
	}
}

// A replica's /metrics carries the ring's fingerprint and live owners,
// and none of a node-local feed's series.
func TestReplicaExportsRingMetrics(t *testing.T) {
	n := startDemo(t)
	metrics := scrapeMetrics(t, n.Node)
	want := fmt.Sprintf("shardns_cluster_ring_hash %g\n", float64(ringFingerprint(n.currentRing())))
	for _, line := range []string{want, "shardns_cluster_ring_owners 1\n"} {
		if !strings.Contains(metrics, line) {
			t.Errorf("/metrics lacks %q", line)
		}
	}
	if strings.Contains(metrics, "shardns_cluster_ring_read_") {
		t.Error("a replica exports the node-local feed's ring read series")
	}
}
