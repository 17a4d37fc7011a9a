package config

import (
	"fmt"
	"slices"
	"strings"
)

// GatewayConfig is the Gateway API source: what CoreDNS's external
// k8s_gateway plugin answers (HTTPRoute, TLSRoute and GRPCRoute
// hostnames, Ingress hosts, LoadBalancer Services), each zone an
// authoritative zone sharded like the zone files.
type GatewayConfig struct {
	// Enabled watches the resources and answers the zones.
	Enabled bool `json:"enabled"`
	// Zones the names are answered under; shardns is authoritative for
	// them (SOA and NS at the apex, NXDOMAIN for names without a record).
	Zones []string `json:"zones"`
	// Resources are the kinds watched, in the order a name shared by
	// several takes its addresses from: HTTPRoute, TLSRoute, GRPCRoute,
	// Ingress, Service. Empty: all of them, in that order.
	Resources []string `json:"resources"`
	// TTL of the address records, 0–3600 seconds. Default 60.
	TTL int `json:"ttl"`
	// Apex is this server's name relative to each zone, the NS and the
	// SOA's primary: <apex>.<zone>. Default dns1.kube-system.
	Apex string `json:"apex"`
	// Secondary is a peer server's name relative to each zone, a second
	// NS record; empty for none.
	Secondary string `json:"secondary"`
	// Kubeconfig and Context reach the cluster whose resources are
	// answered; empty: the in-cluster service account.
	Kubeconfig string `json:"kubeconfig"`
	Context    string `json:"context"`
}

// GatewayResources are the kinds gateway.resources may list, in
// k8s_gateway's default order.
var GatewayResources = []string{"HTTPRoute", "TLSRoute", "GRPCRoute", "Ingress", "Service"}

// DefaultGateway is the gateway section's defaults, k8s_gateway's.
func DefaultGateway() GatewayConfig {
	return GatewayConfig{TTL: 60, Apex: "dns1.kube-system"}
}

func (c *Config) validateGateway(bad func(key, format string, args ...any)) {
	g := &c.Gateway
	if !g.Enabled {
		return
	}
	if c.Mode == ModeNodeLocal {
		bad("gateway.enabled", "a nodelocal process watches no source; the replicas answer the gateway zones")
	}
	if len(g.Zones) == 0 {
		bad("gateway.zones", "name the zones the gateway names are answered under")
	}
	checkZones(bad, "gateway.zones", g.Zones, false)
	for i, z := range g.Zones {
		key := fmt.Sprintf("gateway.zones[%d]", i)
		for _, own := range c.Kubernetes.AllZones() {
			if c.Kubernetes.Enabled && (underZone(z, own) || underZone(own, z)) {
				bad(key, "%q shares names with the kubernetes zone %q, whose names shardns answers from the cluster's records", z, own)
			}
		}
		for _, f := range c.Files.Zones {
			if strings.EqualFold(strings.TrimSuffix(f.Origin, "."), strings.TrimSuffix(z, ".")) {
				bad(key, "%q is also a zone file's origin (%s)", z, f.File)
			}
		}
	}
	for i, r := range g.Resources {
		if !slices.Contains(GatewayResources, r) {
			bad(fmt.Sprintf("gateway.resources[%d]", i), "%q is not one of %s", r, strings.Join(GatewayResources, ", "))
		}
	}
	if g.TTL < 0 || g.TTL > 3600 {
		bad("gateway.ttl", "must be between 0 and 3600, got %d", g.TTL)
	}
	for key, name := range map[string]string{"gateway.apex": g.Apex, "gateway.secondary": g.Secondary} {
		if (name != "" || key == "gateway.apex") && !ValidDomain(name) {
			bad(key, "%q is not a relative domain name", name)
		}
	}
	if g.Context != "" && g.Kubeconfig == "" {
		bad("gateway.context", "needs gateway.kubeconfig")
	}
}
