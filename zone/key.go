// Package zone is the pure core of shardns: zone keys, immutable zone
// snapshots built from model objects, and the answer function that turns a
// snapshot and a question into a DNS response.
//
// Nothing here touches actors, sockets or clocks. Actors build snapshots with
// Build* and publish them; listeners call Answer on whatever snapshot they
// load. Every name handled here is a lower-case, fully qualified name.
package zone

import "strings"

// RouteKind says where the answer for a name comes from.
type RouteKind uint8

// Route kinds, from "not ours" to "owned by a shard".
const (
	// RouteExternal: the name is outside every cluster and reverse zone.
	RouteExternal RouteKind = iota
	// RouteApex: the name is a cluster domain itself (SOA, NS).
	RouteApex
	// RouteStateless: answered from the directory alone (svc., pod names in
	// insecure mode, dns-version, ns.dns, invalid names).
	RouteStateless
	// RouteZone: answered from the snapshot of zone Key.
	RouteZone
	// RouteReverseApex: a reverse zone's apex or a name above any /24 or
	// /64 zone key (no records, but inside our authority).
	RouteReverseApex
)

// Route is where a question goes.
type Route struct {
	Kind    RouteKind
	Origin  string // the configured zone that matched: owner of its SOA
	Key     string // zone key, for RouteZone (a suffix of the name)
	Reverse bool   // Origin is a reverse zone
	Pods    bool   // Key is a pod zone, ns.pod.<domain>
	// External says Origin is an external (k8s_external) zone; Key, for
	// RouteZone, is then the service zone of the name's namespace.
	External bool
	// Multicluster says Origin is a multicluster (clusterset.local)
	// zone; Key, for RouteZone, is then the service zone of the name's
	// namespace in the first cluster domain (see multicluster.go).
	Multicluster bool
}

// Domains are the zones a node is authoritative for.
type Domains struct {
	Cluster []string // cluster domains, e.g. "cluster.local."
	Reverse []string // reverse zones, e.g. "in-addr.arpa.", "ip6.arpa."
	// PodZones routes pod names to ns.pod.<domain> zones, which hold the
	// pods of a namespace (pods: verified). Otherwise pod names are
	// answered without state (pods: insecure or disabled).
	PodZones bool
	// External are the k8s_external zones and ExternalApex the label of
	// their own names (see External); a cluster or reverse zone wins over
	// them.
	External     []string
	ExternalApex string
	// Multicluster are the zones of the Multi-Cluster Services API
	// (clusterset.local.): served like a cluster domain, their service
	// names answered from ServiceImports.
	Multicluster []string
}

const (
	inAddrArpa = "in-addr.arpa."
	ip6Arpa    = "ip6.arpa."
)

// Route computes where qname is answered. It allocates nothing for a
// name of a cluster or reverse zone: Key and Origin are substrings of
// qname or of the configured zones. A name of an external zone below a
// namespace is given the key of that namespace's service zone.
func (d *Domains) Route(qname string) Route {
	origin, reverse := d.match(qname)
	if origin == "" {
		if len(d.External) > 0 {
			if z := d.externalZone(qname); z != "" {
				if r, ok := d.routeExternalReverse(qname, z); ok {
					return r
				}
				return d.routeExternal(qname, z)
			}
		}
		return Route{Kind: RouteExternal}
	}
	if reverse {
		key := reverseKey(qname)
		if key == "" || len(key) < len(origin) {
			return Route{Kind: RouteReverseApex, Origin: origin, Reverse: true}
		}
		return Route{Kind: RouteZone, Origin: origin, Key: key, Reverse: true}
	}
	rel := Relative(qname, origin)
	if rel == "" {
		return Route{Kind: RouteApex, Origin: origin}
	}
	if len(d.Multicluster) > 0 && d.isMulticluster(origin) {
		return d.routeMulticluster(qname, origin, rel)
	}
	last, rest := lastLabel(rel)
	if rest == "" || (last != "svc" && !(last == "pod" && d.PodZones)) {
		return Route{Kind: RouteStateless, Origin: origin}
	}
	ns, _ := lastLabel(rest)
	key := qname[len(rest)-len(ns)-1:]
	return Route{Kind: RouteZone, Origin: origin, Key: key, Pods: last == "pod"}
}

