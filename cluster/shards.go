package cluster

import (
	"fmt"
	"hash/fnv"
	"slices"
	"strings"
)

// A sharded list or watch of the API server (ListOptions.shardSelector,
// Kubernetes 1.36+) selects objects by ranges of the 64-bit FNV-1a hash of
// a field, here object.metadata.namespace. Zones stay owned one namespace
// at a time by rendezvous hashing: the raw FNV-1a hash sends names that
// differ only in their last characters (team-001, team-002, …) to nearly
// the same value, so fixed ranges of it would give one replica most of a
// cluster's namespaces (100 such names fall in 1 of 32 equal ranges).
// Instead a replica asks for the runs of the namespaces it owns in hash
// order: every namespace is known to every replica, so a run can stop short
// of the next namespace owned by another.

// NamespaceHash is the 64-bit FNV-1a hash of a namespace name, as the API
// server computes it for shardRange(object.metadata.namespace, …).
func NamespaceHash(namespace string) uint64 {
	h := fnv.New64a()
	h.Write([]byte(namespace))
	return h.Sum64()
}

// NamespaceField is the field a sharded watch selects namespaces by.
const NamespaceField = "object.metadata.namespace"

// HashRange is a range [Start, End] of namespace hashes, both inclusive.
type HashRange struct{ Start, End uint64 }

// NamespaceRanges returns the fewest hash ranges that contain the hash of
// every namespace in all for which owned is true and of no other namespace
// in all, in order. Nil when owned is true for none.
func NamespaceRanges(all []string, owned func(string) bool) []HashRange {
	type entry struct {
		hash  uint64
		owned bool
	}
	entries := make([]entry, 0, len(all))
	for _, ns := range all {
		entries = append(entries, entry{NamespaceHash(ns), owned(ns)})
	}
	slices.SortFunc(entries, func(a, b entry) int {
		if a.hash != b.hash {
			if a.hash < b.hash {
				return -1
			}
			return 1
		}
		// Two names with one hash: whoever owns either must watch it.
		if a.owned != b.owned {
			if a.owned {
				return -1
			}
			return 1
		}
		return 0
	})
	var out []HashRange
	open := false
	for i, e := range entries {
		if i > 0 && e.hash == entries[i-1].hash {
			continue // the first of equal hashes decided
		}
		switch {
		case e.owned && open:
			out[len(out)-1].End = e.hash
		case e.owned:
			out = append(out, HashRange{e.hash, e.hash})
			open = true
		default:
			open = false
		}
	}
	return out
}

// ShardSelector is the API server's shardSelector for ranges: their union.
// Empty for no ranges.
func ShardSelector(field string, ranges []HashRange) string {
	parts := make([]string, len(ranges))
	for i, r := range ranges {
		end := fmt.Sprintf("0x%016x", r.End+1)
		if r.End == ^uint64(0) {
			end = "0x10000000000000000"
		}
		parts[i] = fmt.Sprintf("shardRange(%s, '0x%016x', '%s')", field, r.Start, end)
	}
	return strings.Join(parts, " || ")
}
