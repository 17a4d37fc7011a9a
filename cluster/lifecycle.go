package cluster

import "sync"

// Lifecycle is a replica's life in the ring, as the decisions about its
// announcements need it: it joins pending, announces itself an owner
// once its sources have synced, and when it stops says it is leaving
// before it leaves. It only decides; the caller gossips what it says
// (Role) and tells it what went out. A node-local process never owns a
// zone: its Lifecycle stays where it started.
//
// Its methods may be called from any goroutine: the ring watch announces,
// Stop leaves, readiness and ring building read.
type Lifecycle struct {
	nodeLocal bool

	mu          sync.Mutex
	owner       bool // announced: owns zones
	stopping    bool // Stop has begun: the process answers only for its lameduck
	saidLeaving bool // its metadata says RoleLeaving, or is being set to
}

// NewLifecycle is the life of a process that has just joined; nodeLocal
// for one that owns nothing, ever.
func NewLifecycle(nodeLocal bool) *Lifecycle { return &Lifecycle{nodeLocal: nodeLocal} }

// Announce is what a process that may announce itself an owner does now.
type Announce int

const (
	// AnnounceWait: its sources have not synced; ask again later.
	AnnounceWait Announce = iota
	// AnnounceNow: say RoleOwner, then call Announced.
	AnnounceNow
	// AnnounceDone: it owns zones already, or never will (a node-local
	// process); there is no need to ask again.
	AnnounceDone
)

// NextAnnounce decides whether to announce, given whether the process's
// sources have synced.
func (l *Lifecycle) NextAnnounce(synced bool) Announce {
	l.mu.Lock()
	defer l.mu.Unlock()
	switch {
	case l.owner || l.nodeLocal:
		return AnnounceDone
	case !synced:
		return AnnounceWait
	}
	return AnnounceNow
}

// Announced records that the others were told RoleOwner.
func (l *Lifecycle) Announced() {
	l.mu.Lock()
	defer l.mu.Unlock()
	if !l.nodeLocal {
		l.owner = true
	}
}

// Owner reports whether the process announced itself an owner.
func (l *Lifecycle) Owner() bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.owner
}

// Stop records that the process is stopping.
func (l *Lifecycle) Stop() {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.stopping = true
}

// LastStanding reports whether the process owned zones and is stopping:
// if every other owner has gone, it keeps owning alone (BuildRing).
func (l *Lifecycle) LastStanding() bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.stopping && l.owner
}

// SayLeaving decides whether the process must tell the others it is
// leaving before it leaves, and records that it does: an owner that has
// not said so yet. The others let a member that said so go at once; one
// that did not, they keep while its remote port serves.
func (l *Lifecycle) SayLeaving() bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	if !l.owner || l.saidLeaving {
		return false
	}
	l.saidLeaving = true
	return true
}

// Role is what the process's metadata says now.
func (l *Lifecycle) Role() Role {
	l.mu.Lock()
	defer l.mu.Unlock()
	switch {
	case l.nodeLocal:
		return RoleNone
	case l.saidLeaving:
		return RoleLeaving
	case l.owner:
		return RoleOwner
	}
	return RolePending
}
