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
	// strings the records refer to by number, ttl their TTL. A service
	// zone holds its names in parts instead, by service label (service.go).
	nodes map[string]uint32
	parts map[string]*servicePart
	data  []byte
	refs  []string
	ttl   uint32
	soa   []dns.RR
	// wildcard is where the records of "*.<Key>" start in a mesh zone
	// that has them.
	wildcard    uint32
	hasWildcard bool
	// meshByNamespace are a mesh zone's records as the namespaces that
	// have hosts exported to them see them (meshprivate.go); the zone's
	// own are what every namespace sees.
	meshByNamespace map[string]*Snapshot
	reverse         bool // a reverse zone's
	// A reverse zone answers from PTRs, through ptrIndex, sorted by
	// address (see BuildReverseZone); ptrRecords is how many records
	// that makes.
	ptrIndex   []reversePTR
	ptrRecords int

	// Sources the snapshot was built from (read-only), set by whoever
	// builds it (see actors/zonemanager).
	Services map[string]model.Frozen  // service zones, by name
	Slices   map[string]model.Frozen  // service zones, by name
	PTRs     []PTRSource              // reverse zones, sorted by source object
	Pods     map[string]*model.Pod    // pod zones, by name
	Mesh     map[model.Key][]MeshHost // mesh zones, by ServiceEntry
	File     *FileZone                // file zones
	// Imported are the ServiceImports and imported EndpointSlices of a
	// service zone's namespace (multicluster.go); nil without any.
	Imported *Imported

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
	meshPrivate  map[string]*mesh  // host names exported to some namespaces only, by namespace
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
	for _, z := range cfg.Domains.Multicluster {
		d.soa[z] = cfg.SOA(z, serial)
	}
	if cfg.External != nil {
		for _, z := range cfg.Domains.External {
			d.soa[z] = cfg.externalSOA(z, serial)
		}
	}
	return d
}

// HasNamespace reports whether namespace ns (lower-case) exists.
func (d *Directory) HasNamespace(ns string) bool {
	_, ok := d.Namespaces[ns]
	return ok || d.AnyNamespace
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
