package zone

import (
	"net/netip"
	"slices"
	"strings"
	"sync/atomic"

	"github.com/miekg/dns"

	"github.com/shardns/shardns/model"
)

// Topology-aware answers follow the EndpointSlice API's rules, as
// kube-proxy applies them to traffic: a headless Service's endpoints
// hinted for the client's zone (hints.forZones) come first, or alone;
// hints count only when every ready endpoint of the Service has them,
// and without them a Service with trafficDistribution PreferClose prefers
// the endpoints located in the client's zone. When no endpoint is
// preferred for the zone, every ready endpoint answers, in the usual
// order. ClusterIP answers never change.
//
// The zones each address is preferred for are kept beside the part of a
// hinted headless service (nothing for any other service), so a replica
// orders its own answers for its own zone and the answers it gives a
// node-local process for that process's zone. Ordering happens where a
// name's records are decoded: once per name and snapshot on the fast
// path, whose packed answers it then reuses.

// TopologyMode is how far an answer follows the client's zone.
type TopologyMode uint8

// Topology modes, the values of kubernetes.topology.
const (
	TopologyOff    TopologyMode = iota // every ready endpoint, in the usual order
	TopologyPrefer                     // the zone's endpoints first, then the rest
	TopologyOnly                       // the zone's endpoints alone
)

// ParseTopologyMode reads off, prefer or only; ok is false for anything
// else.
func ParseTopologyMode(s string) (m TopologyMode, ok bool) {
	switch s {
	case "", "off":
		return TopologyOff, true
	case "prefer":
		return TopologyPrefer, true
	case "only":
		return TopologyOnly, true
	}
	return TopologyOff, false
}

// Topology is whom an answer is ordered for: a mode and the client's
// zone. The zero value orders nothing.
type Topology struct {
	Mode TopologyMode
	Zone string
}

// nodeZone is the zone of the node this process runs on, set once it is
// known; Config holds one, shared with the configs Restrict makes of it
// (Prepare makes it).
type nodeZone struct{ p atomic.Pointer[string] }

// SetNodeZone records the zone of the node this process runs on: the
// zone its own answers are ordered for. Call it after Prepare.
func (c *Config) SetNodeZone(z string) {
	if c.nodeZone == nil {
		c.nodeZone = &nodeZone{}
	}
	c.nodeZone.p.Store(&z)
}

// NodeZone is the zone SetNodeZone recorded; "" while it is not known.
func (c *Config) NodeZone() string {
	if c.nodeZone == nil {
		return ""
	}
	if z := c.nodeZone.p.Load(); z != nil {
		return *z
	}
	return ""
}

// OwnTopology is what this process's own answers are ordered for.
func (c *Config) OwnTopology() Topology {
	if c.Topology == TopologyOff {
		return Topology{}
	}
	return Topology{Mode: c.Topology, Zone: c.NodeZone()}
}

// topologyFor is what the answer to q is ordered for: the asker's, when
// another process asked, else this process's own.
func (c *Config) topologyFor(q Question) Topology {
	if q.Asker != nil {
		return *q.Asker
	}
	return c.OwnTopology()
}

// preferredZones returns the zones each ready address of a headless
// service is preferred for, by the rules above; nil when no rule applies
// (the service is not headless, or neither fully hinted nor PreferClose).
func preferredZones(svc *model.Service, slices []*model.EndpointSlice) map[netip.Addr][]string {
	if svc.Type != model.ServiceHeadless {
		return nil
	}
	hinted, any := true, false
	for _, sl := range slices {
		for _, ep := range sl.Endpoints {
			if ep.Ready && len(ep.Addresses) > 0 {
				any = true
				hinted = hinted && len(ep.ForZones) > 0
			}
		}
	}
	if !any || (!hinted && !svc.PreferClose) {
		return nil
	}
	out := map[netip.Addr][]string{}
	for _, sl := range slices {
		for _, ep := range sl.Endpoints {
			zones := ep.ForZones
			if !hinted {
				zones = nil
				if ep.Zone != "" {
					zones = []string{ep.Zone}
				}
			}
			if !ep.Ready || len(zones) == 0 {
				continue
			}
			for _, a := range ep.Addresses {
				out[a.Unmap()] = append(out[a.Unmap()], zones...)
			}
		}
	}
	if len(out) == 0 {
		return nil
	}
	return out
}

// orderForZone orders the records of one name for t: the A, AAAA and
// SRV answers of addresses preferred for t.Zone first (an SRV by its
// target's additional addresses), or alone with TopologyOnly, and the
// additional records likewise. When nothing is preferred for the zone
// the records come back as they were. preferred is how many records
// lead the answer for the zone when others follow them (TopologyPrefer),
// else 0: loadbalance shuffles the two runs apart (Response.Preferred).
// It never modifies its arguments.
func orderForZone(ans, extra []dns.RR, pref map[netip.Addr][]string, t Topology) (_, _ []dns.RR, preferred int) {
	if t.Mode == TopologyOff || t.Zone == "" || len(pref) == 0 {
		return ans, extra, 0
	}
	near := func(a netip.Addr) bool { return slices.Contains(pref[a], t.Zone) }
	var targets []string // SRV targets with an address preferred for the zone
	for _, rr := range extra {
		if a, ok := rrAddr(rr); ok && near(a) {
			targets = append(targets, strings.ToLower(rr.Header().Name))
		}
	}
	isNear := func(rr dns.RR) bool {
		if srv, ok := rr.(*dns.SRV); ok {
			return slices.Contains(targets, strings.ToLower(srv.Target))
		}
		a, ok := rrAddr(rr)
		return ok && near(a)
	}
	if !slices.ContainsFunc(ans, isNear) {
		return ans, extra, 0 // no endpoint for the zone: all of them
	}
	ordered, nearCount := partition(ans, isNear, t.Mode == TopologyOnly)
	if t.Mode == TopologyPrefer && nearCount < len(ans) {
		preferred = nearCount // 0 when all are near: one run, nothing follows
	}
	extraNear := func(rr dns.RR) bool { return slices.Contains(targets, strings.ToLower(rr.Header().Name)) }
	orderedExtra, _ := partition(extra, extraNear, t.Mode == TopologyOnly)
	return ordered, orderedExtra, preferred
}

// partition returns a new slice of the records of rrs for which near
// holds, in order, followed by the others unless only, and how many of
// them near holds for.
func partition(rrs []dns.RR, near func(dns.RR) bool, only bool) (_ []dns.RR, nearCount int) {
	if len(rrs) == 0 {
		return rrs, 0
	}
	out := make([]dns.RR, 0, len(rrs))
	for _, rr := range rrs {
		if near(rr) {
			out = append(out, rr)
		}
	}
	nearCount = len(out)
	if !only {
		for _, rr := range rrs {
			if !near(rr) {
				out = append(out, rr)
			}
		}
	}
	return out, nearCount
}

// rrAddr is the address of an A or AAAA record.
func rrAddr(rr dns.RR) (netip.Addr, bool) {
	switch r := rr.(type) {
	case *dns.A:
		a, ok := netip.AddrFromSlice(r.A)
		return a.Unmap(), ok
	case *dns.AAAA:
		a, ok := netip.AddrFromSlice(r.AAAA)
		return a.Unmap(), ok
	}
	return netip.Addr{}, false
}
