package zone

import (
	"net/netip"
	"sort"
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
	File     *FileZone                       // file zones

	file *fileIndex // the lookup structure of a file zone
}

// node holds the records of one owner name side by side in rrs, which is
// all a node costs beyond its name: its A, AAAA and SRV records and the
// SRV answers' additional records, in that order; or its PTR records; or
// its CNAME alone. A zone holds hundreds of thousands of nodes.
type node struct {
	rrs  []dns.RR
	ends [3]uint32 // where the A, AAAA and SRV records end in rrs
	kind nodeKind
	// ptrNamespaces is the namespace of each PTR target: a record is
	// answered while its namespace exists.
	ptrNamespaces []string
}

// nodeKind tells what a node's records are.
type nodeKind uint8

const (
	addressNode nodeKind = iota // A, AAAA, SRV and additional records
	ptrNode                     // PTR records
	cnameNode                   // an ExternalName service's CNAME
)

func (n *node) a() []dns.RR    { return n.rrs[:n.ends[0]:n.ends[0]] }
func (n *node) aaaa() []dns.RR { return n.rrs[n.ends[0]:n.ends[1]:n.ends[1]] }
func (n *node) srv() []dns.RR  { return n.rrs[n.ends[1]:n.ends[2]:n.ends[2]] }

// srvExtra is the additional section of the node's SRV answer.
func (n *node) srvExtra() []dns.RR {
	if n.kind != addressNode {
		return nil
	}
	return n.rrs[n.ends[2]:]
}

func (n *node) ptr() []dns.RR {
	if n.kind != ptrNode {
		return nil
	}
	return n.rrs
}

// cname is the CNAME of an ExternalName service, or nil.
func (n *node) cname() *dns.CNAME {
	if n.kind != cnameNode {
		return nil
	}
	return n.rrs[0].(*dns.CNAME)
}

func (n *node) cnameRecords() []dns.RR {
	if n.kind != cnameNode {
		return nil
	}
	return n.rrs
}

// addressNode returns a node answering with the A and AAAA records v4 and
// v6 alone.
func newAddressNode(v4, v6 []dns.RR) *node {
	rrs := make([]dns.RR, 0, len(v4)+len(v6))
	rrs = append(append(rrs, v4...), v6...)
	end := uint32(len(rrs))
	return &node{rrs: rrs, ends: [3]uint32{uint32(len(v4)), end, end}}
}

// Directory is what every node knows about every zone: which namespaces
// exist, which mesh host names exist, and whether the sources have
// synced. It is small and replicated.
type Directory struct {
	Namespaces map[string]struct{} // lower-case names
	// AnyNamespace makes every namespace possible: a node-local cache
	// knows no namespaces and leaves NXDOMAIN to the zone's owners, and
	// pod names (pods: insecure) to the replicas.
	AnyNamespace bool
	Synced       bool // every source finished its initial list
	Serial       uint32
	soa          map[string][]dns.RR
	mesh         mesh              // ServiceEntry host names (see WithMesh)
	files        map[string]string // file zone origins, each its own key (see WithFiles)
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
	return ok || d.AnyNamespace
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
	b := newBuilder()
	bySvc := map[string][]*model.EndpointSlice{}
	names := 0 // about as many as the zone will have: its map and nodes are made once
	for _, name := range sortedKeys(slices) {
		sl := slices[name]
		svc := strings.ToLower(sl.ServiceName)
		bySvc[svc] = append(bySvc[svc], sl)
		names += len(sl.Endpoints)
	}
	for _, svc := range services {
		names += 1 + len(svc.Ports)
	}
	s := &Snapshot{Key: key, Origin: origin, Serial: serial, nodes: make(map[string]*node, names),
		soa: cfg.SOA(origin, serial), Services: services, Slices: slices}
	b.node.reserve(names)
	for _, name := range sortedKeys(services) {
		svc := services[name]
		s.addService(cfg, b, svc, bySvc[strings.ToLower(svc.Name)])
	}
	return s
}

