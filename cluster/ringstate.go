package cluster

import (
	"sync"
	"sync/atomic"
)

// RingState holds the three rings a clustered process keeps, because a
// ring change is not one instant everywhere: questions follow the live
// ring at once, the zone manager places zones by the ring it was last
// given, and members that left still answer through their lameduck.
//
// The zero value holds no ring. Reads may come from any goroutine; the
// writes (SetLive, Place) come from the one that watches membership.
type RingState struct {
	// live is the ring in force: questions are routed by it from the
	// moment it is set.
	live atomic.Pointer[Ring]
	// placed is the ring the zone manager was last given: its placement
	// sends questions to its members, which may have left the live ring
	// since (a replica widening its watches before it leaves holds its
	// placement) yet still answer through their lameduck.
	placed atomic.Pointer[Ring]
	// replaced is the ring placed before placed: a zone gained from a
	// replica that left is asked of it while it loads here, and in its
	// lameduck that replica still answers (and hands the zone over).
	replaced atomic.Pointer[Ring]

	mu sync.Mutex // makes Place's swap of placed and replaced one step
}

// Init sets the first ring, live and placed: the zone manager starts
// with it.
func (s *RingState) Init(r *Ring) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.live.Store(r)
	s.placed.Store(r)
}

// Live is the ring in force, or nil before Init.
func (s *RingState) Live() *Ring { return s.live.Load() }

// SetLive makes r the ring questions are routed by.
func (s *RingState) SetLive(r *Ring) { s.live.Store(r) }

// Placed is the ring the zone manager was last given.
func (s *RingState) Placed() *Ring { return s.placed.Load() }

// Place reports whether the zone manager must be given r, and if so
// records that it is: not when r is the same as the placed ring (a
// member's metadata changed and nothing else, as one saying it is
// leaving), where a placement would replay what the process holds for
// nothing.
func (s *RingState) Place(r *Ring) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	if r.Same(s.placed.Load()) {
		return false
	}
	s.replaced.Store(s.placed.Swap(r))
	return true
}

// Remote is the actor-remote address of member: from the live ring, or
// else the placed one, or the one it replaced, so that a member that left
// is still reached while it answers through its lameduck.
func (s *RingState) Remote(member string) (string, bool) {
	for _, r := range []*Ring{s.live.Load(), s.placed.Load(), s.replaced.Load()} {
		if r == nil {
			continue
		}
		if m, ok := r.Member(member); ok && m.Remote != "" {
			return m.Remote, true
		}
	}
	return "", false
}