// match returns the longest configured zone that qname is in or equal to.
func (d *Domains) match(qname string) (origin string, reverse bool) {
	for _, z := range d.Cluster {
		if InZone(qname, z) && len(z) > len(origin) {
			origin, reverse = z, false
		}
	}
	for _, z := range d.Reverse {
		if InZone(qname, z) && len(z) > len(origin) {
			origin, reverse = z, true
		}
	}
	for _, z := range d.Multicluster {
		if InZone(qname, z) && len(z) > len(origin) {
			origin, reverse = z, false
		}
	}
	return origin, reverse
}

// InZone reports whether name equals zone or lies below it, on a label
// boundary. Both are lower-case and fully qualified.
func InZone(name, zone string) bool {
	if zone == "." {
		return true
	}
	if !strings.HasSuffix(name, zone) {
		return false
	}
	n := len(name) - len(zone)
	return n == 0 || name[n-1] == '.'
}

// LastLabel splits "a.b.c." into "c" and "a.b." (the rest keeps its
// dot), for the packages that read names relative to a zone as this one
// does.
func LastLabel(rel string) (label, rest string) { return lastLabel(rel) }

// lastLabel splits "a.b.c." into "c" and "a.b." (the rest keeps its dot).
func lastLabel(rel string) (label, rest string) {
	s := strings.TrimSuffix(rel, ".")
	i := strings.LastIndexByte(s, '.')
	if i < 0 {
		return s, ""
	}
	return s[i+1:], s[:i+1]
}

// reverseKey returns the /24 (in-addr.arpa) or /64 (ip6.arpa) zone key that
// qname lies in, or "" when the name is shorter than that.
func reverseKey(qname string) string {
	var root string
	var labels int
	switch {
	case strings.HasSuffix(qname, "."+inAddrArpa) || qname == inAddrArpa:
		root, labels = inAddrArpa, 3
	case strings.HasSuffix(qname, "."+ip6Arpa) || qname == ip6Arpa:
		root, labels = ip6Arpa, 16
	default:
		return ""
	}
	start := len(qname) - len(root)
	for i := 0; i < labels; i++ {
		if start == 0 {
			return ""
		}
		j := strings.LastIndexByte(qname[:start-1], '.')
		start = j + 1
	}
	return qname[start:]
}

// ServiceZoneKey is the zone key that holds the services of namespace ns
// under cluster domain origin.
func ServiceZoneKey(ns, origin string) string {
	return Join(strings.ToLower(ns)+".svc.", origin)
}

// PodZoneKey is the zone key that holds the pods of namespace ns under
// cluster domain origin, when pods are verified.
func PodZoneKey(ns, origin string) string {
	return Join(strings.ToLower(ns)+".pod.", origin)
}

// Join writes the name rel (relative, ending with a dot) under origin.
// Under the root zone, which a Corefile's kubernetes plugin gets in a
// "." block without zones of its own, the name is rel itself.
func Join(rel, origin string) string {
	if origin == "." {
		return rel
	}
	return rel + origin
}

// Relative returns name, which is in origin, without it: "web.ns.svc."
// for web.ns.svc.cluster.local. in cluster.local. (and for web.ns.svc.
// in the root zone), "" for the origin itself.
func Relative(name, origin string) string {
	if origin == "." {
		if name == "." {
			return ""
		}
		return name
	}
	return name[:len(name)-len(origin)]
}

// Fqdn lower-cases name and makes it fully qualified.
func Fqdn(name string) string {
	name = LowerASCII(name)
	if !strings.HasSuffix(name, ".") {
		name += "."
	}
	return name
}

// LowerASCII lower-cases the ASCII letters of a name and leaves every
// other byte as it is (RFC 4343 §3: DNS compares case only in ASCII). It
// allocates only when the name has upper case. strings.ToLower would
// also fold non-ASCII letters and turn bytes that are not UTF-8 into
// U+FFFD, three bytes each: a name read from a zone file or the wire
// could change its meaning or outgrow its 63-octet label.
func LowerASCII(name string) string {
	i := 0
	for i < len(name) && !('A' <= name[i] && name[i] <= 'Z') {
		i++
	}
	if i == len(name) {
		return name
	}
	b := []byte(name)
	for ; i < len(b); i++ {
		if 'A' <= b[i] && b[i] <= 'Z' {
			b[i] += 'a' - 'A'
		}
	}
	return string(b)
}
