package node

import (
	"slices"

	"github.com/shardns/shardns/httpapi"
)

// addHandoffs lists in r the handoffs this replica takes part in: the
// zones it gained and still loads (hidden from queries until complete),
// and those it lost and still holds through cluster.handoffGrace. Both
// are the replica's own view; /debug/ring/view draws them as arrows.
func (c *core) addHandoffs(r *httpapi.Ring) {
	for _, k := range c.table.Keys() {
		if c.table.Loading(k) {
			r.Loading = append(r.Loading, k)
		}
	}
	if grace := c.grace.Load(); grace != nil {
		r.Grace = slices.Clone(*grace)
	}
}
