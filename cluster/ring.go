// Package cluster decides which members own which zones. Ownership is
// rendezvous (highest-random-weight) hashing with a fixed 64-bit hash, so
// every node computes the same owners from the same member list, and a
// member joining or leaving moves only about 1/N of the zones.
package cluster

import (
	"hash/fnv"
	"sort"
)

// Owners returns the r members with the highest weight for zoneKey, best
// first. r == 0, or r at least the member count, means every member.
func Owners(members []string, zoneKey string, r int) []string {
	type scored struct {
		member string
		weight uint64
	}
	all := make([]scored, len(members))
	for i, m := range members {
		all[i] = scored{m, weight(m, zoneKey)}
	}
	sort.Slice(all, func(i, j int) bool {
		if all[i].weight != all[j].weight {
			return all[i].weight > all[j].weight
		}
		return all[i].member < all[j].member
	})
	if r <= 0 || r > len(all) {
		r = len(all)
	}
	out := make([]string, r)
	for i := range out {
		out[i] = all[i].member
	}
	return out
}

// weight hashes member|zoneKey with FNV-1a and a splitmix64 finaliser:
// FNV alone mixes its last bytes poorly, which would skew ownership.
func weight(member, zoneKey string) uint64 {
	h := fnv.New64a()
	h.Write([]byte(member))
	h.Write([]byte{'|'})
	h.Write([]byte(zoneKey))
	x := h.Sum64()
	x ^= x >> 30
	x *= 0xbf58476d1ce4e5b9
	x ^= x >> 27
	x *= 0x94d049bb133111eb
	x ^= x >> 31
	return x
}
