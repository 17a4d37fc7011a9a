package config

import (
	"fmt"
	"slices"
	"strings"

	"github.com/miekg/dns"
)

// FederationConfig answers the names of Kubernetes cluster federations as
// kube-dns did and CoreDNS's federation plugin does: a question for
// svc.ns.FED.svc.<zone>, where FED is a federation's name, is answered as
// svc.ns.svc.<zone> when that name exists here, and otherwise with a CNAME
// to svc.ns.FED.svc.<node's zone>.<node's region>.<federation domain>,
// where a cluster of the federation in this node's failure domain
// publishes it.
type FederationConfig struct {
	// Names maps each federation's name (one DNS label) to its domain.
	Names map[string]string `json:"names"`
	// Zones are the cluster domains whose names may carry a federation
	// label; empty: every kubernetes.zones entry.
	Zones []string `json:"zones"`
	// Upstream also resolves the CNAME target, through the forwarder,
	// and answers with both, as CoreDNS's `upstream` option does.
	Upstream bool `json:"upstream"`
	// NodeName is the Node whose topology labels (topology.kubernetes.io/
	// zone and region, or the older failure-domain.beta.kubernetes.io
	// ones) name the CNAME target; empty: the NODE_NAME environment
	// variable, which the deploy/ manifests set from spec.nodeName.
	NodeName string `json:"nodeName"`
	// NodeZone and NodeRegion, when both are set, are used as they are
	// and no Node is read (clusters whose nodes carry no topology labels).
	NodeZone   string `json:"nodeZone"`
	NodeRegion string `json:"nodeRegion"`
}

// Enabled reports whether any federation is configured.
func (f *FederationConfig) Enabled() bool { return len(f.Names) > 0 }

// FederationZones returns the cluster domains whose names may carry a
// federation label, fully qualified.
func (c *Config) FederationZones() []string {
	zones := c.Federation.Zones
	if len(zones) == 0 {
		zones = c.Kubernetes.Zones
	}
	out := make([]string, 0, len(zones))
	for _, z := range zones {
		out = append(out, dns.Fqdn(strings.ToLower(z)))
	}
	return out
}

func (c *Config) validateFederation(bad func(key, format string, args ...any)) {
	f := &c.Federation
	if !f.Enabled() {
		// The node keys alone are fine: a base configuration beside a
		// Corefile or kube-dns ConfigMap says where this process runs.
		if len(f.Zones) > 0 || f.Upstream {
			bad("federation.names", "is empty: name at least one federation (name: domain)")
		}
		return
	}
	for name, domain := range f.Names {
		if !ValidLabel(name) {
			bad("federation.names", "%q is not a DNS label (lower-case letters, digits and '-')", name)
		}
		if !ValidDomain(domain) {
			bad("federation.names", "%q: %q is not a domain name", name, domain)
		}
	}
	checkZones(bad, "federation.zones", f.Zones, false)
	cluster := make([]string, 0, len(c.Kubernetes.Zones))
	for _, z := range c.Kubernetes.Zones {
		cluster = append(cluster, dns.Fqdn(strings.ToLower(z)))
	}
	for i, z := range f.Zones {
		if !slices.Contains(cluster, dns.Fqdn(strings.ToLower(z))) {
			bad(fmt.Sprintf("federation.zones[%d]", i), "%q is not one of kubernetes.zones", z)
		}
	}
	if (f.NodeZone == "") != (f.NodeRegion == "") {
		bad("federation.nodeZone", "set both nodeZone and nodeRegion, or neither (then they are read from the Node)")
	}
	for key, v := range map[string]string{"federation.nodeZone": f.NodeZone, "federation.nodeRegion": f.NodeRegion} {
		if v != "" && !ValidDomain(v) {
			bad(key, "%q is not made of DNS labels", v)
		}
	}
	if f.NodeZone == "" && !c.Kubernetes.Enabled {
		bad("federation.nodeZone", "is needed without the Kubernetes API source (kubernetes.enabled: false), which would read the Node's labels")
	}
}

// ValidLabel reports whether s is a lower-case RFC 1123 label, the form
// kube-dns requires of a federation name (it is a label of the names it
// serves).
func ValidLabel(s string) bool {
	if s == "" || len(s) > 63 || s[0] == '-' || s[len(s)-1] == '-' {
		return false
	}
	for _, r := range s {
		if !(r >= 'a' && r <= 'z' || r >= '0' && r <= '9' || r == '-') {
			return false
		}
	}
	return true
}
