package zone

import (
	"fmt"
	"slices"
	"strings"

	"github.com/miekg/dns"
	"golang.org/x/net/publicsuffix"

	"github.com/shardns/shardns/model"
)

// Which ServiceEntry hosts are answered is the cluster admin's decision,
// not the entry's author's: a user who may create ServiceEntries in its
// own namespace must not change what the other namespaces resolve. The
// istio-coredns setup shardns replaces delegated one zone to the mesh
// (`global:53 { forward . <istiocoredns> }`) and never let an entry
// answer outside it; Istio's own proxy applies exportTo and answers only
// the meshed pods the entry is exported to.

// Why a ServiceEntry host is not answered: the reason label of
// shardns_istio_skipped_hosts_total.
const (
	SkipWildcard     = "wildcard"      // "*" other than as the whole first label
	SkipClusterZone  = "cluster_zone"  // inside a cluster or reverse zone
	SkipOutsideZones = "outside_zones" // outside istio.zones
	SkipPublicSuffix = "public_suffix" // a wildcard over a public suffix
	SkipExportTo     = "export_to"     // not exported to every namespace
)

// SkippedHost is a host of a ServiceEntry that is not answered, and why.
type SkippedHost struct {
	Host   string
	Why    string // one of the Skip constants
	Reason string // said in the log
}

// meshHostRefused says why host, a lower-case ServiceEntry host, is not
// answered whoever asks; ok when it may be.
func (c *Config) meshHostRefused(host string) (SkippedHost, bool) {
	name := Fqdn(host)
	base, wildcard := strings.CutPrefix(name, "*.")
	switch {
	case base == "" || base == "." || strings.Contains(base, "*"):
		return SkippedHost{host, SkipWildcard, "a wildcard must be the first label of a domain"}, true
	case c.Domains.Route(base).Kind != RouteExternal:
		return SkippedHost{host, SkipClusterZone, "inside a cluster or reverse zone, whose names the Kubernetes records own"}, true
	case !c.inMeshZones(base):
		return SkippedHost{host, SkipOutsideZones, fmt.Sprintf(
			"outside istio.zones %v, the zones the cluster admin delegates to the mesh", c.MeshZones)}, true
	case wildcard && PublicSuffix(base):
		return SkippedHost{host, SkipPublicSuffix, fmt.Sprintf(
			"a wildcard over the public suffix %s would take the names of every domain registered under it", base)}, true
	}
	return SkippedHost{}, false
}

// inMeshZones reports whether name (fully qualified) lies in a zone
// delegated to the mesh.
func (c *Config) inMeshZones(name string) bool {
	for _, z := range c.MeshZones {
		if dns.IsSubDomain(z, name) {
			return true
		}
	}
	return false
}

// PublicSuffix reports whether domain is a public suffix: a name under
// which anyone may register their own domain. It is one when the Public
// Suffix List names it, in its ICANN section ("com", "co.uk", and under
// its wildcard rules "x.ck") or its private one ("github.io"). The
// list's implicit rule, which makes the last label of any name a public
// suffix, is not counted: that label is what publicsuffix.PublicSuffix
// guesses for a TLD the list does not know ("svc", "mesh", "internal",
// "local"), and mesh domains are such names; an unknown TLD of one label
// is the only answer that guess gives with icann false and no dot.
func PublicSuffix(domain string) bool {
	d := strings.TrimSuffix(LowerASCII(domain), ".")
	if d == "" {
		return false
	}
	suffix, icann := publicsuffix.PublicSuffix(d)
	return suffix == d && (icann || strings.Contains(d, "."))
}

// meshExportTo is the exportTo that applies to e: its own, else the
// configured default, else Istio's (every namespace).
func (c *Config) meshExportTo(e *model.ServiceEntry) []string {
	if len(e.ExportTo) > 0 {
		return e.ExportTo
	}
	return c.MeshExportTo
}

// ExportedToAll reports whether an exportTo list makes an entry visible in
// every namespace: empty (Istio's default) or containing "*".
func ExportedToAll(exportTo []string) bool {
	return len(exportTo) == 0 || slices.Contains(exportTo, "*")
}
