package zone

import (
	"net/netip"
	"sort"
	"strconv"
	"strings"

	"github.com/miekg/dns"

	"github.com/shardns/shardns/model"
)

// Snapshot is the immutable state of one zone: the records of every name in
// it, prebuilt so that answering allocates nothing. It also keeps the
// objects it was built from, so a restarted zone actor can resume from it.
type Snapshot struct {
	Key    string // zone key
	Origin string // configured zone it lies in
	Serial uint32
	nodes  map[string]*node
	soa    []dns.RR
	// wildcard holds the records of "*.<Key>" in a mesh zone.
	wildcard *node

	// Sources the snapshot was built from (read-only).
	Services map[string]*model.Service       // service zones, by name
	Slices   map[string]*model.EndpointSlice // service zones, by name
	PTRs     map[model.Key][]PTR             // reverse zones, by source object
	Pods     map[string]*model.Pod           // pod zones, by name
	Mesh     map[model.Key][]MeshHost        // mesh zones, by ServiceEntry
}

// node holds the records of one owner name.
type node struct {
	a, aaaa       []dns.RR
	srv, srvExtra []dns.RR
	ptr           []dns.RR
	ptrNamespaces []string   // namespace of each ptr target: answered while it exists
	cname         *dns.CNAME // ExternalName services
	cnameRecords  []dns.RR   // the CNAME alone, for CNAME questions
}

// Directory is what every node knows about every zone: which namespaces
// exist, which mesh host names exist, and whether the sources have
// synced. It is small and replicated.
type Directory struct {
	Namespaces map[string]struct{} // lower-case names
	Synced     bool                // every source finished its initial list
	Serial     uint32
	soa        map[string][]dns.RR
	mesh       mesh // ServiceEntry host names (see WithMesh)
}

// NewDirectory builds a directory and its SOA records.
func NewDirectory(cfg *Config, namespaces map[string]struct{}, synced bool, serial uint32) *Directory {
	d := &Directory{Namespaces: namespaces, Synced: synced, Serial: serial, soa: map[string][]dns.RR{}}
	for _, z := range cfg.Domains.Cluster {
		d.soa[z] = cfg.SOA(z, serial)
	}
	for _, z := range cfg.Domains.Reverse {
		d.soa[z] = cfg.SOA(z, serial)
	}
	return d
}

// HasNamespace reports whether namespace ns (lower-case) exists.
func (d *Directory) HasNamespace(ns string) bool {
	_, ok := d.Namespaces[ns]
	return ok
}

// entry is one (address or alias, port, target) that a name resolves to,
// the unit CoreDNS's kubernetes plugin calls a service record.
type entry struct {
	addr   netip.Addr
	port   int32 // -1 when the endpoint has no ports
	target string
}

// BuildServiceZone builds the snapshot of zone key (ns.svc.<origin>) from
// the services and endpoint slices of that namespace.
func BuildServiceZone(cfg *Config, key, origin string, serial uint32,
	services map[string]*model.Service, slices map[string]*model.EndpointSlice) *Snapshot {
	s := &Snapshot{Key: key, Origin: origin, Serial: serial, nodes: map[string]*node{},
		soa: cfg.SOA(origin, serial), Services: services, Slices: slices}
	bySvc := map[string][]*model.EndpointSlice{}
	for _, name := range sortedKeys(slices) {
		sl := slices[name]
		svc := strings.ToLower(sl.ServiceName)
		bySvc[svc] = append(bySvc[svc], sl)
	}
	for _, name := range sortedKeys(services) {
		svc := services[name]
		s.addService(cfg, svc, bySvc[strings.ToLower(svc.Name)])
	}
	return s
}

func (s *Snapshot) addService(cfg *Config, svc *model.Service, slices []*model.EndpointSlice) {
	base := strings.ToLower(svc.Name) + "." + s.Key
	if svc.Type == model.ServiceExternalName {
		target := Fqdn(svc.ExternalName)
		if _, err := netip.ParseAddr(strings.TrimSuffix(target, ".")); err == nil || target == base {
			return // CoreDNS serves no record for an IP or a self-loop
		}
		c := &dns.CNAME{Hdr: hdr(base, dns.TypeCNAME, cfg.TTL), Target: target}
		s.nodes[base] = &node{cname: c, cnameRecords: []dns.RR{c}}
		return
	}
	if svc.Type == model.ServiceClusterIP && cfg.IgnoreEmptyService && !hasReadyEndpoint(slices) {
		return
	}
	var all []entry
	byPort := map[string][]entry{} // "_name._proto" → entries
	if svc.Type == model.ServiceClusterIP {
		for _, p := range svc.Ports {
			for _, ip := range svc.ClusterIPs {
				e := entry{addr: ip, port: p.Port, target: base}
				all = append(all, e)
				if p.Name != "" {
					k := portKey(p)
					byPort[k] = append(byPort[k], e)
				}
			}
		}
	}
	byHost := map[string][]entry{}
	var hosts []string
	for _, sl := range slices {
		ports := sl.Ports
		if len(ports) == 0 {
			ports = []model.Port{{Port: -1}}
		}
		for _, ep := range sl.Endpoints {
			if !ep.Ready {
				continue
			}
			for _, addr := range ep.Addresses {
				host := strings.ToLower(EndpointHostname(ep, addr, cfg.EndpointPodNames))
				target := host + "." + base
				if _, seen := byHost[host]; !seen {
					hosts = append(hosts, host)
				}
				for _, p := range ports {
					e := entry{addr: addr, port: p.Port, target: target}
					byHost[host] = append(byHost[host], e)
					if svc.Type != model.ServiceHeadless {
						continue
					}
					all = append(all, e)
					if p.Name != "" {
						k := portKey(p)
						byPort[k] = append(byPort[k], e)
					}
				}
			}
		}
	}
	s.addNode(cfg, base, all)
	for k, es := range byPort {
		s.addPortNodes(cfg, k, base, es)
	}
	for _, h := range hosts {
		s.addNode(cfg, h+"."+base, byHost[h])
	}
}

