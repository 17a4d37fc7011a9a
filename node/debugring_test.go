package node

import (
	"slices"
	"testing"

	"github.com/shardns/shardns/httpapi"
	"github.com/shardns/shardns/zone"
)

// /debug/ring lists the zones a replica still loads (their slots hidden
// from queries) and those the zones manager named in their grace period;
// zones loaded and owned are in neither.
func TestDebugRingListsHandoffs(t *testing.T) {
	c := &core{table: zone.NewTable(nil)}
	c.table.NewSlot("served.svc.cluster.local.")
	c.table.NewSlot("gained.svc.cluster.local.").SetLoading(true)
	c.table.NewSlot("lost.svc.cluster.local.")
	c.grace.Store(&[]string{"lost.svc.cluster.local."})
	var r httpapi.Ring
	c.addHandoffs(&r)
	if want := []string{"gained.svc.cluster.local."}; !slices.Equal(r.Loading, want) {
		t.Errorf("loading %q, want %q", r.Loading, want)
	}
	if want := []string{"lost.svc.cluster.local."}; !slices.Equal(r.Grace, want) {
		t.Errorf("grace %q, want %q", r.Grace, want)
	}

	// The grace over, and the zone loaded: no handoff is left.
	c.table.SlotOf("gained.svc.cluster.local.").SetLoading(false)
	c.grace.Store(&[]string{})
	r = httpapi.Ring{}
	c.addHandoffs(&r)
	if len(r.Loading)+len(r.Grace) != 0 {
		t.Errorf("after the handoff: loading %q, grace %q, want none", r.Loading, r.Grace)
	}
}
