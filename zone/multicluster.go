package zone

import (
	"net/netip"
	"strings"

	"github.com/miekg/dns"

	"github.com/shardns/shardns/model"
)

// Multicluster zones (clusterset.local) are the DNS of the Multi-Cluster
// Services API (KEP-1645), as CoreDNS's kubernetes plugin answers them
// with `multicluster ZONES`: <service>.<ns>.svc.<zone> answers a
// ClusterSetIP ServiceImport's spec.ips, or a Headless one's ready
// endpoints from the EndpointSlices imported for it (labelled
// multicluster.kubernetes.io/service-name), each such endpoint also named
// <hostname>.<clusterid>.<service>.<ns>.svc.<zone>; SRV names are
// <_port>.<_proto>.<service>.<ns>.svc.<zone>. The zone's apex, svc., pod
// names (insecure) and dns-version answer as a cluster domain's.
//
// The names of namespace ns are routed to ns's service zone in the first
// cluster domain, the zone that already holds ns's Services: its owners
// hold ns's ServiceImports and imported slices too, so a namespace is
// never split across replicas, the sharded watches, handoffs and
// placement that follow namespaces stay as they are, and a replica that
// does not hold the zone asks its owner as for a cluster name. A zone key
// of its own (ns.svc.clusterset.local.) would have had owners of its own
// by rendezvous hashing, and every replica that watches a namespace's
// objects would have had to hold both.
//
// These names are few and asked far less than the cluster's, so they are
// computed from the frozen objects the snapshot keeps (Imported) rather
// than held encoded: a namespace without imports costs nothing more.

// Imported are the Multi-Cluster Services objects of one namespace, by
// object name, frozen as the sources sent them.
type Imported struct {
	Services map[string]model.Frozen // ServiceImports
	Slices   map[string]model.Frozen // imported EndpointSlices
}

// isMulticluster reports whether origin is a multicluster zone.
func (d *Domains) isMulticluster(origin string) bool {
	for _, z := range d.Multicluster {
		if z == origin {
			return true
		}
	}
	return false
}

// routeMulticluster routes qname, below multicluster zone origin (rel the
// labels before it): a name of a service of namespace ns goes to ns's
// service zone in the first cluster domain, anything else is answered
// without state, as a cluster domain's (pod names always are: the zone
// holds no pods).
func (d *Domains) routeMulticluster(qname, origin, rel string) Route {
	last, rest := lastLabel(rel)
	if rest == "" || last != "svc" || len(d.Cluster) == 0 {
		return Route{Kind: RouteStateless, Origin: origin, Multicluster: true}
	}
	ns, _ := lastLabel(rest)
	return Route{Kind: RouteZone, Origin: origin, Key: ServiceZoneKey(ns, d.Cluster[0]), Multicluster: true}
}

// answerMulticluster answers a name below <ns>.svc.<zone> of a
// multicluster zone.
func answerMulticluster(cfg *Config, v Reader, dir *Directory, route Route, q Question) Response {
	soa := dir.soa[route.Origin]
	rel := q.Name[:len(q.Name)-len(route.Origin)-len("svc.")]
	ns, _ := lastLabel(rel)
	if !dir.HasNamespace(ns) {
		return negative(dns.RcodeNameError, soa)
	}
	nsName := ns + ".svc." + route.Origin
	s := v.Zone(route.Key)
	if s == nil {
		if r, ok := heldElsewhere(v, route.Key); ok {
			return r
		}
	}
	if q.Name == nsName {
		return negative(dns.RcodeSuccess, soa) // a namespace holds no records of its own
	}
	if s == nil || s.Imported == nil {
		return negative(dns.RcodeNameError, soa)
	}
	return s.Imported.answer(cfg, q, q.Name[:len(q.Name)-len(nsName)], nsName, soa)
}

// importedQuery is what a name below a namespace asks for, parsed as
// CoreDNS parses it in a multicluster zone. Empty fields match anything.
type importedQuery struct {
	service, endpoint, cluster, port, proto string
}

// parseImported parses rel, the labels before <ns>.svc.<zone>: service;
// endpoint.service; endpoint.cluster.service, or _port._proto.service
// when either label starts with an underscore. ok is false for names of
// more labels, which do not exist.
func parseImported(rel string) (q importedQuery, ok bool) {
	labels := strings.Split(strings.TrimSuffix(rel, "."), ".")
	q.service = labels[len(labels)-1]
	switch len(labels) {
	case 1:
	case 2:
		q.endpoint = labels[0]
	case 3:
		if strings.HasPrefix(labels[0], "_") || strings.HasPrefix(labels[1], "_") {
			q.port, q.proto = strings.TrimPrefix(labels[0], "_"), strings.TrimPrefix(labels[1], "_")
		} else {
			q.endpoint, q.cluster = labels[0], labels[1]
		}
	default:
		return q, false
	}
	return q, true
}

