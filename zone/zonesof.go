package zone

import "github.com/shardns/shardns/model"

// Which zones an object's change goes to is decided here, once: the zone
// manager routes every source change through ZonesOf, and Static
// groups its objects through it, so a static reader holds the zones a
// running node would.

// Part names the part of a zone an object contributes to.
type Part uint8

// The parts of a zone.
const (
	PartServices Part = iota // a Service or EndpointSlice, in a service zone
	PartImported             // a ServiceImport or imported EndpointSlice, in its namespace's service zone
	PartPTRs                 // reverse records, in a reverse zone
	PartPods                 // a Pod, in a pod zone (pods verified)
	PartMesh                 // ServiceEntry hosts, in a mesh zone
	PartFile                 // a zone file's content, in its file zone
)

// Contribution is what one object puts into one zone.
type Contribution struct {
	Key  string // the zone's key
	Part Part
	PTRs []PTR      // PartPTRs: the object's reverse records in that zone
	Mesh []MeshHost // PartMesh: the entry's hosts in that zone
}

// ZonesOf returns the zones the object of key contributes to, and the
// ServiceEntry hosts it leaves out on purpose. obj is the object, thawed
// where its records are read from it (Service, EndpointSlice, Pod,
// ServiceEntry); nil for a deletion, which goes to the zones its key
// alone names (service, imported, pod and file zones). The reverse and
// mesh zones a deleted object was in are known only from what it
// contributed before, which the caller keeps.
//
//   - Services and EndpointSlices go to their namespace's service zone in
//     every cluster domain, and their reverse records to the configured
//     reverse zones (/24 or /64).
//   - ServiceImports and imported EndpointSlices go to their namespace's
//     service zone in the first cluster domain, where multicluster names
//     are answered; without a multicluster zone nothing answers from them
//     and they go nowhere.
//   - Pods go to their namespace's pod zone in every cluster domain when
//     pods are verified, nowhere otherwise.
//   - ServiceEntries go to the mesh zones of their hosts (MeshHosts).
//   - Zone files go to the zone of their origin.
func ZonesOf(cfg *Config, key model.Key, obj any) ([]Contribution, []SkippedHost) {
	domains := cfg.Domains
	var out []Contribution
	switch key.Kind {
	case model.KindService, model.KindEndpointSlice:
		for _, origin := range domains.Cluster {
			out = append(out, Contribution{Key: ServiceZoneKey(key.Namespace, origin), Part: PartServices})
		}
		if obj == nil {
			return out, nil
		}
		for zoneKey, ptrs := range PTRs(cfg, obj) {
			if r := domains.Route(zoneKey); r.Kind == RouteZone && r.Reverse { // a configured reverse zone
				out = append(out, Contribution{Key: zoneKey, Part: PartPTRs, PTRs: ptrs})
			}
		}
	case model.KindServiceImport, model.KindMultiClusterSlice:
		if len(domains.Multicluster) > 0 && len(domains.Cluster) > 0 {
			out = append(out, Contribution{Key: ServiceZoneKey(key.Namespace, domains.Cluster[0]), Part: PartImported})
		}
	case model.KindPod:
		if domains.PodZones {
			for _, origin := range domains.Cluster {
				out = append(out, Contribution{Key: PodZoneKey(key.Namespace, origin), Part: PartPods})
			}
		}
	case model.KindServiceEntry:
		e, ok := obj.(*model.ServiceEntry)
		if !ok {
			return nil, nil
		}
		byZone, skipped := MeshHosts(cfg, e)
		for zoneKey, hosts := range byZone {
			out = append(out, Contribution{Key: zoneKey, Part: PartMesh, Mesh: hosts})
		}
		return out, skipped
	case model.KindZoneFile:
		out = append(out, Contribution{Key: Fqdn(key.Name), Part: PartFile})
	}
	return out, nil
}

// MeshNames appends to names the names hosts are answered under: a host
// visible to every namespace under its own name, one visible to some
// under a private name in each (PrivateMeshName). The directory lists
// them, so that every replica tells a mesh name from one to forward.
func MeshNames(names []string, hosts []MeshHost) []string {
	for _, h := range hosts {
		if h.Namespaces == nil {
			names = append(names, h.Name)
		}
		for _, ns := range h.Namespaces {
			names = append(names, PrivateMeshName(ns, h.Name))
		}
	}
	return names
}
