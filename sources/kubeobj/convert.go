// Package kubeobj converts Kubernetes API objects into the slim model
// structs, keeping only the fields DNS needs. Every source (the API watch
// and the YAML manifests) converts through here, so both serve the same
// records for the same objects.
package kubeobj

import (
	"fmt"
	"net/netip"
	"strings"

	"github.com/miekg/dns"
	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"

	"github.com/shardns/shardns/model"
)

// ServiceNameLabel links an EndpointSlice to its Service.
const ServiceNameLabel = discoveryv1.LabelServiceName

// Service converts a Service. Broken objects return an error naming the
// field, so a source can log or reject them without serving half of one.
// An external address that is not an IP is skipped: see ServiceWarnings.
func Service(s *corev1.Service) (*model.Service, error) {
	out, _, err := ServiceWarnings(s)
	return out, err
}

// ServiceWarnings is Service, and a warning for each external address it
// skipped. An external IP or a load balancer's ingress IP that does not
// parse leaves the rest of the Service served, as CoreDNS serves it: the
// address belongs to k8s_external's names only, and the cluster names
// of the Service do not depend on it.
func ServiceWarnings(s *corev1.Service) (*model.Service, []string, error) {
	out := &model.Service{Namespace: s.Namespace, Name: s.Name, ResourceVersion: s.ResourceVersion}
	if s.Name == "" {
		return nil, nil, fmt.Errorf("Service: metadata.name is empty")
	}
	out, err := serviceSpec(s, out)
	if err != nil {
		return nil, nil, err
	}
	warnings := externalIPs(s, out)
	out.PreferClose = preferClose(s.Spec.TrafficDistribution)
	return out, warnings, nil
}

// externalIPs sets out.ExternalIPs from spec.externalIPs and then the IPs
// of status.loadBalancer.ingress, in that order (CoreDNS's), and
// out.ExternalHosts from the ingress entries given by hostname only,
// each with its place in that order: k8s_external answers such a one
// with a CNAME to the hostname. It returns a warning for each that is
// neither an IP address nor a domain name.
func externalIPs(s *corev1.Service, out *model.Service) (warnings []string) {
	n := len(s.Spec.ExternalIPs) + len(s.Status.LoadBalancer.Ingress)
	if n == 0 {
		return nil
	}
	add := func(field, ip string) {
		a, err := parseIP(ip)
		if err != nil {
			warnings = append(warnings, fmt.Sprintf("Service %s/%s: %s: %q is not an IP address: skipped", s.Namespace, s.Name, field, ip))
			return
		}
		if out.ExternalIPs == nil {
			out.ExternalIPs = make([]netip.Addr, 0, n)
		}
		out.ExternalIPs = append(out.ExternalIPs, a)
	}
	for i, ip := range s.Spec.ExternalIPs {
		add(fmt.Sprintf("spec.externalIPs[%d]", i), ip)
	}
	for i, in := range s.Status.LoadBalancer.Ingress {
		switch {
		case in.IP != "":
			add(fmt.Sprintf("status.loadBalancer.ingress[%d].ip", i), in.IP)
		case in.Hostname != "":
			name := strings.TrimSuffix(in.Hostname, ".") + "."
			if _, ok := dns.IsDomainName(name); !ok || name == "." {
				warnings = append(warnings, fmt.Sprintf("Service %s/%s: status.loadBalancer.ingress[%d].hostname: %q is not a domain name: skipped",
					s.Namespace, s.Name, i, in.Hostname))
				continue
			}
			out.ExternalHosts = append(out.ExternalHosts, model.ExternalHost{Name: name, After: len(out.ExternalIPs)})
		}
	}
	return warnings
}

// serviceSpec converts the type, cluster IPs and ports of s into out.
func serviceSpec(s *corev1.Service, out *model.Service) (*model.Service, error) {
	switch {
	case s.Spec.Type == corev1.ServiceTypeExternalName:
		if s.Spec.ExternalName == "" {
			return nil, fmt.Errorf("Service %s/%s: spec.externalName is empty", s.Namespace, s.Name)
		}
		out.Type = model.ServiceExternalName
		out.ExternalName = strings.TrimSuffix(strings.ToLower(s.Spec.ExternalName), ".") + "."
	case s.Spec.ClusterIP == corev1.ClusterIPNone:
		out.Type = model.ServiceHeadless
	default:
		ips := s.Spec.ClusterIPs
		if len(ips) == 0 && s.Spec.ClusterIP != "" {
			ips = []string{s.Spec.ClusterIP}
		}
		if len(ips) == 0 {
			return nil, fmt.Errorf("Service %s/%s: spec.clusterIP is empty", s.Namespace, s.Name)
		}
		for _, ip := range ips {
			a, err := parseIP(ip)
			if err != nil {
				return nil, fmt.Errorf("Service %s/%s: spec.clusterIPs: %q is not an IP address", s.Namespace, s.Name, ip)
			}
			out.ClusterIPs = append(out.ClusterIPs, a.Unmap())
		}
	}
	for i, p := range s.Spec.Ports {
		if p.Port <= 0 || p.Port > 65535 {
			return nil, fmt.Errorf("Service %s/%s: spec.ports[%d].port %d is out of range", s.Namespace, s.Name, i, p.Port)
		}
		out.Ports = append(out.Ports, model.Port{Name: p.Name, Protocol: protocol(p.Protocol), Port: p.Port})
	}
	return out, nil
}

func protocol(p corev1.Protocol) string {
	if p == "" {
		return string(corev1.ProtocolTCP)
	}
	return string(p)
}

