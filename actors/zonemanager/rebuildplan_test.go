package zonemanager

import (
	"reflect"
	"slices"
	"testing"
	"time"
)

// Which zones of a restarted actor are rebuilt from the sources, and when.
func TestPlanRestart(t *testing.T) {
	now := time.Unix(10_000, 0)
	rebuiltAt := map[string]time.Time{"recent.": now.Add(-rebuildBackoff / 2), "long-ago.": now.Add(-2 * rebuildBackoff)}
	current := func(key string) bool { return key != "replaced." }
	keys := []string{"zone.", "recent.", "long-ago.", "replaced."}
	for _, tc := range []struct {
		name   string
		synced bool
		want   restartPlan
	}{
		{"synced: rebuilt now, unless it failed again soon after a rebuild", true,
			restartPlan{now: []string{"long-ago.", "zone."}, backedOff: []string{"recent."}}},
		{"the sources still syncing: rebuilt once they have", false,
			restartPlan{afterSync: []string{"long-ago.", "zone."}, backedOff: []string{"recent."}}},
	} {
		if got := planRestart(slices.Clone(keys), current, rebuiltAt, now, tc.synced); !reflect.DeepEqual(got, tc.want) {
			t.Errorf("%s: %+v, want %+v", tc.name, got, tc.want)
		}
	}
}