func hasReadyEndpoint(slices []*model.EndpointSlice) bool {
	for _, sl := range slices {
		for _, ep := range sl.Endpoints {
			if ep.Ready && len(ep.Addresses) > 0 {
				return true
			}
		}
	}
	return false
}

// BuildPodZone builds the snapshot of a pod zone (ns.pod.<origin>, pods
// verified): one name per pod address, the address with dashes.
func BuildPodZone(cfg *Config, key, origin string, serial uint32, pods map[string]*model.Pod) *Snapshot {
	s := &Snapshot{Key: key, Origin: origin, Serial: serial, nodes: map[string]*node{},
		soa: cfg.SOA(origin, serial), Pods: pods}
	for _, name := range sortedKeys(pods) {
		for _, ip := range pods[name].IPs {
			owner := PodLabel(ip) + "." + key
			n := s.nodes[owner]
			if n == nil {
				n = &node{}
				s.nodes[owner] = n
			}
			rr := addrRR(owner, ip, cfg.TTL)
			if ip.Is4() && len(n.a) == 0 {
				n.a = append(n.a, rr)
			} else if ip.Is6() && len(n.aaaa) == 0 {
				n.aaaa = append(n.aaaa, rr)
			}
		}
	}
	return s
}

// PodLabel is the DNS label of a pod address: 10-1-2-3 or fd00--1.
func PodLabel(ip netip.Addr) string {
	if ip.Is4() {
		return strings.ReplaceAll(ip.String(), ".", "-")
	}
	return strings.ReplaceAll(ip.String(), ":", "-")
}

// addPortNodes adds _port._proto.base. CoreDNS strips one leading
// underscore from each label, so the bare forms answer too.
func (s *Snapshot) addPortNodes(cfg *Config, key, base string, es []entry) {
	port, proto, _ := strings.Cut(key, ".")
	for _, p := range []string{port, port[1:]} {
		for _, q := range []string{proto, proto[1:]} {
			s.addNode(cfg, p+"."+q+"."+base, es)
		}
	}
}

func portKey(p model.Port) string {
	return "_" + strings.ToLower(p.Name) + "._" + strings.ToLower(p.Protocol)
}

// addNode turns entries into prebuilt A, AAAA and SRV answers for name.
// A name with no entries does not exist (NXDOMAIN), as in CoreDNS.
func (s *Snapshot) addNode(cfg *Config, name string, es []entry) {
	if len(es) == 0 {
		return
	}
	n := &node{}
	seenAddr := map[netip.Addr]bool{}
	seenSRV := map[string]bool{}
	seenExtra := map[string]bool{}
	// CoreDNS weighs each SRV as 100 divided among all entries of the
	// name, counted before duplicates are removed.
	weight := uint16(10000 / (100 * len(es)))
	if weight == 0 {
		weight = 1
	}
	for _, e := range es {
		if !seenAddr[e.addr] {
			seenAddr[e.addr] = true
			rr := addrRR(name, e.addr, cfg.TTL)
			if e.addr.Is4() {
				n.a = append(n.a, rr)
			} else {
				n.aaaa = append(n.aaaa, rr)
			}
		}
		if e.port < 0 {
			continue
		}
		srvKey := e.target + "|" + strconv.Itoa(int(e.port))
		if !seenSRV[srvKey] {
			seenSRV[srvKey] = true
			n.srv = append(n.srv, &dns.SRV{Hdr: hdr(name, dns.TypeSRV, cfg.TTL),
				Priority: 0, Weight: weight, Port: uint16(e.port), Target: e.target})
		}
		extraKey := e.target + "|" + e.addr.String()
		if !seenExtra[extraKey] {
			seenExtra[extraKey] = true
			n.srvExtra = append(n.srvExtra, addrRR(e.target, e.addr, cfg.TTL))
		}
	}
	s.nodes[name] = n
}

// EndpointHostname is the DNS label of an endpoint address: its hostname,
// else its pod's name when endpointPodNames is on, else the dashed IP.
func EndpointHostname(ep model.Endpoint, addr netip.Addr, podNames bool) string {
	if ep.Hostname != "" {
		return ep.Hostname
	}
	if podNames && ep.TargetPodName != "" {
		return ep.TargetPodName
	}
	a := addr.String()
	if addr.Is4() {
		return strings.ReplaceAll(a, ".", "-")
	}
	return strings.ReplaceAll(a, ":", "-")
}

func sortedKeys[V any](m map[string]V) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}
