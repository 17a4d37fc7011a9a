// Package cluster decides which members own which zones. Ownership is
// rendezvous (highest-random-weight) hashing with a fixed 64-bit hash, so
// every node computes the same owners from the same member list, and a
// member joining or leaving moves only about 1/N of the zones.
package cluster

import (
	"hash/fnv"
	"slices"
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

// Member is a live replica as the ring sees it.
type Member struct {
	Name   string // stable node name
	Remote string // host:port of its actor remote
	Owner  bool   // false for node-local caches, which own no zones
	// Down is set when this replica found the member's actor remote port
	// refusing connections: its process is gone although gossip has not
	// declared it dead yet. A member that is down owns nothing here.
	Down bool
	// Pending is set for a replica that has not announced itself an
	// owner yet: it will once its sources have synced.
	Pending bool
}

// Ring is an immutable view of the live members: who owns what. Every
// replica builds the same Ring from the same member list.
type Ring struct {
	Self        string
	Members     []Member // sorted by name
	Replication int      // 0: every member owns every zone
	owners      []string // names of members that own zones
	byName      map[string]Member
}

// NewRing builds a ring; members need not be sorted.
func NewRing(self string, members []Member, replication int) *Ring {
	r := &Ring{Self: self, Replication: replication, byName: map[string]Member{}}
	r.Members = append(r.Members, members...)
	sort.Slice(r.Members, func(i, j int) bool { return r.Members[i].Name < r.Members[j].Name })
	for _, m := range r.Members {
		r.byName[m.Name] = m
		if m.Owner && !m.Down {
			r.owners = append(r.owners, m.Name)
		}
	}
	return r
}

// Same reports whether o is the same ring as r: the same self,
// replication and members, each with the same address and state.
func (r *Ring) Same(o *Ring) bool {
	return r != nil && o != nil && r.Self == o.Self && r.Replication == o.Replication && slices.Equal(r.Members, o.Members)
}

// Prospective returns the ring as it will be once member and the other
// replicas that have not announced themselves yet (Pending) have: r
// itself when member owns zones already, is found down, or is not a
// member. A replica that has not announced lists what it owns in this
// ring before it announces. Rendezvous hashing only takes zones from a
// member as others join, so if some pending replica never announces,
// member owns a little more than this ring gives it, never less.
func (r *Ring) Prospective(member string) *Ring {
	m, ok := r.byName[member]
	if !ok || m.Owner || m.Down {
		return r
	}
	members := slices.Clone(r.Members)
	for i := range members {
		if members[i].Name == member || members[i].Pending && !members[i].Down {
			members[i].Owner = true
		}
	}
	return NewRing(r.Self, members, r.Replication)
}

// Eventual returns the ring as it will be once the replicas that have
// not announced themselves yet (Pending, and not found down) have: r
// itself when there are none.
func (r *Ring) Eventual() *Ring {
	if !slices.ContainsFunc(r.Members, func(m Member) bool { return m.Pending && !m.Down && !m.Owner }) {
		return r
	}
	members := slices.Clone(r.Members)
	for i := range members {
		if members[i].Pending && !members[i].Down {
			members[i].Owner = true
		}
	}
	return NewRing(r.Self, members, r.Replication)
}

// Order lists every owning member in preference order for zoneKey: the
// first Replication are its owners; the ones after are where a query goes
// when the owners do not answer (a member that just lost the zone keeps it
// for a while, and rendezvous hashing puts it right after the new owner).
func (r *Ring) Order(zoneKey string) []string {
	return Owners(r.owners, zoneKey, 0)
}

// Owns reports whether member owns zoneKey.
func (r *Ring) Owns(member, zoneKey string) bool {
	if r.Replication <= 0 || r.Replication >= len(r.owners) {
		m, ok := r.byName[member]
		return ok && m.Owner && !m.Down
	}
	for _, o := range Owners(r.owners, zoneKey, r.Replication) {
		if o == member {
			return true
		}
	}
	return false
}

// HasOwners reports whether any member owns zones (and is not down), so
// there is someone to ask.
func (r *Ring) HasOwners() bool { return len(r.owners) > 0 }

// Member returns the member called name.
func (r *Ring) Member(name string) (Member, bool) {
	m, ok := r.byName[name]
	return m, ok
}

// Owners lists the members that own zones and are not down, by name. The
// slice is shared: callers must not change it.
func (r *Ring) Owners() []string { return r.owners }
