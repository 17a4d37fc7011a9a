// Package model holds the slim domain objects that DNS needs from a cluster.
//
// Sources convert API objects (Services, EndpointSlices, Namespaces, Pods,
// Istio ServiceEntries) into these structs at the edge, so nothing past sources/ depends on
// client-go and zone state keeps only the fields that make records. Values
// are immutable once sent: an update replaces the pointer, never the fields.
package model

import (
	"net/netip"
	"time"
)

// Kind names the kind of a cluster object.
type Kind uint8

// The object kinds the sources deliver.
const (
	KindNamespace Kind = iota + 1
	KindService
	KindEndpointSlice
	KindPod
	KindServiceEntry
	// KindZoneFile is an authoritative zone read from a zone file; its
	// Name is the zone's origin and its Object a *zone.FileZone.
	KindZoneFile
	// KindServiceImport is a Multi-Cluster Services API ServiceImport.
	KindServiceImport
	// KindMultiClusterSlice is an EndpointSlice of an imported service:
	// labelled multicluster.kubernetes.io/service-name, not
	// kubernetes.io/service-name. A slice with both labels is one object
	// of each kind, so the two never replace each other.
	KindMultiClusterSlice
)

func (k Kind) String() string {
	switch k {
	case KindNamespace:
		return "Namespace"
	case KindService:
		return "Service"
	case KindEndpointSlice:
		return "EndpointSlice"
	case KindPod:
		return "Pod"
	case KindServiceEntry:
		return "ServiceEntry"
	case KindZoneFile:
		return "ZoneFile"
	case KindServiceImport:
		return "ServiceImport"
	case KindMultiClusterSlice:
		return "MultiClusterSlice"
	}
	return "Unknown"
}

// Key identifies one object of one kind.
type Key struct {
	Kind      Kind
	Namespace string // empty for namespaces
	Name      string
}

func (k Key) String() string {
	if k.Namespace == "" {
		return k.Kind.String() + " " + k.Name
	}
	return k.Kind.String() + " " + k.Namespace + "/" + k.Name
}

// ServiceType is what a Service resolves to.
type ServiceType uint8

// Service types as DNS sees them.
const (
	ServiceClusterIP    ServiceType = iota // A/AAAA of the cluster IPs
	ServiceHeadless                        // A/AAAA of the ready endpoints
	ServiceExternalName                    // CNAME to the external name
)

// Port is a named service or endpoint port.
type Port struct {
	Name     string
	Protocol string // TCP, UDP or SCTP
	Port     int32
}

// Service is the DNS view of a Kubernetes Service.
type Service struct {
	Namespace       string
	Name            string
	ResourceVersion string
	Type            ServiceType
	ClusterIPs      []netip.Addr // empty for headless and ExternalName
	ExternalName    string       // fully qualified, for ServiceExternalName
	Ports           []Port
	// ExternalIPs are spec.externalIPs followed by the IPs of
	// status.loadBalancer.ingress, the order k8s_external answers them
	// in; nil for the many services that have none.
	ExternalIPs []netip.Addr
	// ExternalHosts are the hostnames of status.loadBalancer.ingress
	// entries given without an IP (AWS ELBs): k8s_external answers them
	// with a CNAME to the hostname, resolved upstream. nil for the many
	// services that have none.
	ExternalHosts []ExternalHost
	// PreferClose is spec.trafficDistribution PreferClose: a headless
	// answer may put the endpoints of the client's zone first even where
	// the slices carry no hints.
	PreferClose bool
}

// ExternalHost is a load balancer ingress hostname and its place among
// a Service's external addresses, which k8s_external answers in order.
type ExternalHost struct {
	Name  string // fully qualified, as the load balancer wrote it
	After int    // the number of ExternalIPs before it
}

// Key returns the object key of s.
func (s *Service) Key() Key { return Key{KindService, s.Namespace, s.Name} }

// Endpoint is one ready-or-not backend of an EndpointSlice.
type Endpoint struct {
	Addresses     []netip.Addr
	Hostname      string // spec hostname, may be empty
	TargetPodName string // name of the pod behind it, if any
	Ready         bool
	// Zone is the topology zone the endpoint is in; may be empty.
	Zone string
	// ForZones are the zones the endpoint is hinted for (hints.forZones);
	// nil when the endpoint has no hints, or malformed ones.
	ForZones []string
}

