package membership

import (
	"errors"
	"sync/atomic"

	"github.com/hashicorp/memberlist"
)

// memberlist calls every method here while holding its node lock (and
// from inside Join and Create). They must not call back into the
// memberlist, take a lock that is held while calling into it, or block:
// they only signal, or copy a few bytes under a short private lock.

// events copies joins, leaves, failures and metadata changes into the
// member map and signals subscribers. A failure may be disputed first
// (disputes.go).
type events struct{ m *Membership }

func (e events) NotifyJoin(n *memberlist.Node)   { e.m.setMember(n) }
func (e events) NotifyUpdate(n *memberlist.Node) { e.m.setMember(n) }
func (e events) NotifyLeave(n *memberlist.Node)  { e.m.memberDied(n.Name) }

// conflicts remembers where a name we know at one address was claimed
// from another: usually a pod restarted with a new IP before its old
// address was declared dead. The rejoin loop joins that address later,
// once the old one is dead and the name may be reclaimed; nothing else
// would tell this node about it again.
type conflicts struct{ m *Membership }

func (c conflicts) NotifyConflict(existing, other *memberlist.Node) {
	if existing.Name == c.m.cfg.NodeName {
		return // a stale rumour of our own previous address
	}
	c.m.mu.Lock()
	defer c.m.mu.Unlock()
	if len(c.m.conflicts) < maxConflicts {
		c.m.conflicts[other.Address()] = other.Name
	}
}

// maxConflicts bounds the addresses remembered between two rejoins.
const maxConflicts = 64

// meta serves Config.Meta; the rest of memberlist's Delegate (user
// messages and state) is unused.
type meta struct{ b *atomic.Pointer[[]byte] }

func (d meta) NodeMeta(limit int) []byte                  { return *d.b.Load() }
func (d meta) NotifyMsg([]byte)                           {}
func (d meta) GetBroadcasts(overhead, limit int) [][]byte { return nil }
func (d meta) LocalState(join bool) []byte                { return nil }
func (d meta) MergeRemoteState(buf []byte, join bool)     {}

// admission asks Config.Admit about every node gossip tells of: an alive
// message (a join, a refutation, new metadata) and each live node of a
// joining member's state. A refused alive message is ignored, so the node
// never becomes a member or changes one; a refused merge fails the join,
// so a stranger learns nothing of the members either.
//
// Whatever Admit says, an alive message naming another node at the
// gossip address of a member is ignored: any holder of the key could
// otherwise add a phantom at a replica's address, which the others would
// probe and reach there. A pod that takes over the address of one that
// is gone is admitted once gossip dropped the old one.
type admission struct{ m *Membership }

// reasonAddressTaken is trust's reason for a node announced at another
// member's address.
const reasonAddressTaken = "address-taken"

func (a admission) NotifyAlive(n *memberlist.Node) error {
	if err := a.check(n); err != nil {
		return err
	}
	if holder, ok := a.m.holder(n.Address()); ok && holder != n.Name {
		return a.refuse(n, reasonAddressTaken)
	}
	return nil
}

// NotifyMerge checks the nodes of a state exchanged at a join that it
// lists alive. A node it lists as suspect, dead or left is not asked
// about: merging such an entry only marks a member already known, never
// adds one, and a member's state lists replicas gone for a while (until
// memberlist forgets the dead, 30 s). Refusing the state for them made a
// replica that joined just after others were removed or replaced (a
// scale-down, a rolling update: their addresses are no longer peers)
// fail its join and serve alone, apart from the ring.
func (a admission) NotifyMerge(peers []*memberlist.Node) error {
	for _, n := range peers {
		if n.State != memberlist.StateAlive {
			continue
		}
		if err := a.check(n); err != nil {
			return err
		}
	}
	return nil
}

func (a admission) check(n *memberlist.Node) error {
	if n.Name == a.m.cfg.NodeName || a.m.cfg.Admit == nil {
		// Ourselves (memberlist announces us in Create); a claim of our
		// name from elsewhere is a conflict memberlist refutes itself.
		return nil
	}
	if reason := a.m.cfg.Admit(Member{Name: n.Name, Addr: n.Address(), Meta: n.Meta}); reason != "" {
		return a.refuse(n, reason)
	}
	return nil
}

// refuse tells Config.Rejected of n and returns why it is refused.
func (a admission) refuse(n *memberlist.Node, reason string) error {
	if a.m.cfg.Rejected != nil {
		a.m.cfg.Rejected(n.Address(), n.Name, reason)
	}
	return errors.New("membership: refused " + n.Name + " at " + n.Address() + ": " + reason)
}
