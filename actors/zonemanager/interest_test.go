package zonemanager_test

import (
	"fmt"
	"testing"
	"time"

	"github.com/shardns/shardns/actors/zonemanager"
	ring "github.com/shardns/shardns/cluster"
	"github.com/shardns/shardns/model"
	"github.com/shardns/shardns/zone"
)

// A replica that has not announced itself an owner is interested in the
// namespaces it will own once it has, so that its sources list them
// before it announces; an announced one in what it owns. The
// Multi-Cluster Services objects of a namespace follow its Services.
func TestInterestOfAReplicaNotAnnouncedYet(t *testing.T) {
	cfg := &zone.Config{Domains: zone.Domains{Cluster: []string{"cluster.local."}}, TTL: 5}
	owners := []ring.Member{{Name: "r0", Owner: true}, {Name: "r1", Owner: true}, {Name: "r2", Owner: true}}
	pending := ring.NewRing("r3", append(owners, ring.Member{Name: "r3", Pending: true}), 1)
	announced := ring.NewRing("r3", append(owners, ring.Member{Name: "r3", Owner: true}), 1)
	var before, after zonemanager.Interest
	before.Set(pending, "r3", cfg)
	after.Set(announced, "r3", cfg)
	served := 0
	for i := range 200 {
		ns := fmt.Sprintf("team-%03d", i)
		owns := announced.Owns("r3", zone.ServiceZoneKey(ns, "cluster.local."))
		for _, kind := range []model.Kind{model.KindService, model.KindEndpointSlice, model.KindServiceImport, model.KindMultiClusterSlice} {
			if got := before.Serves(kind, ns); got != owns {
				t.Fatalf("%s of %s: interest before announcing %v, want %v (what r3 owns once announced)", kind, ns, got, owns)
			}
			if got := after.Serves(kind, ns); got != owns {
				t.Fatalf("%s of %s: interest once announced %v, want %v", kind, ns, got, owns)
			}
		}
		if owns {
			served++
		}
	}
	if served == 0 || served == 200 {
		t.Fatalf("r3 would own %d of 200 namespaces: want a share", served)
	}
	if !before.Clustered() {
		t.Fatal("a ring with a replication factor shares zones out")
	}
}

// Interest tells how long the ring it follows has kept its members: a
// new member restarts the count, a ring of the same owners does not.
func TestInterestUnchangedFollowsMembers(t *testing.T) {
	cfg := &zone.Config{Domains: zone.Domains{Cluster: []string{"cluster.local."}}, TTL: 5}
	var i zonemanager.Interest
	alone := ring.NewRing("r0", []ring.Member{{Name: "r0", Pending: true}}, 1)
	i.Set(alone, "r0", cfg)
	time.Sleep(20 * time.Millisecond) // a duration to compare, not a synchronisation
	i.Set(ring.NewRing("r0", []ring.Member{{Name: "r0", Pending: true}}, 1), "r0", cfg)
	if got := i.Unchanged(); got < 20*time.Millisecond {
		t.Fatalf("the same ring again: unchanged for %v, want at least 20ms", got)
	}
	i.Set(ring.NewRing("r0", []ring.Member{{Name: "r0", Pending: true}, {Name: "r1", Pending: true}}, 1), "r0", cfg)
	if got := i.Unchanged(); got >= 20*time.Millisecond {
		t.Fatalf("a member joined: unchanged for %v, want the count restarted", got)
	}
}
