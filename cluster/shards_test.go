package cluster

import (
	"fmt"
	"testing"
)

// The API server hashes namespaces with 64-bit FNV-1a; these are the
// published test vectors of that hash.
func TestNamespaceHashIsFNV1a64(t *testing.T) {
	for in, want := range map[string]uint64{"": 0xcbf29ce484222325, "a": 0xaf63dc4c8601ec8c, "foobar": 0x85944171f73967e8} {
		if got := NamespaceHash(in); got != want {
			t.Errorf("NamespaceHash(%q) = %#x, want %#x", in, got, want)
		}
	}
}

// The ranges hold every owned namespace's hash and no other known one,
// and there are no more of them than runs in hash order need.
func TestNamespaceRanges(t *testing.T) {
	var all []string
	for i := range 300 {
		all = append(all, fmt.Sprintf("team-%03d", i))
	}
	ring := NewRing("shardns-0", []Member{{Name: "shardns-0", Owner: true}, {Name: "shardns-1", Owner: true}, {Name: "shardns-2", Owner: true}}, 1)
	owned := func(ns string) bool { return ring.Owns("shardns-1", ns+".svc.cluster.local.") }
	ranges := NamespaceRanges(all, owned)
	in := func(ns string) bool {
		h := NamespaceHash(ns)
		for _, r := range ranges {
			if h >= r.Start && h <= r.End {
				return true
			}
		}
		return false
	}
	count := 0
	for _, ns := range all {
		if in(ns) != owned(ns) {
			t.Fatalf("%s: in the ranges %v, owned %v", ns, in(ns), owned(ns))
		}
		if owned(ns) {
			count++
		}
	}
	if count < 60 || count > 140 {
		t.Fatalf("shardns-1 owns %d of 300 namespaces, want about 100", count)
	}
	if len(ranges) > count {
		t.Fatalf("%d ranges for %d namespaces", len(ranges), count)
	}
	for i := 1; i < len(ranges); i++ {
		if ranges[i].Start <= ranges[i-1].End {
			t.Fatalf("ranges out of order: %v", ranges)
		}
	}
	t.Logf("%d namespaces owned in %d ranges", count, len(ranges))
	if NamespaceRanges(all, func(string) bool { return false }) != nil {
		t.Fatal("no namespace owned gave ranges")
	}
	if r := NamespaceRanges(all, func(string) bool { return true }); len(r) != 1 {
		t.Fatalf("every namespace owned gave %d ranges", len(r))
	}
}

func TestShardSelector(t *testing.T) {
	got := ShardSelector(NamespaceField, []HashRange{{0, 0x7ff}, {0xf000000000000000, ^uint64(0)}})
	want := "shardRange(object.metadata.namespace, '0x0000000000000000', '0x0000000000000800') || " +
		"shardRange(object.metadata.namespace, '0xf000000000000000', '0x10000000000000000')"
	if got != want {
		t.Fatalf("ShardSelector = %s\nwant %s", got, want)
	}
	if ShardSelector(NamespaceField, nil) != "" {
		t.Fatal("no ranges gave a selector")
	}
}
