package zonemanager

import (
	"cmp"
	"maps"
	"net/netip"
	"slices"
	"strings"

	"github.com/shardns/shardns/model"
	"github.com/shardns/shardns/zone"
)

// Which zones a batch of source changes goes to, and what it does to the
// Manager's indexes, is decided by routes, without an actor: apply
// returns a plan (each zone's part of the batch, the zones it emptied,
// whether the directory or the placement changed), State.Step decides
// from it which zone actors to spawn, tell and stop (applied), and the
// Manager carries that out. Both are table-tested (routing_test.go).

// routes is what the Manager knows of where each object's changes went:
// the namespaces, the zones each object contributes to and how many
// objects each zone holds, the pods' addresses for autopath, the mesh
// host names and the file zones the directory lists.
type routes struct {
	cfg *zone.Config
	// podIndex says autopath indexes the pods' addresses
	// (Config.PodIndex): apply returns how the index changes.
	podIndex   bool
	namespaces map[string]struct{}
	zonesOf    zoneIndex      // the zones each object contributes to
	zoneSize   map[string]int // objects contributing to each zone
	podIPs     map[model.Key][]netip.Addr
	ipOwner    map[netip.Addr]model.Key // the pod an address is indexed for
	meshNames  map[string]int           // mesh host names → entries declaring them
	meshOf     map[model.Key][]string   // mesh host names of each entry
	fileZones  map[string]bool          // file zone origins → held by every replica (see file.go)
}

func newRoutes(cfg *zone.Config, podIndex bool) routes {
	return routes{cfg: cfg, podIndex: podIndex, namespaces: map[string]struct{}{},
		zonesOf: newZoneIndex(), zoneSize: map[string]int{},
		podIPs: map[model.Key][]netip.Addr{}, ipOwner: map[netip.Addr]model.Key{},
		meshNames: map[string]int{}, meshOf: map[model.Key][]string{}, fileZones: map[string]bool{}}
}

// applyPlan is what one batch of changes does, as routes.apply decides.
type applyPlan struct {
	zones   []zoneBatch // each zone's part of the batch, by key
	emptied []string    // zones whose last object the batch removed: they stop
	// dirChanged says a namespace, a mesh host name or a file zone came
	// or went: the directory is published again.
	dirChanged bool
	// placementStale says a zone the placement lists came or went, or
	// (with sharded watches) a namespace: the placement is published again.
	placementStale bool
	pods           []podAddress     // what the autopath index gains and loses, in order
	skipped        []skippedHost    // ServiceEntry hosts left out, to log and count (live changes)
	unthawed       []unthawedChange // frozen objects that did not thaw, taken for deletes
}

// zoneBatch is the part of a batch that goes to one zone.
type zoneBatch struct {
	key string
	// reverse says a reverse zone: with sharded watches each replica
	// builds a share of it, which never hides while a replay loads.
	reverse bool
	apply   *zoneApply
}

// podAddress is one change of the autopath index: the address belongs
// to a pod of namespace, or to none any more ("").
type podAddress struct {
	ip        netip.Addr
	namespace string
}

// skippedHost is a ServiceEntry host left out on purpose.
type skippedHost struct {
	entry model.Key
	host  zone.SkippedHost
}

// unthawedChange is a frozen object that did not thaw (only a bug makes
// one): nothing is built from it.
type unthawedChange struct {
	key model.Key
	err error
}

// apply routes changes: each to the zones zone.ZonesOf names, and to
// those of the reverse and mesh zones its object contributed to before
// and no longer does, to remove what it put there. accepts says which
// Services, EndpointSlices, Pods and imports are for this replica
// (sharded.go); sharded says the sources watch only this replica's
// namespaces; live says the changes are not a replay's, whose skipped
// mesh hosts were reported already.
func (r *routes) apply(changes []model.Change, accepts func(model.Change) bool, sharded, live bool) applyPlan {
	var p applyPlan
	batches := map[string]*zoneApply{}
	batch := func(key string) *zoneApply {
		b := batches[key]
		if b == nil {
			b = &zoneApply{}
			batches[key] = b
		}
		return b
	}
	for _, c := range changes {
		switch c.Key.Kind {
		case model.KindNamespace:
			r.applyNamespace(&p, c, sharded)
		case model.KindService, model.KindEndpointSlice, model.KindPod,
			model.KindServiceImport, model.KindMultiClusterSlice:
			if accepts(c) {
				r.route(&p, c, batch, sharded, false)
			}
		case model.KindServiceEntry, model.KindZoneFile:
			r.route(&p, c, batch, sharded, live)
		}
	}
	p.zones = make([]zoneBatch, 0, len(batches))
	for key, b := range batches {
		p.zones = append(p.zones, zoneBatch{key: key, reverse: isReverseKey(r.cfg, key), apply: b})
	}
	slices.SortFunc(p.zones, func(a, b zoneBatch) int { return cmp.Compare(a.key, b.key) })
	keys := func(yield func(string) bool) {
		for _, b := range p.zones {
			if !yield(b.key) {
				return
			}
		}
	}
	p.emptied = emptied(keys, func(key string) int { return r.zoneSize[key] })
	for _, key := range p.emptied {
		if places(sharded, r.cfg, key) {
			p.placementStale = true
		}
		delete(r.zoneSize, key)
		r.zonesOf.forget(key)
	}
	return p
}

