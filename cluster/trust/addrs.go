package trust

import (
	"net/netip"
	"sync/atomic"
)

// AddrSet is a set of IP addresses replaced whole, read without locks
// (memberlist asks it under its node lock, the remote port on every
// connection).
type AddrSet struct {
	p atomic.Pointer[map[netip.Addr]struct{}]
}

// Set replaces the set with addrs.
func (s *AddrSet) Set(addrs []netip.Addr) {
	m := make(map[netip.Addr]struct{}, len(addrs))
	for _, a := range addrs {
		m[a.Unmap()] = struct{}{}
	}
	s.p.Store(&m)
}

// Has reports whether a is in the set; nil and unset sets hold nothing.
func (s *AddrSet) Has(a netip.Addr) bool {
	if s == nil {
		return false
	}
	m := s.p.Load()
	if m == nil {
		return false
	}
	_, ok := (*m)[a.Unmap()]
	return ok
}
