package dispatch

import (
	"maps"
	"testing"

	"github.com/shardns/shardns/cluster/trust"
)

// The remote port's guard lets the handoff's messages reach its actors
// from replicas, each the one type it takes; a node-local process may
// only ask, and a node-local port takes only replies, from replicas.
func TestRoutesFollowTheRole(t *testing.T) {
	r := Routes(false)[trust.RoleReplica]
	if r[HandoffName] != "shardns.wire.v1.ZoneStateRequest" || r[handoffRepliesName] != "shardns.wire.v1.ZoneState" {
		t.Fatalf("replica routes %v", r)
	}
	want := map[string]string{ServerName: "shardns.wire.v1.ZoneQuery", RingName: "shardns.wire.v1.RingRequest"}
	if got := Routes(false)[trust.RoleNodeLocal]; !maps.Equal(got, want) {
		t.Fatalf("a replica takes %v from node-local processes, want %v", got, want)
	}
	want = map[string]string{repliesName: "shardns.wire.v1.ZoneReply", ringRepliesName: "shardns.wire.v1.RingState",
		InvalidateName: "shardns.wire.v1.ZoneChanged"}
	nl := Routes(true)
	if !maps.Equal(nl[trust.RoleReplica], want) || len(nl[trust.RoleNodeLocal]) != 0 {
		t.Fatalf("a node-local process takes %v, want %v from replicas and nothing from its kind", nl, want)
	}
}