// places reports whether the placement lists zone key when this replica
// does not serve it. With sharded watches every replica holds a share of
// every reverse zone and asks the others for the rest (FanOut), so the
// reverse zones that come and go with the addresses of a churn, most of
// the keys a replica knows, move nothing: publishing the placement again
// for each, a walk of every key and namespace, was a tenth of the CPU of a
// replica of three under churn (TestShardedIngest's profiles).
func places(sharded bool, cfg *zone.Config, key string) bool {
	return !sharded || !isReverseKey(cfg, key)
}

func (r *routes) applyNamespace(p *applyPlan, c model.Change, sharded bool) {
	_, had := r.namespaces[c.Key.Name]
	if c.Object == nil {
		delete(r.namespaces, c.Key.Name)
	} else {
		r.namespaces[c.Key.Name] = struct{}{}
	}
	if had == (c.Object != nil) {
		return
	}
	p.dirChanged = true
	if sharded {
		// Its zones are placed before any object of it is known here:
		// most namespaces' objects never are.
		p.placementStale = true
	}
}

// route routes one change; report says its skipped mesh hosts are
// reported.
func (r *routes) route(p *applyPlan, c model.Change, batch func(string) *zoneApply, sharded, report bool) {
	switch c.Key.Kind {
	case model.KindService, model.KindEndpointSlice:
		// The zones keep the frozen form; the reverse records are read
		// from the thawed object.
		obj := c.Object
		if obj != nil {
			t, err := thawed(c)
			if err != nil {
				p.unthawed = append(p.unthawed, unthawedChange{key: c.Key, err: err})
			}
			obj = t.Object
		}
		r.routeAs(p, c, obj, batch, sharded, report)
		return
	case model.KindPod:
		t, err := thawed(c)
		if err != nil {
			p.unthawed = append(p.unthawed, unthawedChange{key: c.Key, err: err})
		}
		c = t
		if r.podIndex {
			r.indexPod(p, c)
		}
	}
	r.routeAs(p, c, c.Object, batch, sharded, report)
}

// routeAs routes c by what obj, its object thawed, contributes.
func (r *routes) routeAs(p *applyPlan, c model.Change, obj any, batch func(string) *zoneApply, sharded, report bool) {
	contributions, skipped := zone.ZonesOf(r.cfg, c.Key, obj)
	if report {
		for _, s := range skipped {
			p.skipped = append(p.skipped, skippedHost{entry: c.Key, host: s})
		}
	}
	var keys, meshNames []string
	for _, z := range contributions {
		keys = append(keys, z.Key)
		b := batch(z.Key)
		switch z.Part {
		case zone.PartServices:
			b.services = append(b.services, serviceChange{change: c})
		case zone.PartImported:
			b.imported = append(b.imported, c)
		case zone.PartPTRs:
			b.ptrs = append(b.ptrs, ptrChange{source: c.Key, ptrs: z.PTRs})
		case zone.PartPods:
			b.pods = append(b.pods, c)
		case zone.PartMesh:
			b.mesh = append(b.mesh, meshChange{source: c.Key, hosts: z.Mesh})
			meshNames = zone.MeshNames(meshNames, z.Mesh)
		case zone.PartFile:
			p.dirChanged = r.setFileZone(z.Key, c.Object) || p.dirChanged
			b.file = &fileChange{}
			b.file.zone, _ = c.Object.(*zone.FileZone)
		}
	}
	r.leaveZones(c.Key, keys, batch)
	if c.Object == nil {
		keys = nil
	}
	if r.setZonesOf(c.Key, keys, sharded) {
		p.placementStale = true
	}
	if c.Key.Kind == model.KindServiceEntry {
		p.dirChanged = r.setMeshNames(c.Key, meshNames) || p.dirChanged
	}
}

// leaveZones removes what the object of key put into the reverse and mesh
// zones it contributed to and no longer does, keys being the zones it
// goes to now. Its other zones are named by its key alone: it never
// leaves those while it exists.
func (r *routes) leaveZones(key model.Key, keys []string, batch func(string) *zoneApply) {
	for _, id := range r.zonesOf.zones(key) {
		old := r.zonesOf.key(id)
		if slices.Contains(keys, old) {
			continue
		}
		switch {
		case key.Kind == model.KindServiceEntry:
			batch(old).mesh = append(batch(old).mesh, meshChange{source: key})
		case isReverseKey(r.cfg, old):
			batch(old).ptrs = append(batch(old).ptrs, ptrChange{source: key})
		}
	}
}

