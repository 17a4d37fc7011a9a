package zone

import (
	"net/netip"
	"slices"
	"strings"

	"github.com/miekg/dns"

	"github.com/shardns/shardns/model"
)

// External is CoreDNS's k8s_external: the external IPs and load balancer
// ingress IPs of Services (and, with Headless, the endpoints of headless
// Services) published as <service>.<namespace>.<zone> in zones of their
// own. A name of such a zone is routed to the service zone of its
// namespace in the first cluster domain (ns.svc.<domain>), so the owner of
// the namespace answers it from the snapshot it holds, and a replica that
// does not hold it asks that owner as for a cluster name.
type External struct {
	Zones    []string // lower-case, fully qualified
	Apex     string   // the label of the zone's own names: ns1.<apex>.<zone>
	TTL      uint32   // of the SOA, NS and address records; SRV records keep the cluster TTL, as CoreDNS's do
	Headless bool     // answer headless services from their endpoints
	// TransferTo lists who may transfer the zones (AXFR and IXFR over
	// TCP); empty: nobody.
	TransferTo []netip.Prefix
}

// TransferAllowed reports whether a client at addr may transfer the
// external zones.
func (e *External) TransferAllowed(addr netip.Addr) bool {
	addr = addr.Unmap()
	for _, p := range e.TransferTo {
		if p.Contains(addr) {
			return true
		}
	}
	return false
}

// routeExternal routes qname, inside external zone z. The zone's apex and
// its <apex> names are answered without state, and so are a namespace's
// name and names too long to be a service's; the names of a service, its
// endpoints and its ports go to the namespace's service zone.
func (d *Domains) routeExternal(qname, z string) Route {
	rel := qname[:len(qname)-len(z)]
	if rel == "" {
		return Route{Kind: RouteApex, Origin: z, External: true}
	}
	ns, rest := lastLabel(rel)
	labels := strings.Count(rest, ".")
	if ns == d.ExternalApex || labels == 0 || labels > 3 || len(d.Cluster) == 0 {
		return Route{Kind: RouteStateless, Origin: z, External: true}
	}
	return Route{Kind: RouteZone, Origin: z, Key: ServiceZoneKey(ns, d.Cluster[0]), External: true}
}

// externalZone returns the longest external zone qname is in, or "".
func (d *Domains) externalZone(qname string) string {
	z := ""
	for _, e := range d.External {
		if InZone(qname, e) && len(e) > len(z) {
			z = e
		}
	}
	return z
}

// externalSOA is the SOA of external zone z as k8s_external writes it.
func (c *Config) externalSOA(z string, serial uint32) []dns.RR {
	e := c.External
	return []dns.RR{&dns.SOA{
		Hdr:     hdr(z, dns.TypeSOA, e.TTL),
		Ns:      "ns1." + e.Apex + "." + z,
		Mbox:    "hostmaster." + e.Apex + "." + z,
		Serial:  serial,
		Refresh: 7200,
		Retry:   1800,
		Expire:  86400,
		Minttl:  e.TTL,
	}}
}

// answerExternal answers a name of an external zone.
func answerExternal(cfg *Config, v Reader, dir *Directory, route Route, q Question) Response {
	z := route.Origin
	soa := dir.soa[z]
	e := cfg.External
	switch route.Kind {
	case RouteApex:
		switch q.Type {
		case dns.TypeSOA:
			return Response{Answer: soa}
		case dns.TypeNS:
			ns := "ns1." + e.Apex + "." + z
			return Response{Answer: []dns.RR{&dns.NS{Hdr: hdr(z, dns.TypeNS, e.TTL), Ns: ns}},
				Extra: cfg.externalNSAddrs(ns, 0)}
		}
		return negative(dns.RcodeSuccess, soa)
	case RouteStateless:
		rel := q.Name[:len(q.Name)-len(z)]
		last, rest := lastLabel(rel)
		switch {
		case last == e.Apex && rest == "":
			return negative(dns.RcodeSuccess, soa) // the <apex> empty non-terminal
		case last == e.Apex && rest == "ns1.":
			if q.Type == dns.TypeA || q.Type == dns.TypeAAAA {
				if ans := cfg.externalNSAddrs(q.Name, q.Type); len(ans) > 0 {
					return Response{Answer: ans}
				}
			}
			return negative(dns.RcodeSuccess, soa)
		case rest == "" && last != e.Apex && dir.HasNamespace(last):
			return negative(dns.RcodeSuccess, soa) // a namespace holds no records of its own
		}
		return negative(dns.RcodeNameError, soa)
	}
	ns, _ := lastLabel(q.Name[:len(q.Name)-len(z)])
	if !dir.HasNamespace(ns) {
		return negative(dns.RcodeNameError, soa)
	}
	s := v.Zone(route.Key)
	if s == nil {
		if r, ok := heldElsewhere(v, route.Key); ok {
			return r
		}
		return negative(dns.RcodeNameError, soa) // a namespace without services
	}
	return s.answerExternal(cfg, q, z, ns, soa)
}