// answer answers q, whose labels before nsName (<ns>.svc.<zone>) are rel.
// The records come from every matching address and port, as CoreDNS
// lists them: A and AAAA keep one record per address, SRV one per target
// and port with the targets' addresses in the additional section.
func (m *Imported) answer(cfg *Config, q Question, rel, nsName string, soa []dns.RR) Response {
	iq, ok := parseImported(rel)
	if !ok {
		return negative(dns.RcodeNameError, soa)
	}
	var es []entry
	found := false
	for _, name := range sortedKeys(m.Services) {
		if !strings.EqualFold(name, iq.service) {
			continue
		}
		thawed, err := m.Services[name].Thaw("", name, "")
		imp, isImport := thawed.(*model.ServiceImport)
		if err != nil || !isImport {
			continue
		}
		base := strings.ToLower(name) + "." + nsName
		if cfg.IgnoreEmptyService && !imp.Headless && !m.hasReadyEndpoint(name) {
			continue
		}
		var n int
		if imp.Headless || iq.endpoint != "" {
			es, n = m.endpoints(cfg, es, name, base, iq)
		} else {
			es, n = importIPs(es, imp, base, iq)
		}
		found = found || n > 0
	}
	if !found {
		return negative(dns.RcodeNameError, soa)
	}
	var ans, extra []dns.RR
	switch q.Type {
	case dns.TypeA, dns.TypeAAAA:
		seen := map[netip.Addr]bool{}
		for _, e := range es {
			if a := e.addr.Unmap(); a.Is4() == (q.Type == dns.TypeA) && !seen[a] {
				seen[a] = true
				ans = append(ans, addrRR(q.Name, a, cfg.TTL))
			}
		}
	case dns.TypeSRV:
		ans, extra = entriesSRV(q.Name, es, cfg.TTL, cfg.TTL)
	}
	if len(ans) == 0 {
		return negative(dns.RcodeSuccess, soa)
	}
	return Response{Answer: ans, Extra: extra}
}

// importIPs appends the entries of a ClusterSetIP import: each of its IPs
// on each port that matches, the target its own name. An import without
// ports has no entries, as in CoreDNS. It returns how many it appended.
func importIPs(es []entry, imp *model.ServiceImport, base string, iq importedQuery) ([]entry, int) {
	n := len(es)
	for _, p := range imp.Ports {
		if !matchPort(iq.port, p.Name, iq.proto, p.Protocol) {
			continue
		}
		for _, ip := range imp.IPs {
			es = append(es, entry{addr: ip, port: p.Port, target: base})
		}
	}
	return es, len(es) - n
}

// endpoints appends the entries of the ready endpoints imported for
// service: those named iq.endpoint in cluster iq.cluster when a name is
// asked, on the ports matching iq's. A slice without ports gives its
// endpoints port -1: they answer A and AAAA, never SRV.
func (m *Imported) endpoints(cfg *Config, es []entry, service, base string, iq importedQuery) ([]entry, int) {
	n := len(es)
	for _, name := range sortedKeys(m.Slices) {
		f := m.Slices[name]
		if f.ServiceName() != service {
			continue
		}
		thawed, err := f.Thaw("", name, "")
		sl, ok := thawed.(*model.MultiClusterSlice)
		if err != nil || !ok {
			continue
		}
		if iq.endpoint != "" && !strings.EqualFold(iq.cluster, sl.ClusterID) {
			continue
		}
		ports := sl.Ports
		if len(ports) == 0 {
			ports = []model.Port{{Port: -1}}
		}
		for _, ep := range sl.Endpoints {
			if !ep.Ready {
				continue
			}
			for _, addr := range ep.Addresses {
				host := EndpointHostname(ep, addr, cfg.EndpointPodNames)
				if iq.endpoint != "" && !strings.EqualFold(iq.endpoint, host) {
					continue
				}
				target := strings.ToLower(host + "." + sl.ClusterID + "." + base)
				for _, p := range ports {
					if matchPort(iq.port, p.Name, iq.proto, p.Protocol) {
						es = append(es, entry{addr: addr, port: p.Port, target: target})
					}
				}
			}
		}
	}
	return es, len(es) - n
}

// hasReadyEndpoint reports whether a ready endpoint is imported for
// service: ignore empty_service answers an import without one NXDOMAIN.
func (m *Imported) hasReadyEndpoint(service string) bool {
	for name, f := range m.Slices {
		if f.ServiceName() != service {
			continue
		}
		thawed, err := f.Thaw("", name, "")
		if sl, ok := thawed.(*model.MultiClusterSlice); ok && err == nil {
			for _, ep := range sl.Endpoints {
				if ep.Ready && len(ep.Addresses) > 0 {
					return true
				}
			}
		}
	}
	return false
}
