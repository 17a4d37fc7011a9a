package dispatch

import "testing"

// The remote port's guard lets the handoff's messages reach its actors,
// each the one type it takes.
func TestRoutesIncludeTheHandoff(t *testing.T) {
	r := Routes()
	if r[HandoffName] != "shardns.wire.v1.ZoneStateRequest" || r[handoffRepliesName] != "shardns.wire.v1.ZoneState" {
		t.Fatalf("routes %v", r)
	}
}
