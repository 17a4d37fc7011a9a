package zone

import (
	"fmt"
	"net/netip"
	"strings"

	"github.com/miekg/dns"

	"github.com/shardns/shardns/model"
)

// Mesh names are the hosts of Istio ServiceEntries, answered as Istio's
// DNS proxy answers them: A/AAAA of the entry's addresses, a wildcard
// host "*.x.y" for every name below x.y. The zone key of a host is its
// parent domain, so "*.x.y" and "a.x.y" both live in zone "x.y.".
//
// Every replica knows every mesh host name (the Directory carries them):
// it must decide alone whether a name outside the cluster zones is a mesh
// name (answered here or by an owner of its zone) or goes to the
// forwarder, because an owner has no way to answer "not mine, forward it".
// The addresses live only in the mesh zones, on their owners.

// MeshHost is one host a ServiceEntry contributes to a mesh zone.
type MeshHost struct {
	Name  string       // lower-case and fully qualified; "*.x.y." for a wildcard
	Addrs []netip.Addr // what it resolves to
	// Namespaces are those the entry is exported to, sorted, when that is
	// not every namespace (nil): only the node tier, which knows the
	// namespace of its client pods, answers it, to those (meshprivate.go).
	Namespaces []string
}

// MeshHosts returns the hosts of e that are answered, grouped by zone key,
// and the hosts left out on purpose (meshpolicy.go):
//
//   - An entry not exported to every namespace (its exportTo, else
//     istio.defaultExportTo) gives hosts with the Namespaces it is
//     exported to: the replicas never answer them (their answer depends
//     on the question alone, and is cached by name), the node tier does,
//     to the client pods of those namespaces only. Exported to none
//     ("~"), it is skipped.
//   - A host inside a cluster or reverse zone is not answered: the
//     Kubernetes records own those names.
//   - A host outside istio.zones is not answered, nor a wildcard over a
//     public suffix, wherever it is.
//   - A host without an address (none in spec.addresses, none allocated
//     in status.addresses) is not a mesh name; it is not reported, since
//     Istio's DNS proxy leaves such hosts to the upstream resolver too.
func MeshHosts(cfg *Config, e *model.ServiceEntry) (map[string][]MeshHost, []SkippedHost) {
	var skipped []SkippedHost
	exportTo := cfg.meshExportTo(e)
	var visible []string // nil: every namespace
	if !ExportedToAll(exportTo) {
		if visible = exportedNamespaces(exportTo, e.Namespace); len(visible) == 0 {
			for _, h := range e.Hosts {
				skipped = append(skipped, SkippedHost{h, SkipExportTo, fmt.Sprintf("exportTo %v names no namespace", exportTo)})
			}
			return nil, skipped
		}
	}
	out := map[string][]MeshHost{}
	for _, h := range e.Hosts {
		addrs := e.Addresses
		if len(addrs) == 0 {
			addrs = e.StatusAddresses[strings.TrimSuffix(strings.ToLower(h), ".")]
		}
		if len(addrs) == 0 {
			continue
		}
		if s, refused := cfg.meshHostRefused(h); refused {
			skipped = append(skipped, s)
			continue
		}
		name := Fqdn(h)
		key := MeshZoneKey(name)
		out[key] = append(out[key], MeshHost{Name: name, Addrs: addrs, Namespaces: visible})
	}
	return out, skipped
}

// MeshZoneKey is the zone key of a mesh host: its parent domain ("x.y."
// for "a.x.y." and for "*.x.y."; "." for a single label).
func MeshZoneKey(host string) string { return parent(host) }

// parent drops the first label of a fully qualified name: "a.b." → "b.",
// "b." → ".", "." → "".
func parent(name string) string {
	if name == "." || name == "" {
		return ""
	}
	i := strings.IndexByte(name, '.')
	if i == len(name)-1 {
		return "."
	}
	return name[i+1:]
}

// mesh is the directory's index of mesh host names.
type mesh struct {
	exact    map[string]struct{} // "a.x.y."
	wildcard map[string]struct{} // "x.y." for "*.x.y."
}

// match finds the host pattern name is answered from: the exact host, else
// the wildcard of the nearest enclosing domain. It allocates nothing.
func (m *mesh) match(name string) (key string, wildcard, ok bool) {
	if len(m.exact) == 0 && len(m.wildcard) == 0 {
		return "", false, false
	}
	if _, ok := m.exact[name]; ok {
		return parent(name), false, true
	}
	for s := parent(name); s != "" && s != "."; s = parent(s) {
		if _, ok := m.wildcard[s]; ok {
			return s, true, true
		}
	}
	return "", false, false
}

// WithMesh sets the mesh host names ("a.x.y.", "*.x.y.") of a directory
// that is not published yet, and returns it. A name written
// PrivateMeshName(ns, host) is seen by namespace ns only.
func (d *Directory) WithMesh(hosts map[string]struct{}) *Directory {
	d.mesh, d.meshPrivate = newMesh(), nil
	for h := range hosts {
		m := &d.mesh
		if ns, host, private := strings.Cut(h, "/"); private {
			if d.meshPrivate[ns] == nil {
				if d.meshPrivate == nil {
					d.meshPrivate = map[string]*mesh{}
				}
				d.meshPrivate[ns] = &mesh{exact: map[string]struct{}{}, wildcard: map[string]struct{}{}}
			}
			m, h = d.meshPrivate[ns], host
		}
		m.add(h)
	}
	return d
}

func newMesh() mesh { return mesh{exact: map[string]struct{}{}, wildcard: map[string]struct{}{}} }

