package zonemanager

import (
	"errors"
	"fmt"
	"testing"
)

func TestNamespaceZoneMove(t *testing.T) {
	for _, tc := range []struct {
		was, is, settled bool
		want             zoneMove
	}{
		{false, true, false, zoneGained},
		{false, true, true, zoneGained},
		{true, false, true, zoneLostEmpty},
		{true, false, false, zoneUnmoved}, // objects may still come: not known empty
		{true, true, true, zoneUnmoved},
		{false, false, true, zoneUnmoved},
	} {
		if got := namespaceZoneMove(tc.was, tc.is, tc.settled); got != tc.want {
			t.Errorf("was %v, is %v, settled %v: move %d, want %d", tc.was, tc.is, tc.settled, got, tc.want)
		}
	}
}

// What asking the holders of a gained zone counts as
// (shardns_cluster_zones_handed_over_total's result label).
func TestPeerResult(t *testing.T) {
	for _, tc := range []struct {
		err     error
		changes int
		want    string
	}{
		{nil, 3, "loaded"},
		{nil, 0, "empty"},
		{fmt.Errorf("asking b: %w", ErrNotHeld), 0, "not_held"},
		{errors.New("connection refused"), 0, "failed"},
	} {
		if got := peerResult(tc.err, tc.changes); got != tc.want {
			t.Errorf("peerResult(%v, %d) = %q, want %q", tc.err, tc.changes, got, tc.want)
		}
	}
}
