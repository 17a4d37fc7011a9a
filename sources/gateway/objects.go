package gateway

import (
	"net/netip"

	"k8s.io/apimachinery/pkg/util/validation"

	"github.com/shardns/shardns/zone"
)

// The slim objects the source keeps: only what names and addresses are
// made of. Addresses that are host names (a load balancer's hostname, a
// Gateway address of type Hostname) are left out: k8s_gateway resolves
// them while answering, which would make an authoritative answer depend
// on another resolver.

// Gateway is a gateway.networking.k8s.io Gateway: where its routes'
// hostnames resolve to.
type Gateway struct {
	Namespace, Name string
	Addrs           []netip.Addr // status.addresses of type IPAddress (or no type)
}

// Route is an HTTPRoute, TLSRoute or GRPCRoute: its hostnames resolve to
// the addresses of the Gateways it attaches to.
type Route struct {
	Kind            string // KindHTTPRoute, KindTLSRoute or KindGRPCRoute
	Namespace, Name string
	Hostnames       []string  // spec.hostnames, lower-case
	Parents         []Gateway // spec.parentRefs of kind Gateway, by namespace and name (Addrs unset)
}

// gatewayAddrs returns the addresses of every Gateway r attaches to that
// exists.
func (r *Route) gatewayAddrs(gateways map[string][]netip.Addr) []netip.Addr {
	var out []netip.Addr
	for _, p := range r.Parents {
		out = append(out, gateways[p.Namespace+"/"+p.Name]...)
	}
	return out
}

// Ingress is a networking.k8s.io Ingress: its rules' hosts resolve to
// its load balancer's addresses.
type Ingress struct {
	Namespace, Name string
	Hosts           []string     // spec.rules[*].host, lower-case
	Addrs           []netip.Addr // status.loadBalancer.ingress[*].ip
}

// Service is a Service of type LoadBalancer: <name>.<namespace>.<zone>,
// or the name its hostname annotation gives, resolves to its external
// IPs, else to its load balancer's addresses.
type Service struct {
	Namespace, Name string
	// Hostname is the valid value of the coredns.io/hostname annotation,
	// else of external-dns.alpha.kubernetes.io/hostname; "" for neither.
	Hostname string
	Addrs    []netip.Addr
}

// The annotations that name a Service, in order of precedence.
const (
	HostnameAnnotation            = "coredns.io/hostname"
	ExternalDNSHostnameAnnotation = "external-dns.alpha.kubernetes.io/hostname"
)

// name returns the name svc has in zone origin: its Hostname, within the
// zone or relative to it (k8s_gateway matches the annotation against
// the question with and without the zone), else <name>.<namespace>.
func (svc *Service) name(origin string) string {
	if svc.Hostname == "" {
		return inZone(svc.Name+"."+svc.Namespace+"."+origin, origin)
	}
	if n := inZone(svc.Hostname, origin); n != "" {
		return n
	}
	return inZone(svc.Hostname+"."+origin, origin)
}

// hostnameAnnotation returns the first of the hostname annotations that
// holds a lower-case RFC 1123 subdomain, as k8s_gateway reads them.
func hostnameAnnotation(annotations map[string]string) string {
	for _, key := range []string{HostnameAnnotation, ExternalDNSHostnameAnnotation} {
		v, ok := annotations[key]
		if ok && len(validation.IsDNS1123Subdomain(v)) == 0 && len(zone.Fqdn(v)) <= 255 {
			return v
		}
	}
	return ""
}
