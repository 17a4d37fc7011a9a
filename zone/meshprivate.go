package zone

import (
	"slices"
	"sort"

	"github.com/shardns/shardns/model"
)

// Mesh hosts exported to some namespaces only (exportTo "." or named
// namespaces) are answered by the node tier alone, to the client pods of
// those namespaces: a node-local process knows the namespace of each pod
// of its node from its source address. It asks a mesh zone's owners with
// the client's namespace (Question.Namespace), and the owners answer
// from the records that namespace sees. The replicas' own listeners ask
// with none, and get the records every namespace sees: a restricted host
// is to them what it was before it existed. Owners' answers for a
// namespace are never cached by name.
//
// Every replica's directory holds the restricted host names by
// namespace, as it holds the public ones, so that it can route a
// namespace's question; node-local processes learn them with the ring.

// PrivateMeshName is how the directory is told (WithMesh) a host name
// that namespace ns sees and others do not. Neither a namespace nor a
// host name holds a "/".
func PrivateMeshName(ns, host string) string { return ns + "/" + host }

// exportedNamespaces are the namespaces an exportTo list (not containing
// "*") names, "." being ns, sorted; none when it names none ("~").
func exportedNamespaces(exportTo []string, ns string) []string {
	var out []string
	for _, e := range exportTo {
		switch e {
		case "~":
		case ".":
			if ns != "" {
				out = append(out, ns)
			}
		default:
			out = append(out, e)
		}
	}
	slices.Sort(out)
	return slices.Compact(out)
}

// buildPrivateMesh builds the records of the host names exported to ns
// alone, with those the public hosts of the same names add: a name ns
// has no host of its own for is answered from the zone's public records
// (meshMatch tells which). So a namespace's records cost what its own
// hosts are, not a copy of the zone's: an entry exported to a thousand
// namespaces costs a thousand times its own hosts, whatever else the
// zone holds.
func buildPrivateMesh(cfg *Config, key string, serial uint32, hosts map[model.Key][]MeshHost, ns string) *Snapshot {
	own := map[string]bool{}
	for _, hs := range hosts {
		for _, h := range hs {
			if slices.Contains(h.Namespaces, ns) {
				own[h.Name] = true
			}
		}
	}
	return buildMeshSnapshot(cfg, key, serial, hosts, func(h MeshHost) bool {
		return own[h.Name] && (h.Namespaces == nil || slices.Contains(h.Namespaces, ns))
	})
}

// privateNamespaces lists the namespaces some host of hosts is exported
// to alone.
func privateNamespaces(hosts map[model.Key][]MeshHost) []string {
	seen := map[string]bool{}
	for _, hs := range hosts {
		for _, h := range hs {
			for _, ns := range h.Namespaces {
				seen[ns] = true
			}
		}
	}
	out := make([]string, 0, len(seen))
	for ns := range seen {
		out = append(out, ns)
	}
	sort.Strings(out)
	return out
}

// forNamespace is the mesh zone of the host names exported to ns alone,
// for a name meshMatch found private to ns; else the zone's own.
func (s *Snapshot) forNamespace(ns string, private bool) *Snapshot {
	if private {
		if sub := s.meshByNamespace[ns]; sub != nil {
			return sub
		}
	}
	return s
}

// meshMatch finds the host pattern name is answered from for a client of
// namespace ns (""; none known): the exact host, else the nearest
// wildcard, among the hosts every namespace sees and those exported to
// ns. private reports that a host exported to ns alone is among those
// that match there: the answer is that namespace's. It allocates nothing.
func (d *Directory) meshMatch(ns, name string) (key string, wildcard, private, ok bool) {
	p := d.meshPrivate[ns]
	if ns == "" || p == nil {
		key, wildcard, ok = d.mesh.match(name)
		return key, wildcard, false, ok
	}
	_, public := d.mesh.exact[name]
	if _, private = p.exact[name]; public || private {
		return parent(name), false, private, true
	}
	for s := parent(name); s != "" && s != "."; s = parent(s) {
		_, public := d.mesh.wildcard[s]
		if _, private = p.wildcard[s]; public || private {
			return s, true, private, true
		}
	}
	return "", false, false, false
}

// HasPrivateMesh reports whether namespace ns sees mesh hosts that others
// do not: questions of its clients are then not answered from caches of
// answers by name.
func (d *Directory) HasPrivateMesh(ns string) bool {
	_, ok := d.meshPrivate[ns]
	return ok
}

// MeshNames lists the directory's mesh host names as WithMesh takes
// them, sorted: what a replica tells node-local processes.
func (d *Directory) MeshNames() []string {
	var out []string
	add := func(m *mesh, ns string) {
		for h := range m.exact {
			out = append(out, h)
		}
		for base := range m.wildcard {
			out = append(out, "*."+base)
		}
		if ns != "" {
			for i := len(out) - len(m.exact) - len(m.wildcard); i < len(out); i++ {
				out[i] = PrivateMeshName(ns, out[i])
			}
		}
	}
	add(&d.mesh, "")
	for ns, m := range d.meshPrivate {
		add(m, ns)
	}
	sort.Strings(out)
	return out
}