// externalNSAddrs are the addresses of ns1.<apex>.<zone>, named name:
// the server's own, as ns.dns.<domain>'s; qtype 0 gives both families.
func (c *Config) externalNSAddrs(name string, qtype uint16) []dns.RR {
	var out []dns.RR
	for _, a := range c.NSAddrs {
		if qtype == 0 || (qtype == dns.TypeA) == a.Is4() {
			out = append(out, addrRR(name, a, c.External.TTL))
		}
	}
	return out
}

// answerExternal answers q, a name of external zone z below namespace ns
// (whose service zone s is), from the Services and EndpointSlices s was
// built from: <service>, <endpoint>.<service> and <port>.<proto>.<service>
// as CoreDNS's kubernetes plugin feeds k8s_external. These names are few
// and rarely asked next to the cluster names, so they are computed from
// the frozen objects the snapshot keeps rather than held encoded.
func (s *Snapshot) answerExternal(cfg *Config, q Question, z, ns string, soa []dns.RR) Response {
	rel := q.Name[:len(q.Name)-len(z)-len(ns)-1]
	service, rest := lastLabel(rel)
	var endpoint, port, proto string
	switch labels := strings.Split(strings.TrimSuffix(rest, "."), "."); len(labels) {
	case 1:
		endpoint = strings.TrimPrefix(labels[0], "_")
	case 2:
		port, proto = strings.TrimPrefix(labels[0], "_"), strings.TrimPrefix(labels[1], "_")
	}
	base := service + "." + ns + "." + z
	var es []entry
	for _, name := range sortedKeys(s.Services) {
		if name != service {
			continue
		}
		thawed, err := s.Services[name].Thaw(ns, name, "")
		svc, ok := thawed.(*model.Service)
		if err != nil || !ok {
			continue
		}
		if cfg.External.Headless && len(svc.ExternalIPs) == 0 && (svc.Type == model.ServiceHeadless || endpoint != "") {
			es = s.externalEndpoints(cfg, es, svc, base, endpoint, port, proto)
			continue
		}
		es = externalEntries(es, svc, base, port, proto)
	}
	if len(es) == 0 {
		return negative(dns.RcodeNameError, soa)
	}
	var ans, extra []dns.RR
	switch q.Type {
	case dns.TypeA, dns.TypeAAAA:
		ans = externalAddrs(q, es, cfg.TTL, cfg.External.TTL)
	case dns.TypeSRV:
		ans, extra = entriesSRV(q.Name, es, cfg.TTL, cfg.External.TTL)
	}
	if len(ans) == 0 {
		return negative(dns.RcodeSuccess, soa)
	}
	return Response{Answer: ans, Extra: extra}
}

// externalEntries appends the entries of svc's external addresses on the
// ports matching port and proto: one per address and port, in the order
// of the addresses, where a load balancer's ingress hostname is an entry
// without an address whose target is the hostname.
func externalEntries(es []entry, svc *model.Service, base, port, proto string) []entry {
	hosts := svc.ExternalHosts
	for i := 0; i <= len(svc.ExternalIPs); i++ {
		for len(hosts) > 0 && hosts[0].After <= i {
			es = appendPorts(es, svc.Ports, netip.Addr{}, hosts[0].Name, port, proto)
			hosts = hosts[1:]
		}
		if i < len(svc.ExternalIPs) {
			es = appendPorts(es, svc.Ports, svc.ExternalIPs[i], base, port, proto)
		}
	}
	return es
}

