package zone

import (
	"net/netip"
	"slices"
	"sync/atomic"

	"github.com/miekg/dns"
)

// PodMode is how pod names (a-b-c-d.ns.pod.<domain>) are answered.
type PodMode uint8

// Pod modes, as in CoreDNS's kubernetes plugin.
const (
	PodsDisabled PodMode = iota
	PodsInsecure
	PodsVerified
)

// SchemaVersion is the Kubernetes DNS specification version served as
// the dns-version TXT record.
const SchemaVersion = "1.1.0"

// versionTTL is the TTL CoreDNS gives the dns-version record.
const versionTTL = 28800

// Config is what answers depend on besides zone state. It is built once at
// start-up and shared read-only.
type Config struct {
	Domains          Domains
	TTL              uint32  // TTL of every cluster record
	Pods             PodMode // how pod names are answered
	EndpointPodNames bool    // name endpoints without a hostname after their pod
	// IgnoreEmptyService answers NXDOMAIN for ClusterIP services without a
	// ready endpoint, as CoreDNS's ignore empty_service.
	IgnoreEmptyService bool
	NSAddrs            []netip.Addr // addresses of ns.dns.<domain>, the server itself
	MeshTTL            uint32       // TTL of mesh (Istio ServiceEntry) records
	// MeshZones are the zones delegated to the mesh (istio.zones, fully
	// qualified; "." is every name): ServiceEntry hosts outside them are
	// not answered. None: no host is (see MeshHosts).
	MeshZones []string
	// MeshExportTo is the exportTo of entries that declare none
	// (istio.defaultExportTo); none is Istio's default, every namespace.
	MeshExportTo []string
	// External serves k8s_external zones; nil serves none. Its zones and
	// apex are those of Domains.External and Domains.ExternalApex.
	External *External
	// Fallthrough are the kubernetes plugin's fallthrough zones: a
	// reverse name it has no record of there is k8s_external's to answer
	// when an external zone holds it, as CoreDNS's plugin order has it.
	Fallthrough []string
	// Topology is how this process orders the answers of hinted headless
	// services for its node's zone (SetNodeZone); TopologyOff: not at
	// all. Answers to other processes follow their own question's.
	Topology TopologyMode
	// NoFiles keeps the zone files out of the answers: their names are
	// answered as any name outside the cluster's (a server block without
	// the file plugin, see Restrict).
	NoFiles bool

	nodeZone *nodeZone
	// Prebuilt per cluster domain, so answers need no allocation.
	apex map[string]*apexRecords
}

// apexRecords are the static records of one configured zone.
type apexRecords struct {
	ns      []dns.RR // NS at the apex
	nsExtra []dns.RR // A/AAAA of ns.dns.<zone>
	nsA     []dns.RR
	nsAAAA  []dns.RR
	version []dns.RR // dns-version TXT
	// soa is the SOA record last built for this zone, with its serial.
	soa atomic.Pointer[serialSOA]
}

// serialSOA is an SOA record and the serial it was built with.
type serialSOA struct {
	serial uint32
	rr     []dns.RR
}

// Prepare builds the static records. Call it once before answering.
func (c *Config) Prepare() {
	if c.nodeZone == nil {
		c.nodeZone = &nodeZone{}
	}
	c.apex = make(map[string]*apexRecords)
	for _, z := range slices.Concat(c.Domains.Cluster, c.Domains.Reverse, c.Domains.Multicluster) {
		r := &apexRecords{}
		nsName := Join("ns.dns.", z)
		r.ns = []dns.RR{&dns.NS{Hdr: hdr(z, dns.TypeNS, c.TTL), Ns: nsName}}
		for _, a := range c.NSAddrs {
			rr := addrRR(nsName, a, c.TTL)
			if a.Is4() {
				r.nsA = append(r.nsA, rr)
			} else {
				r.nsAAAA = append(r.nsAAAA, rr)
			}
			r.nsExtra = append(r.nsExtra, rr)
		}
		r.version = []dns.RR{&dns.TXT{Hdr: hdr(Join("dns-version.", z), dns.TypeTXT, versionTTL), Txt: []string{SchemaVersion}}}
		c.apex[z] = r
	}
}

// Primary is the first cluster domain: the one PTR targets are written in.
func (c *Config) Primary() string {
	if len(c.Domains.Cluster) == 0 {
		return "cluster.local."
	}
	return c.Domains.Cluster[0]
}

// SOA returns the SOA record of origin as CoreDNS writes it. Records are
// never changed once built (a cache or a rewrite copies them first), so
// the snapshots of one configured zone at one serial share one: serials
// are seconds, and a replica holding a share of every /24 builds hundreds
// of reverse zones in the same second, each with an SOA record of 145
// bytes on the heap.
func (c *Config) SOA(origin string, serial uint32) []dns.RR {
	r := c.apex[origin]
	if r == nil {
		return c.buildSOA(origin, serial)
	}
	if last := r.soa.Load(); last != nil && last.serial == serial {
		return last.rr
	}
	rr := c.buildSOA(origin, serial)
	r.soa.Store(&serialSOA{serial: serial, rr: rr})
	return rr
}

func (c *Config) buildSOA(origin string, serial uint32) []dns.RR {
	return []dns.RR{&dns.SOA{
		Hdr:     hdr(origin, dns.TypeSOA, min(c.TTL, 300)),
		Ns:      Join("ns.dns.", origin),
		Mbox:    Join("hostmaster.", origin),
		Serial:  serial,
		Refresh: 7200,
		Retry:   1800,
		Expire:  86400,
		Minttl:  c.TTL,
	}}
}

func hdr(name string, t uint16, ttl uint32) dns.RR_Header {
	return dns.RR_Header{Name: name, Rrtype: t, Class: dns.ClassINET, Ttl: ttl}
}

// addrRR is an A or AAAA record for a.
func addrRR(name string, a netip.Addr, ttl uint32) dns.RR {
	if a.Is4() || a.Is4In6() {
		b := a.Unmap().As4()
		return &dns.A{Hdr: hdr(name, dns.TypeA, ttl), A: b[:]}
	}
	b := a.As16()
	return &dns.AAAA{Hdr: hdr(name, dns.TypeAAAA, ttl), AAAA: b[:]}
}

// Restrict returns a config that answers as c does, less what a server
// block leaves out: the cluster's names (kubernetes, reverse, pod,
// external, multicluster and mesh zones) unless cluster, the zone files
// unless files. Those names are then answered as names outside every
// zone (forwarded). It shares c's node zone and static records; c itself
// when nothing is left out.
func (c *Config) Restrict(cluster, files bool) *Config {
	if cluster && files {
		return c
	}
	out := *c
	if !cluster {
		out.Domains = Domains{}
		out.MeshZones, out.External, out.Fallthrough = nil, nil, nil
	}
	out.NoFiles = out.NoFiles || !files
	return &out
}

// FileOrigin returns the origin of the file zone of d that name lies in,
// "" when there is none or c answers no zone file (NoFiles).
func (c *Config) FileOrigin(d *Directory, name string) string {
	if c.NoFiles || d == nil {
		return ""
	}
	return d.FileOrigin(name)
}
