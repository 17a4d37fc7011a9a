package cluster

import "strings"

// Role is what a process of the ring says it is, in the metadata it
// gossips. It is one byte on the wire, and the bytes are part of the
// protocol between releases: a replica of one release reads the metadata
// of another's during a rolling update, so a byte is never reused.
type Role byte

const (
	// RoleNone owns no zone, ever: a node-local cache. It is also how a
	// role this release does not know reads, so an unknown byte of a
	// later release never makes a member an owner.
	RoleNone Role = '0'
	// RoleOwner is a replica that owns zones.
	RoleOwner Role = '1'
	// RolePending is a replica that will own zones once its sources have
	// synced. Releases that knew only '1' and '0' read it as '0'.
	RolePending Role = 'p'
	// RoleLeaving is an owner that is stopping: it owns its zones until
	// it leaves the ring, and says so first, so that the others stopping
	// with it know they may be the last (OthersStay). Releases that knew
	// only '1', '0' and 'p' read it as '0', and take its zones over a
	// little earlier.
	RoleLeaving Role = 'l'
)

// OwnsZones reports whether a member saying r owns zones: an owner, or
// one that is leaving but has not left yet.
func (r Role) OwnsZones() bool { return r == RoleOwner || r == RoleLeaving }

// RoleOf is the role a replica tells of a ring member (wire.RingMember
// carries owner and pending, not the role): what a node-local process,
// which does not gossip, reads the ring as.
func RoleOf(owner, pending bool) Role {
	switch {
	case owner:
		return RoleOwner
	case pending:
		return RolePending
	}
	return RoleNone
}

// EncodeMeta is what a process tells the others in its gossip metadata:
// its role, and where its actor remote listens ("1|10.0.0.5:8090").
func EncodeMeta(role Role, remoteAddr string) []byte {
	return []byte(string(rune(role)) + "|" + remoteAddr)
}

// DecodeMeta reads what EncodeMeta wrote. A role it does not know reads
// as RoleNone, keeping the remote address, so that a member of a later
// release is reachable but owns nothing here.
func DecodeMeta(b []byte) (role Role, remoteAddr string) {
	flag, addr, _ := strings.Cut(string(b), "|")
	switch flag {
	case string(rune(RoleOwner)):
		return RoleOwner, addr
	case string(rune(RolePending)):
		return RolePending, addr
	case string(rune(RoleLeaving)):
		return RoleLeaving, addr
	}
	return RoleNone, addr
}
