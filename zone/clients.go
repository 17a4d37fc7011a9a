package zone

import (
	"net/netip"
	"sync/atomic"
)

// NodePod is what a node-local process keeps of a pod of its own node:
// enough to know, from a query's source address, the namespace the
// client's search path starts from and whether it can use an IPv6
// address.
type NodePod struct {
	Namespace, Name string
	// HostNetwork pods share the node's addresses: a query from one says
	// nothing about which pod asked.
	HostNetwork bool
	// Done pods (Succeeded, Failed) no longer own their addresses, which
	// the node may give to a new pod.
	Done bool
	IPs  []netip.Addr
}

// Client is what the directory says of one source address.
type Client struct {
	Namespace string
	// IPv6 reports that the pod has an IPv6 address of its own.
	IPv6 bool
}

// Clients is an immutable directory of the pods of one node, by address.
// An address claimed by pods of two namespaces (an address reused before
// the old pod's deletion was seen) belongs to neither: its client gets
// the ordinary answers, never another namespace's search path.
type Clients struct {
	byAddr map[netip.Addr]Client
	pods   int
}

// NewClients builds the directory of pods. Pods without an address yet,
// host-network pods and finished pods are left out; they are counted in
// Pods all the same, as they are held.
func NewClients(pods []NodePod) *Clients {
	c := &Clients{byAddr: make(map[netip.Addr]Client, len(pods)), pods: len(pods)}
	ambiguous := map[netip.Addr]bool{}
	for _, p := range pods {
		if p.HostNetwork || p.Done || p.Namespace == "" {
			continue
		}
		cl := Client{Namespace: p.Namespace}
		for _, a := range p.IPs {
			if a.Unmap().Is6() {
				cl.IPv6 = true
			}
		}
		for _, a := range p.IPs {
			a = a.Unmap()
			if ambiguous[a] {
				continue
			}
			if have, ok := c.byAddr[a]; ok && have.Namespace != cl.Namespace {
				delete(c.byAddr, a)
				ambiguous[a] = true
				continue
			} else if ok {
				cl.IPv6 = cl.IPv6 || have.IPv6 // two pods of one namespace: the address may reach either
			}
			c.byAddr[a] = cl
		}
	}
	return c
}

// Lookup returns the client at address a.
func (c *Clients) Lookup(a netip.Addr) (Client, bool) {
	if c == nil {
		return Client{}, false
	}
	cl, ok := c.byAddr[a.Unmap()]
	return cl, ok
}

// Pods is the number of pods the directory was built from.
func (c *Clients) Pods() int {
	if c == nil {
		return 0
	}
	return c.pods
}

// ClientIndex is the current directory of a node's clients: the pod
// watch replaces it whole, listeners read it without locks. Before the
// first list every client is unknown and gets the ordinary answers.
type ClientIndex struct {
	current atomic.Pointer[Clients]
}

// Set replaces the directory.
func (x *ClientIndex) Set(c *Clients) { x.current.Store(c) }

// Load returns the directory; nil before the first Set.
func (x *ClientIndex) Load() *Clients { return x.current.Load() }

// Namespace returns the namespace of the pod at address a, for autopath.
func (x *ClientIndex) Namespace(a netip.Addr) (string, bool) {
	cl, ok := x.current.Load().Lookup(a)
	return cl.Namespace, ok
}

// IPv4Only reports that a is the address of a known pod with no IPv6
// address: it cannot use an AAAA answer. Unknown clients may.
func (x *ClientIndex) IPv4Only(a netip.Addr) bool {
	cl, ok := x.current.Load().Lookup(a)
	return ok && !cl.IPv6
}