// EndpointSlice is the DNS view of a discovery.k8s.io/v1 EndpointSlice.
type EndpointSlice struct {
	Namespace       string
	Name            string
	ResourceVersion string
	ServiceName     string // from the kubernetes.io/service-name label
	Ports           []Port
	Endpoints       []Endpoint
}

// Key returns the object key of e.
func (e *EndpointSlice) Key() Key { return Key{KindEndpointSlice, e.Namespace, e.Name} }

// Namespace is the DNS view of a Namespace: its existence.
type Namespace struct {
	Name            string
	ResourceVersion string
}

// Key returns the object key of n.
func (n *Namespace) Key() Key { return Key{KindNamespace, "", n.Name} }

// Pod is the DNS view of a Pod: where it runs and its IPs.
type Pod struct {
	Namespace       string
	Name            string
	ResourceVersion string
	IPs             []netip.Addr
}

// Key returns the object key of p.
func (p *Pod) Key() Key { return Key{KindPod, p.Namespace, p.Name} }

// ServiceEntry is the DNS view of an Istio networking.istio.io
// ServiceEntry: the hosts it declares and the addresses they resolve to.
type ServiceEntry struct {
	Namespace       string
	Name            string
	ResourceVersion string
	// Hosts are lower-case, without a trailing dot; a wildcard host starts
	// with "*." and covers every name below the rest.
	Hosts []string
	// Addresses are the single addresses of spec.addresses (plain IPs and
	// /32 or /128 CIDRs), shared by every host.
	Addresses []netip.Addr
	// ExportTo is spec.exportTo as written: empty or "*" is every
	// namespace, "." the entry's own, otherwise namespace names.
	ExportTo []string
	// StatusAddresses are the addresses Istio allocated to each host
	// (status.addresses, by lower-case host). They are set only when
	// spec.addresses is empty, because Istio uses them only then.
	StatusAddresses map[string][]netip.Addr
}

// Key returns the object key of e.
func (e *ServiceEntry) Key() Key { return Key{KindServiceEntry, e.Namespace, e.Name} }

// ServiceImport is the DNS view of a multicluster.x-k8s.io ServiceImport:
// a service exported by the clusters of a ClusterSet, answered under
// <name>.<namespace>.svc.<clusterset zone>.
type ServiceImport struct {
	Namespace       string
	Name            string
	ResourceVersion string
	// Headless is spec.type Headless: the name answers the ready
	// endpoints of the MultiClusterSlices of the service. Otherwise
	// (ClusterSetIP) it answers IPs.
	Headless bool
	IPs      []netip.Addr // spec.ips
	Ports    []Port       // spec.ports
}

// Key returns the object key of s.
func (s *ServiceImport) Key() Key { return Key{KindServiceImport, s.Namespace, s.Name} }

// MultiClusterSlice is an EndpointSlice imported from a cluster of a
// ClusterSet: ServiceName comes from the multicluster.kubernetes.io/service-name
// label and ClusterID from multicluster.kubernetes.io/source-cluster.
type MultiClusterSlice struct {
	EndpointSlice
	ClusterID string
}

// Key returns the object key of s.
func (s *MultiClusterSlice) Key() Key { return Key{KindMultiClusterSlice, s.Namespace, s.Name} }

// Change is an upsert (Object set) or a delete (Object nil) of Key.
// Object is one of *Namespace, *Service, *EndpointSlice, *Pod,
// *ServiceEntry, *ServiceImport, *MultiClusterSlice or, for KindZoneFile,
// a *zone.FileZone; a Service, EndpointSlice, Pod, ServiceImport or
// MultiClusterSlice may come Frozen, without its resourceVersion.
type Change struct {
	Key    Key
	Object any
	// Trigger is when the change happened in the API, as far as the
	// source knows it (an EndpointSlice's last-change-trigger-time, a
	// new object's creation); zero when unknown. It measures DNS
	// programming latency and travels with the change, never with the
	// object's frozen form.
	Trigger time.Time
}
