package zone

import (
	"net/netip"
	"sync"
)

// PodIndex maps pod addresses to their namespace, so that autopath can
// find a client's search path from its source address. The zone manager
// writes it; listeners read it concurrently.
type PodIndex struct {
	m sync.Map // netip.Addr → string
}

// Namespace returns the namespace of the pod with address a.
func (p *PodIndex) Namespace(a netip.Addr) (string, bool) {
	v, ok := p.m.Load(a.Unmap())
	if !ok {
		return "", false
	}
	return v.(string), true
}

// Set records that a belongs to a pod of namespace ns.
func (p *PodIndex) Set(a netip.Addr, ns string) { p.m.Store(a.Unmap(), ns) }

// Delete forgets a.
func (p *PodIndex) Delete(a netip.Addr) { p.m.Delete(a.Unmap()) }