// appendPorts appends an entry of addr and target for each of ports
// matching port and proto.
func appendPorts(es []entry, ports []model.Port, addr netip.Addr, target, port, proto string) []entry {
	for _, p := range ports {
		if matchPort(port, p.Name, proto, p.Protocol) {
			es = append(es, entry{addr: addr, port: p.Port, target: target})
		}
	}
	return es
}

// externalAddrs answers an A or AAAA question q from es as k8s_external
// does: each address of the family once, with addrTTL, and for each
// entry of an ingress hostname (every port's) a CNAME to it with
// cnameTTL, the cluster TTL CoreDNS gives it; the query path puts the
// hostname's records, looked up upstream, behind each (ChaseExternal).
func externalAddrs(q Question, es []entry, cnameTTL, addrTTL uint32) []dns.RR {
	var ans []dns.RR
	seen := map[netip.Addr]bool{}
	for _, e := range es {
		if !e.addr.IsValid() {
			ans = append(ans, &dns.CNAME{Hdr: hdr(q.Name, dns.TypeCNAME, cnameTTL), Target: e.target})
			continue
		}
		if a := e.addr.Unmap(); a.Is4() == (q.Type == dns.TypeA) && !seen[a] {
			seen[a] = true
			ans = append(ans, addrRR(q.Name, a, addrTTL))
		}
	}
	return ans
}

// externalEndpoints appends the entries of svc's ready endpoints: those
// called endpoint (any, when ""), on the ports matching port and proto.
func (s *Snapshot) externalEndpoints(cfg *Config, es []entry, svc *model.Service, base, endpoint, port, proto string) []entry {
	for _, name := range sortedKeys(s.Slices) {
		f := s.Slices[name]
		if f.ServiceName() != svc.Name {
			continue
		}
		thawed, err := f.Thaw(svc.Namespace, name, "")
		sl, ok := thawed.(*model.EndpointSlice)
		if err != nil || !ok {
			continue
		}
		for _, ep := range sl.Endpoints {
			if !ep.Ready {
				continue
			}
			for _, addr := range ep.Addresses {
				host := EndpointHostname(ep, addr, cfg.EndpointPodNames)
				if endpoint != "" && !strings.EqualFold(endpoint, host) {
					continue
				}
				for _, p := range sl.Ports {
					if matchPort(port, p.Name, proto, p.Protocol) {
						es = append(es, entry{addr: addr, port: p.Port, target: strings.ToLower(host) + "." + base})
					}
				}
			}
		}
	}
	return es
}

// matchPort is CoreDNS's port match: an empty port or protocol asked
// matches any, otherwise they compare without case.
func matchPort(port, name, proto, protocol string) bool {
	return (port == "" || strings.EqualFold(port, name)) && (proto == "" || strings.EqualFold(proto, protocol))
}

// entriesSRV is the SRV answer of owner from es and its additional
// address records: one SRV per target and port, weighed as CoreDNS
// weighs them (100 shared among all entries, before duplicates and
// entries without a port go), SRV records with srvTTL and addresses with
// addrTTL. An entry without an address (an ingress hostname) has its SRV
// record and no address here: the query path adds the hostname's,
// looked up upstream (ChaseExternal).
func entriesSRV(owner string, es []entry, srvTTL, addrTTL uint32) (ans, extra []dns.RR) {
	weight := uint16(10000 / (100 * len(es)))
	if weight == 0 {
		weight = 1
	}
	type srvKey struct {
		target string
		port   int32
	}
	type extraKey struct {
		target string
		addr   string
	}
	seenSRV, seenExtra := map[srvKey]bool{}, map[extraKey]bool{}
	for _, e := range es {
		if e.port < 0 {
			continue // an endpoint without ports has no SRV record
		}
		if k := (srvKey{e.target, e.port}); !seenSRV[k] {
			seenSRV[k] = true
			ans = append(ans, &dns.SRV{Hdr: hdr(owner, dns.TypeSRV, srvTTL), Weight: weight, Port: uint16(e.port), Target: e.target})
		}
		if !e.addr.IsValid() {
			continue // an ingress hostname: its records are looked up upstream
		}
		if k := (extraKey{e.target, e.addr.Unmap().String()}); !seenExtra[k] {
			seenExtra[k] = true
			extra = append(extra, addrRR(e.target, e.addr, addrTTL))
		}
	}
	return ans, slices.Clip(extra)
}
