package zone

import (
	"net/netip"
	"sort"
	"strings"

	"github.com/miekg/dns"

	"github.com/shardns/shardns/model"
)

// Snapshot is the immutable state of one zone: the records of every name in
// it, encoded compactly (see node.go). It also keeps the objects it was
// built from, so a restarted zone actor can resume from it.
type Snapshot struct {
	Key    string // zone key
	Origin string // configured zone it lies in
	Serial uint32
	// nodes gives where each name's records start in data; refs are the
	// strings the records refer to by number, ttl their TTL.
	nodes map[string]uint32
	data  []byte
	refs  []string
	ttl   uint32
	soa   []dns.RR
	// wildcard is where the records of "*.<Key>" start in a mesh zone
	// that has them.
	wildcard    uint32
	hasWildcard bool
	reverse     bool // a reverse zone's
	// A reverse zone answers from PTRs, through ptrIndex, sorted by
	// address (see BuildReverseZone); ptrRecords is how many records
	// that makes.
	ptrIndex   []reversePTR
	ptrRecords int

	// Sources the snapshot was built from (read-only), set by whoever
	// builds it (see actors/zones).
	Services map[string]model.Frozen  // service zones, by name
	Slices   map[string]model.Frozen  // service zones, by name
	PTRs     []PTRSource              // reverse zones, sorted by source object
	Pods     map[string]*model.Pod    // pod zones, by name
	Mesh     map[model.Key][]MeshHost // mesh zones, by ServiceEntry
	File     *FileZone                // file zones

	file *fileIndex // the lookup structure of a file zone
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
	s := &Snapshot{Key: key, Origin: origin, Serial: serial, nodes: make(map[string]uint32, names),
		soa: cfg.SOA(origin, serial)}
	for _, name := range sortedKeys(services) {
		svc := services[name]
		s.addService(cfg, b, svc, bySvc[strings.ToLower(svc.Name)])
	}
	b.finish(s, cfg.TTL)
	return s
}

func (s *Snapshot) addService(cfg *Config, b *builder, svc *model.Service, slices []*model.EndpointSlice) {
	base := b.name(strings.ToLower(svc.Name), ".", s.Key)
	if svc.Type == model.ServiceExternalName {
		target := Fqdn(svc.ExternalName)
		if _, err := netip.ParseAddr(strings.TrimSuffix(target, ".")); err == nil || target == base {
			return // CoreDNS serves no record for an IP or a self-loop
		}
		s.nodes[base] = b.begin(cnameNode)
		b.ref(target)
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
	s := &Snapshot{Key: key, Origin: origin, Serial: serial, nodes: map[string]uint32{},
		soa: cfg.SOA(origin, serial), Pods: pods}
	var e encoder
	// A pod name is its address: it answers with that one record.
	for _, name := range sortedKeys(pods) {
		for _, ip := range pods[name].IPs {
			ip = ip.Unmap()
			owner := PodLabel(ip) + "." + key
			if s.has(owner) {
				continue
			}
			if ip.Is4() {
				s.nodes[owner] = e.addAddresses([]netip.Addr{ip}, nil, 0, 0)
			} else {
				s.nodes[owner] = e.addAddresses(nil, []netip.Addr{ip}, 0, 0)
			}
		}
	}
	e.finish(s, cfg.TTL)
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

// addNode encodes the A, AAAA and SRV answers of name and the additional
// records of its SRV answer from entries. A name with no entries does not
// exist (NXDOMAIN), as in CoreDNS.
func (s *Snapshot) addNode(cfg *Config, b *builder, name string, es []entry) {
	if len(es) == 0 {
		return
	}
	sc := &b.scratch
	sc.v4, sc.v6, sc.srvs, sc.extras = sc.v4[:0], sc.v6[:0], sc.srvs[:0], sc.extras[:0]
	clear(sc.seenAddr)
	clear(sc.seenSRV)
	clear(sc.seenExtra)
	for _, e := range es {
		e.addr = e.addr.Unmap()
		if !sc.seenAddr[e.addr] {
			sc.seenAddr[e.addr] = true
			if e.addr.Is4() {
				sc.v4 = append(sc.v4, e.addr)
			} else {
				sc.v6 = append(sc.v6, e.addr)
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
	at := b.addAddresses(sc.v4, sc.v6, len(sc.srvs), len(sc.extras))
	if len(sc.srvs) > 0 {
		b.uint16(weight)
	}
	for _, e := range sc.srvs {
		b.uint16(uint16(e.port))
		b.ref(e.target)
	}
	for _, e := range sc.extras {
		b.ref(e.target)
		b.data = appendAddr(append(b.data, byte(e.addr.BitLen()/8)), e.addr)
	}
	s.nodes[name] = at
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
