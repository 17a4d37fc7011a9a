package zone

import "github.com/shardns/shardns/model"

// StaticView is a View built in one go from a set of objects, grouped into
// zones the way the zone manager groups them. Tests, benchmarks and
// one-shot tools use it; a running node publishes through a Table instead.
type StaticView struct {
	dir   *Directory
	zones map[string]*Snapshot
}

// Directory implements View.
func (v *StaticView) Directory() *Directory { return v.dir }

// Zone implements View.
func (v *StaticView) Zone(key string) *Snapshot { return v.zones[key] }

// Remote implements View: a static view holds every zone.
func (v *StaticView) Remote(string) []string { return nil }

// Loading implements View: a static view loads nothing.
func (v *StaticView) Loading(string) bool { return false }

// FanOut implements View: a static view holds its reverse zones whole.
func (v *StaticView) FanOut(string) []string { return nil }

// NewStaticView builds the snapshots of every zone the objects fall in.
func NewStaticView(cfg *Config, objs []any, synced bool) *StaticView {
	namespaces := map[string]struct{}{}
	services := map[string]map[string]*model.Service{}
	slices := map[string]map[string]*model.EndpointSlice{}
	ptrs := map[string]map[model.Key]PTRList{}
	meshZones := map[string]map[model.Key][]MeshHost{}
	meshNames := map[string]struct{}{}
	files := map[string]*FileZone{}
	origins := map[string]struct{}{}
	imported := map[string]*Imported{}
	importedOf := func(ns string) *Imported {
		if len(cfg.Domains.Cluster) == 0 {
			return &Imported{}
		}
		key := ServiceZoneKey(ns, cfg.Domains.Cluster[0])
		if imported[key] == nil {
			imported[key] = &Imported{Services: map[string]model.Frozen{}, Slices: map[string]model.Frozen{}}
		}
		return imported[key]
	}
	for _, o := range objs {
		switch o := o.(type) {
		case *FileZone:
			files[o.Origin], origins[o.Origin] = o, struct{}{}
		case *model.Namespace:
			namespaces[o.Name] = struct{}{}
		case *model.Service:
			for _, origin := range cfg.Domains.Cluster {
				key := ServiceZoneKey(o.Namespace, origin)
				addTo(services, key, o.Name, o)
			}
			addPTRs(cfg, ptrs, o.Key(), PTRs(cfg, o))
		case *model.EndpointSlice:
			for _, origin := range cfg.Domains.Cluster {
				addTo(slices, ServiceZoneKey(o.Namespace, origin), o.Name, o)
			}
			addPTRs(cfg, ptrs, o.Key(), PTRs(cfg, o))
		case *model.ServiceImport:
			importedOf(o.Namespace).Services[o.Name], _ = model.Freeze(o)
		case *model.MultiClusterSlice:
			importedOf(o.Namespace).Slices[o.Name], _ = model.Freeze(o)
		case *model.ServiceEntry:
			byZone, _ := MeshHosts(cfg, o)
			for key, hosts := range byZone {
				addTo(meshZones, key, o.Key(), hosts)
				for _, h := range hosts {
					if h.Namespaces == nil {
						meshNames[h.Name] = struct{}{}
					}
					for _, ns := range h.Namespaces {
						meshNames[PrivateMeshName(ns, h.Name)] = struct{}{}
					}
				}
			}
		}
	}
	v := &StaticView{dir: NewDirectory(cfg, namespaces, synced, 1).WithMesh(meshNames).WithFiles(origins),
		zones: map[string]*Snapshot{}}
	for key := range services {
		r := cfg.Domains.Route(key)
		v.zones[key] = BuildServiceZone(cfg, key, r.Origin, 1, services[key], slices[key])
		// The sources, frozen, as a zone actor keeps them: external
		// (k8s_external) names are answered from them.
		v.zones[key].Services, v.zones[key].Slices = frozenAll(services[key]), frozenAll(slices[key])
	}
	for key := range slices {
		if v.zones[key] == nil {
			r := cfg.Domains.Route(key)
			v.zones[key] = BuildServiceZone(cfg, key, r.Origin, 1, nil, slices[key])
		}
	}
	for key, m := range imported {
		if v.zones[key] == nil {
			v.zones[key] = BuildServiceZone(cfg, key, cfg.Domains.Route(key).Origin, 1, nil, nil)
		}
		v.zones[key].Imported = m
	}
	for key, p := range ptrs {
		r := cfg.Domains.Route(key)
		v.zones[key] = BuildReverseZone(cfg, key, r.Origin, 1, p)
	}
	for key, hosts := range meshZones {
		v.zones[key] = BuildMeshZone(cfg, key, 1, hosts)
	}
	for key, f := range files {
		v.zones[key] = BuildFileZone(f)
	}
	return v
}

func frozenAll[T any](objs map[string]*T) map[string]model.Frozen {
	out := make(map[string]model.Frozen, len(objs))
	for name, o := range objs {
		if f, ok := model.Freeze(o); ok {
			out[name] = f
		}
	}
	return out
}

func addTo[K comparable, V any](m map[string]map[K]V, key string, name K, v V) {
	if m[key] == nil {
		m[key] = map[K]V{}
	}
	m[key][name] = v
}

func addPTRs(cfg *Config, dst map[string]map[model.Key]PTRList, src model.Key, byZone map[string][]PTR) {
	for key, p := range byZone {
		if r := cfg.Domains.Route(key); r.Kind != RouteZone || !r.Reverse {
			continue
		}
		if dst[key] == nil {
			dst[key] = map[model.Key]PTRList{}
		}
		dst[key][src] = PackPTRs(p)
	}
}
