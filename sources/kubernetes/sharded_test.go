package kubernetes

import (
	"fmt"
	"testing"

	"github.com/shardns/shardns/cluster"
)

// A few namespaces added each get a range of their own hash alone, in
// order; many get the runs among every namespace, which hold each of
// them and no namespace not added.
func TestAddedRanges(t *testing.T) {
	var all []string
	for i := range 100 {
		all = append(all, fmt.Sprintf("team-%03d", i))
	}
	in := func(ranges []cluster.HashRange, ns string) bool {
		h := cluster.NamespaceHash(ns)
		for _, r := range ranges {
			if h >= r.Start && h <= r.End {
				return true
			}
		}
		return false
	}
	for _, n := range []int{1, 3, maxPointRanges, maxPointRanges + 1, 40} {
		added := all[:n]
		ranges := watchRanges(all, added)
		for i, ns := range all {
			if in(ranges, ns) != (i < n) {
				t.Fatalf("%d added: %s in the ranges: %v", n, ns, in(ranges, ns))
			}
		}
		for i := 1; i < len(ranges); i++ {
			if ranges[i].Start <= ranges[i-1].End {
				t.Fatalf("%d added: ranges out of order: %v", n, ranges)
			}
		}
		if n <= maxPointRanges && len(ranges) != n {
			t.Fatalf("%d added: %d ranges, want one each", n, len(ranges))
		}
	}
}
