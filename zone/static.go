package zone

import "github.com/shardns/shardns/model"

// Static is a Reader built in one go from a set of objects, grouped into
// zones the way the zone manager groups them. Tests, benchmarks and
// one-shot tools use it; a running node publishes through a Table instead.
type Static struct {
	dir   *Directory
	zones map[string]*Snapshot
}

// Directory implements Reader.
func (v *Static) Directory() *Directory { return v.dir }

// Zone implements Reader.
func (v *Static) Zone(key string) *Snapshot { return v.zones[key] }

// Remote implements Reader: a static reader holds every zone.
func (v *Static) Remote(string) []string { return nil }

// Loading implements Reader: a static reader loads nothing.
func (v *Static) Loading(string) bool { return false }

// FanOut implements Reader: a static reader holds its reverse zones whole.
func (v *Static) FanOut(string) []string { return nil }

// NewStatic builds the snapshots of every zone the objects fall in,
// routed by ZonesOf as the zone manager routes them.
func NewStatic(cfg *Config, objs []any, synced bool) *Static {
	namespaces := map[string]struct{}{}
	services := map[string]map[string]*model.Service{}
	slices := map[string]map[string]*model.EndpointSlice{}
	pods := map[string]map[string]*model.Pod{}
	ptrs := map[string]map[model.Key]PTRList{}
	meshZones := map[string]map[model.Key][]MeshHost{}
	var meshNames []string
	files := map[string]*FileZone{}
	origins := map[string]struct{}{}
	imported := map[string]*Imported{}
	for _, o := range objs {
		var key model.Key
		switch o := o.(type) {
		case *model.Namespace:
			namespaces[o.Name] = struct{}{}
			continue
		case *FileZone:
			key = model.Key{Kind: model.KindZoneFile, Name: o.Origin}
		case interface{ Key() model.Key }:
			key = o.Key()
		default:
			continue
		}
		contributions, _ := ZonesOf(cfg, key, o)
		for _, c := range contributions {
			switch c.Part {
			case PartServices:
				if svc, ok := o.(*model.Service); ok {
					addTo(services, c.Key, key.Name, svc)
				} else if slice, ok := o.(*model.EndpointSlice); ok {
					addTo(slices, c.Key, key.Name, slice)
				}
			case PartImported:
				if imported[c.Key] == nil {
					imported[c.Key] = &Imported{Services: map[string]model.Frozen{}, Slices: map[string]model.Frozen{}}
				}
				f, _ := model.Freeze(o)
				if key.Kind == model.KindServiceImport {
					imported[c.Key].Services[key.Name] = f
				} else {
					imported[c.Key].Slices[key.Name] = f
				}
			case PartPTRs:
				addTo(ptrs, c.Key, key, PackPTRs(c.PTRs))
			case PartPods:
				addTo(pods, c.Key, key.Name, o.(*model.Pod))
			case PartMesh:
				addTo(meshZones, c.Key, key, c.Mesh)
				meshNames = MeshNames(meshNames, c.Mesh)
			case PartFile:
				files[c.Key], origins[c.Key] = o.(*FileZone), struct{}{}
			}
		}
	}
	mesh := make(map[string]struct{}, len(meshNames))
	for _, n := range meshNames {
		mesh[n] = struct{}{}
	}
	v := &Static{dir: NewDirectory(cfg, namespaces, synced, 1).WithMesh(mesh).WithFiles(origins),
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
	for key, p := range pods {
		v.zones[key] = BuildPodZone(cfg, key, cfg.Domains.Route(key).Origin, 1, p)
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