// EndpointSlice converts an EndpointSlice. It returns nil and no error for
// slices DNS does not serve: FQDN address types and slices that name no
// service.
func EndpointSlice(e *discoveryv1.EndpointSlice) (*model.EndpointSlice, error) {
	return endpointSlice(e, e.Labels[ServiceNameLabel])
}

// endpointSlice converts e as a slice of service svc; nil when svc is ""
// or e lists FQDNs.
func endpointSlice(e *discoveryv1.EndpointSlice, svc string) (*model.EndpointSlice, error) {
	if e.AddressType == discoveryv1.AddressTypeFQDN || svc == "" {
		return nil, nil
	}
	if e.Name == "" {
		return nil, fmt.Errorf("EndpointSlice: metadata.name is empty")
	}
	// Sized up front: sources keep these for as long as the object lives.
	out := &model.EndpointSlice{Namespace: e.Namespace, Name: e.Name, ResourceVersion: e.ResourceVersion, ServiceName: svc,
		Ports: make([]model.Port, 0, len(e.Ports)), Endpoints: make([]model.Endpoint, 0, len(e.Endpoints))}
	for i, p := range e.Ports {
		if p.Port == nil {
			continue // "all ports": nothing to put in an SRV record
		}
		if *p.Port <= 0 || *p.Port > 65535 {
			return nil, fmt.Errorf("EndpointSlice %s/%s: ports[%d].port %d is out of range", e.Namespace, e.Name, i, *p.Port)
		}
		port := model.Port{Port: *p.Port, Protocol: string(corev1.ProtocolTCP)}
		if p.Name != nil {
			port.Name = *p.Name
		}
		if p.Protocol != nil {
			port.Protocol = protocol(*p.Protocol)
		}
		out.Ports = append(out.Ports, port)
	}
	for i, ep := range e.Endpoints {
		m := model.Endpoint{Ready: ep.Conditions.Ready == nil || *ep.Conditions.Ready}
		if ep.Hostname != nil {
			m.Hostname = *ep.Hostname
		}
		if ep.TargetRef != nil && ep.TargetRef.Kind == "Pod" {
			m.TargetPodName = ep.TargetRef.Name
		}
		m.Zone, m.ForZones = topology(ep)
		m.Addresses = make([]netip.Addr, 0, len(ep.Addresses))
		for _, a := range ep.Addresses {
			ip, err := parseIP(a)
			if err != nil {
				return nil, fmt.Errorf("EndpointSlice %s/%s: endpoints[%d].addresses: %q is not an IP address", e.Namespace, e.Name, i, a)
			}
			m.Addresses = append(m.Addresses, ip.Unmap())
		}
		out.Endpoints = append(out.Endpoints, m)
	}
	return out, nil
}

// preferClose reports whether a trafficDistribution asks for endpoints
// of the client's zone: PreferClose, its newer name PreferSameZone, and
// PreferSameNode, whose fallback is the same zone (DNS does not know the
// client's node). Anything else, unknown values included, asks nothing.
func preferClose(td *string) bool {
	if td == nil {
		return false
	}
	switch *td {
	case corev1.ServiceTrafficDistributionPreferClose, corev1.ServiceTrafficDistributionPreferSameZone,
		corev1.ServiceTrafficDistributionPreferSameNode:
		return true
	}
	return false
}

// topology returns the zone of ep and the zones it is hinted for. A hint
// that names no zone makes the endpoint's hints malformed: it gets none,
// so the service answers as if no endpoint were hinted (the EndpointSlice
// API's rule for an endpoint without hints), never fewer records.
func topology(ep discoveryv1.Endpoint) (zone string, forZones []string) {
	if ep.Zone != nil {
		zone = *ep.Zone
	}
	if ep.Hints == nil || len(ep.Hints.ForZones) == 0 {
		return zone, nil
	}
	forZones = make([]string, 0, len(ep.Hints.ForZones))
	for _, z := range ep.Hints.ForZones {
		if z.Name == "" {
			return zone, nil
		}
		forZones = append(forZones, z.Name)
	}
	return zone, forZones
}

// Namespace converts a Namespace.
func Namespace(n *corev1.Namespace) (*model.Namespace, error) {
	if n.Name == "" {
		return nil, fmt.Errorf("Namespace: metadata.name is empty")
	}
	return &model.Namespace{Name: n.Name, ResourceVersion: n.ResourceVersion}, nil
}

// Pod converts a Pod to its namespace and IPs.
func Pod(p *corev1.Pod) (*model.Pod, error) {
	if p.Name == "" {
		return nil, fmt.Errorf("Pod: metadata.name is empty")
	}
	out := &model.Pod{Namespace: p.Namespace, Name: p.Name, ResourceVersion: p.ResourceVersion}
	ips := p.Status.PodIPs
	if len(ips) == 0 && p.Status.PodIP != "" {
		ips = []corev1.PodIP{{IP: p.Status.PodIP}}
	}
	for _, ip := range ips {
		a, err := parseIP(ip.IP)
		if err != nil {
			return nil, fmt.Errorf("Pod %s/%s: status.podIPs: %q is not an IP address", p.Namespace, p.Name, ip.IP)
		}
		out.IPs = append(out.IPs, a.Unmap())
	}
	return out, nil
}

// parseIP parses an address as the API writes them: no IPv6 zone, and
// IPv4-mapped IPv6 read as IPv4.
func parseIP(s string) (netip.Addr, error) {
	a, err := netip.ParseAddr(s)
	if err != nil {
		return a, err
	}
	if a.Zone() != "" {
		return netip.Addr{}, fmt.Errorf("%q has an IPv6 zone", s)
	}
	return a.Unmap(), nil
}