func (s *Snapshot) addService(cfg *Config, b *builder, svc *model.Service, slices []*model.EndpointSlice) {
	base := b.name(strings.ToLower(svc.Name), ".", s.Key)
	if svc.Type == model.ServiceExternalName {
		target := Fqdn(svc.ExternalName)
		if _, err := netip.ParseAddr(strings.TrimSuffix(target, ".")); err == nil || target == base {
			return // CoreDNS serves no record for an IP or a self-loop
		}
		c := &dns.CNAME{Hdr: hdr(base, dns.TypeCNAME, cfg.TTL), Target: target}
		s.nodes[base] = &node{rrs: []dns.RR{c}, kind: cnameNode}
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
	var hosts []string // full names, in order
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
				target := b.name(strings.ToLower(EndpointHostname(ep, addr, cfg.EndpointPodNames)), ".", base)
				if _, seen := byHost[target]; !seen {
					hosts = append(hosts, target)
				}
				for _, p := range ports {
					e := entry{addr: addr, port: p.Port, target: target}
					byHost[target] = append(byHost[target], e)
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
	s.addNode(cfg, b, base, all)
	for k, es := range byPort {
		s.addPortNodes(cfg, b, k, base, es)
	}
	for _, h := range hosts {
		s.addNode(cfg, b, h, byHost[h])
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
	// A pod name is its address: it answers with that one record.
	for _, name := range sortedKeys(pods) {
		for _, ip := range pods[name].IPs {
			owner := PodLabel(ip) + "." + key
			if s.nodes[owner] != nil {
				continue
			}
			rr := []dns.RR{addrRR(owner, ip, cfg.TTL)}
			if ip.Is4() {
				s.nodes[owner] = newAddressNode(rr, nil)
			} else {
				s.nodes[owner] = newAddressNode(nil, rr)
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

// addPortNodes adds _port._proto.base; the forms without underscores
// are answered from it (see underscoredPortName).
func (s *Snapshot) addPortNodes(cfg *Config, b *builder, key, base string, es []entry) {
	s.addNode(cfg, b, b.name(key, ".", base), es)
}

func portKey(p model.Port) string {
	return "_" + strings.ToLower(p.Name) + "._" + strings.ToLower(p.Protocol)
}

// addNode turns entries into prebuilt A, AAAA and SRV answers for name.
// A name with no entries does not exist (NXDOMAIN), as in CoreDNS. The
// node's records sit side by side in one block: its A, AAAA, SRV and
// the SRV answers' additional records.
func (s *Snapshot) addNode(cfg *Config, b *builder, name string, es []entry) {
	if len(es) == 0 {
		return
	}
	sc := &b.scratch
	sc.addrs, sc.srvs, sc.extras = sc.addrs[:0], sc.srvs[:0], sc.extras[:0]
	clear(sc.seenAddr)
	clear(sc.seenSRV)
	clear(sc.seenExtra)
	v4 := 0
	for _, e := range es {
		if !sc.seenAddr[e.addr] {
			sc.seenAddr[e.addr] = true
			sc.addrs = append(sc.addrs, e.addr)
			if e.addr.Is4() {
				v4++
			}
		}
		if e.port < 0 {
			continue
		}
		if k := (entry{port: e.port, target: e.target}); !sc.seenSRV[k] {
			sc.seenSRV[k] = true
			sc.srvs = append(sc.srvs, e)
		}
		if k := (entry{addr: e.addr, target: e.target}); !sc.seenExtra[k] {
			sc.seenExtra[k] = true
			sc.extras = append(sc.extras, e)
		}
	}
	// CoreDNS weighs each SRV as 100 divided among all entries of the
	// name, counted before duplicates are removed.
	weight := uint16(10000 / (100 * len(es)))
	if weight == 0 {
		weight = 1
	}
	rrs := b.rr.take(len(sc.addrs) + len(sc.srvs) + len(sc.extras))
	n := b.node.one()
	a, aaaa := 0, v4
	for _, addr := range sc.addrs {
		if addr.Is4() {
			rrs[a] = b.addr(name, addr, cfg.TTL)
			a++
		} else {
			rrs[aaaa] = b.addr(name, addr, cfg.TTL)
			aaaa++
		}
	}
	srvs := b.srv.take(len(sc.srvs))
	for i, e := range sc.srvs {
		srvs[i] = dns.SRV{Hdr: hdr(name, dns.TypeSRV, cfg.TTL), Priority: 0, Weight: weight,
			Port: uint16(e.port), Target: e.target}
		rrs[aaaa+i] = &srvs[i]
	}
	extra := aaaa + len(srvs)
	for i, e := range sc.extras {
		rrs[extra+i] = b.addr(e.target, e.addr, cfg.TTL)
	}
	n.rrs = rrs
	n.ends = [3]uint32{uint32(v4), uint32(aaaa), uint32(extra)}
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