// add indexes one host name.
func (m *mesh) add(h string) {
	if base, ok := strings.CutPrefix(h, "*."); ok {
		m.wildcard[base] = struct{}{}
	} else {
		m.exact[h] = struct{}{}
	}
}

// KeyOf returns the zone key that name is answered from in v: its cluster
// or reverse zone, the file zone it lies in, or the mesh zone of the
// ServiceEntry host it matches; "" when it has none.
func KeyOf(cfg *Config, v Reader, name string) string {
	if r := cfg.Domains.Route(name); r.Kind != RouteExternal {
		return r.Key
	}
	if key := cfg.FileOrigin(v.Directory(), name); key != "" {
		return key
	}
	key, _, _ := v.Directory().mesh.match(name)
	return key
}

// KeyOfFor is KeyOf for a client of namespace ns, which may see mesh
// hosts exported to it.
func KeyOfFor(cfg *Config, v Reader, name, ns string) string {
	if key := KeyOf(cfg, v, name); ns == "" || cfg.Domains.Route(name).Kind != RouteExternal || cfg.FileOrigin(v.Directory(), name) != "" {
		return key
	}
	key, _, _, _ := v.Directory().meshMatch(ns, name)
	return key
}

// answerMesh answers a name outside the cluster and reverse zones: from
// the mesh zone of the host it matches, else it is external.
func answerMesh(cfg *Config, v Reader, q Question) Response {
	key, wildcard, private, ok := v.Directory().meshMatch(q.Namespace, q.Name)
	if !ok {
		return Response{External: true}
	}
	if q.Type == dns.TypeAXFR || q.Type == dns.TypeIXFR {
		return Response{Rcode: dns.RcodeRefused}
	}
	s := v.Zone(key)
	if s == nil {
		if order := v.Remote(key); order != nil {
			if len(order) == 0 {
				return Response{Rcode: dns.RcodeServerFailure}
			}
			return Response{Remote: order, Zone: key, Private: private}
		}
		// The directory is published before the zone it names; for that
		// moment the name is what it was before: not ours.
		return Response{External: true}
	}
	r := s.forNamespace(q.Namespace, private).answerMesh(q, wildcard)
	r.Private = private
	return r
}

// answerMesh answers a mesh name from this zone. A known host asked for a
// type it has no record of gets NOERROR with an empty answer and no SOA,
// as from Istio's DNS proxy: the zone is not really ours.
func (s *Snapshot) answerMesh(q Question, wildcard bool) Response {
	var n records
	var ok bool
	if wildcard {
		n, ok = s.wildcardRecords()
	} else {
		n, ok = s.lookup(q.Name)
	}
	if !ok {
		return Response{External: true} // the zone is behind the directory
	}
	var ans []dns.RR
	switch q.Type {
	case dns.TypeA, dns.TypeAAAA:
		ans = n.addresses(q.Name, q.Type == dns.TypeAAAA)
	}
	return Response{Answer: ans}
}

// withOwner copies address records under the name that was asked, for
// answers synthesised from a wildcard.
func withOwner(rrs []dns.RR, name string) []dns.RR {
	out := make([]dns.RR, len(rrs))
	for i, rr := range rrs {
		c := dns.Copy(rr)
		c.Header().Name = name
		out[i] = c
	}
	return out
}

// BuildMeshZone builds the snapshot of mesh zone key from the hosts each
// ServiceEntry contributes. Entries declaring the same host add up, as
// Istio merges them.
func BuildMeshZone(cfg *Config, key string, serial uint32, hosts map[model.Key][]MeshHost) *Snapshot {
	s := buildMeshSnapshot(cfg, key, serial, hosts, func(h MeshHost) bool { return h.Namespaces == nil })
	s.Mesh = hosts
	for _, ns := range privateNamespaces(hosts) {
		if s.meshByNamespace == nil {
			s.meshByNamespace = map[string]*Snapshot{}
		}
		s.meshByNamespace[ns] = buildPrivateMesh(cfg, key, serial, hosts, ns)
	}
	return s
}

// buildMeshSnapshot builds the records of the hosts that keep says.
func buildMeshSnapshot(cfg *Config, key string, serial uint32, hosts map[model.Key][]MeshHost, keep func(MeshHost) bool) *Snapshot {
	s := &Snapshot{Key: key, Serial: serial, nodes: map[string]uint32{}}
	type draft struct {
		v4, v6 []netip.Addr
		seen   map[netip.Addr]bool
	}
	drafts := map[string]*draft{}
	var names []string
	for _, src := range sortedObjectKeys(hosts) {
		for _, h := range hosts[src] {
			if !keep(h) {
				continue
			}
			name := h.Name
			if strings.HasPrefix(name, "*.") {
				name = "*" // the zone's one wildcard
			}
			d := drafts[name]
			if d == nil {
				d = &draft{seen: map[netip.Addr]bool{}}
				drafts[name] = d
				names = append(names, name)
			}
			for _, a := range h.Addrs {
				a = a.Unmap()
				if d.seen[a] {
					continue
				}
				d.seen[a] = true
				if a.Is4() {
					d.v4 = append(d.v4, a)
				} else {
					d.v6 = append(d.v6, a)
				}
			}
		}
	}
	var e encoder
	for _, name := range names {
		at := e.addAddresses(drafts[name].v4, drafts[name].v6, 0, 0)
		if name == "*" {
			s.wildcard, s.hasWildcard = at, true
		} else {
			s.nodes[name] = at
		}
	}
	e.finish(s, cfg.MeshTTL)
	return s
}
