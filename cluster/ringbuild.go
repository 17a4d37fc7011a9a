package cluster

// Candidate is a member as gossip gives it (or, to a node-local process,
// as a replica tells it), with what this process found out about it: the
// facts a ring is built from. Self's MayOwn and Down are not read: a
// process always trusts itself and never finds itself down.
type Candidate struct {
	Name   string
	Role   Role   // what its metadata says (DecodeMeta)
	Remote string // host:port of its actor remote, from its metadata
	// MayOwn is what the member proved, not what it says: with a peers
	// Service only that Service's endpoints may own zones.
	MayOwn bool
	// Down is set when this process found the member's remote port
	// refusing connections (cluster/liveness).
	Down bool
}

// RingBuild is what a process builds its ring from, beside the
// candidates.
type RingBuild struct {
	Self       string
	SelfRemote string // self's actor remote, for the last one standing
	// Replication is cluster.replicationFactor; 0: every owner owns
	// every zone.
	Replication int
	// LastStanding says this process owned zones and is stopping
	// (Lifecycle.LastStanding): if no other owner is left, it keeps
	// owning alone.
	LastStanding bool
}

// BuildRing is the ring of candidates as b's process sees it. A member
// owns zones when it says so (an owner, or leaving but not gone yet) and
// may; one that says it is pending is Pending on the same terms; one
// found down owns nothing.
//
// When every replica stops at once (the StatefulSet deleted or scaled to
// zero), each has left and sees the others leave, so the ring would have
// no owner, and every query would fail while kube-proxy still sends them
// here. The last ones standing (LastStanding, and no live owner left)
// put themselves back as owners and answer alone from what they hold
// until their lameduck ends.
func BuildRing(b RingBuild, candidates []Candidate) *Ring {
	ms := make([]Member, 0, len(candidates)+1)
	for _, c := range candidates {
		self := c.Name == b.Self
		mayOwn := self || c.MayOwn
		ms = append(ms, Member{Name: c.Name, Remote: c.Remote, Owner: mayOwn && c.Role.OwnsZones(),
			Pending: mayOwn && c.Role == RolePending, Down: !self && c.Down})
	}
	if b.LastStanding && !hasLiveOwner(ms) {
		ms = append(ms, Member{Name: b.Self, Remote: b.SelfRemote, Owner: true})
	}
	return NewRing(b.Self, ms, b.Replication)
}

// hasLiveOwner reports whether a member owns zones and is not found down.
func hasLiveOwner(ms []Member) bool {
	for _, m := range ms {
		if m.Owner && !m.Down {
			return true
		}
	}
	return false
}

// OthersStay reports whether a candidate other than self owns zones, is
// not found down and has not said it is leaving: one that takes self's
// zones over when self leaves, listing them from the API server.
func OthersStay(self string, candidates []Candidate) bool {
	for _, c := range candidates {
		if c.Name != self && c.Role == RoleOwner && !c.Down {
			return true
		}
	}
	return false
}