// setZonesOf records which zones an object is in, keeping per-zone counts
// so that zones are stopped when their last object goes, and reports
// whether a zone the placement lists is new.
func (r *routes) setZonesOf(key model.Key, zones []string, sharded bool) (placedNew bool) {
	if r.zonesOf.same(key, zones) {
		return false // most updates: the same zones, counted already
	}
	for _, id := range r.zonesOf.zones(key) {
		r.zoneSize[r.zonesOf.key(id)]--
	}
	for _, z := range zones {
		if _, known := r.zoneSize[z]; !known && places(sharded, r.cfg, z) {
			placedNew = true
		}
		r.zoneSize[z]++
	}
	r.zonesOf.set(key, zones)
	return placedNew
}

// indexPod keeps the address → namespace index of autopath. An address
// reused by a newer pod belongs to that pod; deleting the older one leaves
// it alone.
func (r *routes) indexPod(p *applyPlan, c model.Change) {
	for _, ip := range r.podIPs[c.Key] {
		if r.ipOwner[ip] == c.Key {
			delete(r.ipOwner, ip)
			p.pods = append(p.pods, podAddress{ip: ip})
		}
	}
	delete(r.podIPs, c.Key)
	pod, ok := c.Object.(*model.Pod)
	if !ok {
		return
	}
	r.podIPs[c.Key] = pod.IPs
	for _, ip := range pod.IPs {
		r.ipOwner[ip] = c.Key
		p.pods = append(p.pods, podAddress{ip: ip, namespace: strings.ToLower(pod.Namespace)})
	}
}

// setMeshNames records the host names an entry contributes, counting
// entries per name, and reports whether the set of names changed. Mesh
// zones hold Istio ServiceEntry hosts under the host's parent domain as
// zone key; their host names also go into the directory, so that every
// replica can tell a mesh name from one to forward (zone.MeshHosts).
func (r *routes) setMeshNames(key model.Key, names []string) bool {
	changed := false
	for _, n := range r.meshOf[key] {
		r.meshNames[n]--
		if r.meshNames[n] == 0 {
			delete(r.meshNames, n)
			changed = true
		}
	}
	for _, n := range names {
		if r.meshNames[n] == 0 {
			changed = true
		}
		r.meshNames[n]++
	}
	if len(names) == 0 {
		delete(r.meshOf, key)
	} else {
		r.meshOf[key] = names
	}
	return changed
}

// setFileZone records whether the file zone of key exists (obj non-nil)
// and may be transferred, and reports whether the file origins changed.
func (r *routes) setFileZone(key string, obj any) bool {
	_, had := r.fileZones[key]
	f, _ := obj.(*zone.FileZone)
	if f == nil {
		delete(r.fileZones, key)
		return had
	}
	r.fileZones[key] = len(f.TransferTo) > 0
	return !had
}

// compact makes the per-object indexes anew at their size (see
// Manager.compactIndex).
func (r *routes) compact() {
	r.zonesOf.pack()
	r.podIPs = packed(r.podIPs)
	r.meshOf = packed(r.meshOf)
	r.zoneSize = resized(r.zoneSize)
	r.ipOwner = resized(r.ipOwner)
}

// directory returns the namespaces, mesh host names and file zone
// origins the directory lists, as copies of their own.
func (r *routes) directory() (namespaces, mesh, files map[string]struct{}) {
	set := func(keys func(yield func(string) bool), n int) map[string]struct{} {
		out := make(map[string]struct{}, n)
		for k := range keys {
			out[k] = struct{}{}
		}
		return out
	}
	return set(maps.Keys(r.namespaces), len(r.namespaces)), set(maps.Keys(r.meshNames), len(r.meshNames)),
		set(maps.Keys(r.fileZones), len(r.fileZones))
}

// thawed returns c with the model object its frozen form encodes, and
// with its identity and trigger; other changes are returned as they
// are. A frozen object that does not thaw (only a bug can make one) is
// taken for a delete, so that nothing is built from it, with the error.
func thawed(c model.Change) (model.Change, error) {
	f, ok := c.Object.(model.Frozen)
	if !ok {
		return c, nil
	}
	obj, err := f.Thaw(c.Key.Namespace, c.Key.Name, "")
	if err != nil {
		return model.Change{Key: c.Key}, err
	}
	return model.Change{Key: c.Key, Object: obj, Trigger: c.Trigger}, nil
}
