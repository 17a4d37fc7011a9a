package zonemanager

import (
	"log/slog"
	"maps"
	"runtime"
	"slices"
	"strings"
	"time"
	"unsafe"

	"github.com/asynkron/protoactor-go/actor"

	"github.com/shardns/shardns/model"
	"github.com/shardns/shardns/zone"
)

// zoneActor owns the records of one zone key.
type zoneActor struct {
	key, origin string
	reverse     bool
	pods        bool // a pod zone (pods: verified)
	mesh        bool // a mesh zone (Istio ServiceEntry hosts)
	pooled      bool // one of the zones of a reversePool, not an actor of its own
	cfg         *zone.Config
	slot        *zone.Slot
	table       *zone.Table
	now         func() time.Time
	log         *slog.Logger

	// What the zone is built from. After a flush these are the maps of
	// the published snapshot (shared): the next change copies them
	// first, so a quiet zone keeps one copy of its state, not two.
	// Services and EndpointSlices are kept frozen, the strings the
	// Kubernetes source holds, and thawed only to build the zone.
	namespace string // of the service zone's objects
	services  map[string]model.Frozen
	slices    map[string]model.Frozen
	ptrs      map[model.Key]zone.PTRList
	podObjs   map[string]*model.Pod
	hosts     map[model.Key][]zone.MeshHost
	// imported are the namespace's ServiceImports and imported slices,
	// nil while it has none: clusters without them pay one pointer.
	imported *zone.Imported
	shared   mapSet // the maps the published snapshot holds
	// slicesOf lists the EndpointSlices of each service label, made on a
	// zone's first update of some services and kept from then on, so an
	// update finds a service's slices without reading every slice (a
	// cache miss each: with the slices of 200 services read on every
	// EndpointSlice update, reading them cost more than the build).
	// casedNames, kept with it, says a Service name has upper-case
	// letters: a label's Services are then found by reading every name.
	slicesOf   map[string][]string
	casedNames bool
	// A service zone's snapshot is built again only for the services a
	// change touched: touched holds their labels since the last publish,
	// unless the next publish builds the whole zone (wholeZone: after a
	// start, a rebuild or a repack).
	touched   map[string]struct{}
	wholeZone bool
	fileZone  *zone.FileZone
	serial    uint32
	pending   bool // a flush is in the mailbox

	// Restarts (see rebuild.go).
	restarted  bool     // made by a supervisor's restart, not by the Manager's spawn
	rebuilding uint64   // the replay a rebuild waits for; 0: not rebuilding
	owed       []uint64 // barriers to answer once the rebuilt zone is published

	// What the next publish reports to onPublished (published.go).
	observer   Observer  // Config.Observer
	trigger    time.Time // earliest Change.Trigger applied since the last publish
	changedAll bool      // a change no service label names was applied

	fault    func(key string, batch *zoneApply) // Config.fault
	repacked func(key string)                   // Config.repacked
}

func (z *zoneActor) Receive(ctx actor.Context) {
	switch ctx.Message().(type) {
	case *actor.Started:
		z.onStarted()
		if z.restarted {
			z.log.Warn("zone actor restarted; its last snapshot serves while it rebuilds from the sources", "zone", z.key)
			ctx.Send(ctx.Parent(), &zoneRestarted{keys: []string{z.key}, pid: ctx.Self()})
		}
	case *actor.Stopping:
		z.table.RemoveSlot(z.key, z.slot)
	case *actor.Stopped:
		z.drop()
	default:
		z.handle(ctx, ctx.Message())
	}
}

// handle applies one of the zone's own messages. A pooled zone (see
// reversepool.go) gets them from its pool, addressed to it by key.
func (z *zoneActor) handle(ctx actor.Context, msg any) {
	switch msg := msg.(type) {
	case *zoneApply:
		z.onApply(ctx, msg)
	case *flush:
		if z.pending && z.rebuilding == 0 {
			z.onFlush()
		}
	case *barrier:
		z.onBarrier(ctx, msg)
	case *repack:
		z.onRepack()
		if z.repacked != nil {
			z.repacked(z.key)
		}
		if ctx.Sender() != nil {
			ctx.Respond(&repacked{})
		}
	case *rebuild:
		z.onRebuild(msg)
	case *ExportZone:
		z.onExport(ctx, msg)
	}
}

// toSelf sends msg to this zone, through its pool when it has one.
func (z *zoneActor) toSelf(ctx actor.Context, msg any) {
	if z.pooled {
		ctx.Send(ctx.Self(), &pooled{key: z.key, msg: msg})
		return
	}
	ctx.Send(ctx.Self(), msg)
}

// drop lets go of the zone's state once the actor has stopped, its slot
// already out of the table. The actor and its props (which hold the slot)
// may outlive the stop: protoactor's child set removes a PID by
// shortening its slice, which leaves the PID in the spare capacity, and a
// PID caches its process, which holds both. Without this, a lost zone's
// snapshot and source objects stayed in memory for as long as the Manager
// lived: a few of every handful of zones a handoff released.
//
// A retired table (its core replaced by a reload) keeps the snapshot:
// queries that began on that core still read it, and the Manager that
// would have kept it stops with the core.
func (z *zoneActor) drop() {
	if !z.table.Retired() {
		z.slot.Store(nil)
	}
	// Its names are no longer answered here: what was cached of them
	// goes (an emptied namespace's last Service, a zone handed over).
	z.report(Published{Zone: z.key, All: true, Trigger: z.trigger}, true)
	z.fileZone = nil
	z.services, z.slices, z.ptrs, z.podObjs, z.hosts = nil, nil, nil, nil, nil
	z.imported = nil
}

// onStarted resumes from the last published snapshot, so a zone actor
// restarted by its supervisor keeps serving what it served; the caller
// then asks the Manager to rebuild it from the sources.
func (z *zoneActor) onStarted() {
	z.forget()
	z.pending = false
	if s := z.slot.Load(); s != nil {
		z.services, z.slices = maps.Clone(s.Services), maps.Clone(s.Slices)
		z.imported = s.Imported
		z.shared |= importedMap // the snapshot holds it
		z.ptrs = ptrLists(s)
		z.podObjs, z.hosts = maps.Clone(s.Pods), maps.Clone(s.Mesh)
		z.fileZone = s.File
		z.serial = s.Serial
	}
}

// forget starts the zone's state over, empty and its own. The maps are
// made when a first change needs one (put): a zone uses one or two of
// them, and a replica with sharded watches runs thousands of reverse
// zones, which would each carry four empty maps.
func (z *zoneActor) forget() {
	z.services, z.slices, z.ptrs, z.podObjs, z.hosts = nil, nil, nil, nil, nil
	z.imported = nil
	z.shared = 0
	z.touched, z.wholeZone = nil, true
	z.slicesOf, z.casedNames = nil, false
}

// put sets m[k] to v, making m when it has none.
func put[K comparable, V any](m *map[K]V, k K, v V) {
	if *m == nil {
		*m = map[K]V{}
	}
	(*m)[k] = v
}

// mapSet names some of a zone actor's maps.
type mapSet uint8

const (
	servicesMap mapSet = 1 << iota
	slicesMap
	ptrsMap
	podsMap
	hostsMap
	importedMap
	allMaps = servicesMap | slicesMap | ptrsMap | podsMap | hostsMap | importedMap
)

// changes returns the maps msg changes.
func (msg *zoneApply) changes() mapSet {
	var m mapSet
	for _, c := range msg.services {
		if c.change.Key.Kind == model.KindService {
			m |= servicesMap
		} else {
			m |= slicesMap
		}
	}
	if len(msg.pods) > 0 {
		m |= podsMap
	}
	if len(msg.ptrs) > 0 {
		m |= ptrsMap
	}
	if len(msg.mesh) > 0 {
		m |= hostsMap
	}
	if len(msg.imported) > 0 {
		m |= importedMap
	}
	return m
}

// own copies those of maps that the published snapshot shares, before
// they change: an EndpointSlice update copies the slices, not the
// Services too.
func (z *zoneActor) own(which mapSet) {
	copying := which & z.shared
	z.shared &^= copying
	if copying&servicesMap != 0 {
		z.services = maps.Clone(z.services)
	}
	if copying&slicesMap != 0 {
		z.slices = maps.Clone(z.slices)
	}
	if copying&ptrsMap != 0 {
		if z.reverse && z.ptrs == nil {
			// A reverse zone's published snapshot holds its lists (see publish).
			z.ptrs = ptrLists(z.slot.Load())
		} else {
			z.ptrs = maps.Clone(z.ptrs)
		}
	}
	if copying&podsMap != 0 {
		z.podObjs = maps.Clone(z.podObjs)
	}
	if copying&hostsMap != 0 {
		z.hosts = maps.Clone(z.hosts)
	}
	if copying&importedMap != 0 && z.imported != nil {
		z.imported = &zone.Imported{Services: maps.Clone(z.imported.Services), Slices: maps.Clone(z.imported.Slices)}
	}
}

func (z *zoneActor) onApply(ctx actor.Context, msg *zoneApply) {
	if z.fault != nil {
		z.fault(z.key, msg)
	}
	z.own(msg.changes())
	for _, c := range msg.services {
		k := c.change.Key
		z.namespace = k.Namespace
		var f model.Frozen
		if c.change.Object != nil {
			var ok bool
			if f, ok = c.change.Object.(model.Frozen); !ok {
				f, ok = model.Freeze(c.change.Object) // from a source that does not freeze
			}
			if !ok || f.Kind() != k.Kind {
				continue // nothing to apply: what the zone holds stays
			}
		}
		objects := &z.slices
		if k.Kind == model.KindService {
			objects = &z.services
		}
		if held := (*objects)[k.Name]; f != "" && sameString(string(held), string(f)) {
			// The very object the zone holds, sent again: a replica that
			// handed namespaces over lists those it keeps again (the
			// source reuses its entries), and a zone that touched each,
			// rebuilt its services and indexed its slices anew among the
			// garbage of that list. An equal copy (from a peer's handoff)
			// still replaces the one held, so that the zone shares the
			// source's strings.
			continue
		}
		z.noteTrigger(c.change.Trigger)
		if k.Kind == model.KindService {
			z.touch(k.Name)
			if z.slicesOf != nil && k.Name != strings.ToLower(k.Name) {
				z.casedNames = true
			}
		} else {
			if old, ok := z.slices[k.Name]; ok {
				z.unindexSlice(old.ServiceName(), k.Name)
			}
			if f != "" {
				z.indexSlice(f.ServiceName(), k.Name)
			}
		}
		if f == "" {
			delete(*objects, k.Name)
		} else {
			put(objects, k.Name, f)
		}
	}
	for _, c := range msg.imported {
		z.namespace = c.Key.Namespace
		z.applyImported(c)
		z.noteTrigger(c.Trigger)
		z.changedAll = true // multicluster names are under no label of the zone key
	}
	for _, c := range msg.pods {
		z.noteTrigger(c.Trigger)
		if p, ok := c.Object.(*model.Pod); ok {
			put(&z.podObjs, c.Key.Name, p)
		} else {
			delete(z.podObjs, c.Key.Name)
		}
	}
	for _, p := range msg.ptrs {
		if len(p.ptrs) == 0 {
			delete(z.ptrs, p.source)
		} else {
			put(&z.ptrs, p.source, zone.PackPTRs(p.ptrs))
		}
	}
	for _, m := range msg.mesh {
		if len(m.hosts) == 0 {
			delete(z.hosts, m.source)
		} else {
			put(&z.hosts, m.source, m.hosts)
		}
	}
	if msg.file != nil {
		z.fileZone = msg.file.zone
	}
	if !z.pending {
		z.pending = true
		z.toSelf(ctx, &flush{})
	}
}

// onFlush builds and publishes the snapshot of everything applied so far.
func (z *zoneActor) onFlush() {
	z.pending = false
	z.serial = nextSerial(z.serial, z.now())
	p, changed := z.whatChanged()
	z.publish()
	z.report(p, changed)
}

// onRepack builds the published snapshot again, serial and all, from
// copies of the zone's maps: everything the zone holds moves to memory
// allocated now. A flush on its way, or a rebuild, does that anyway.
func (z *zoneActor) onRepack() {
	if z.pending || z.rebuilding != 0 || z.slot.Load() == nil {
		return
	}
	z.shared = allMaps // copy the maps, even those no snapshot shares
	z.own(allMaps)
	// The next update of some services makes the index of their slices
	// again, from the maps just copied, rather than keep its lists where
	// they were made.
	z.slicesOf, z.casedNames = nil, false
	z.wholeZone = true
	z.publish()
}

// builds bounds the snapshots built at once to the processors Go runs
// on. A build's garbage (thawed objects, a reverse zone's lists, the
// maps it sorts) is live until it ends. A start, a relist or a ring
// change has every zone actor it touches build at once, each preempted
// in turn, so without a bound each of them held its garbage at the same
// moment: the peak of a replica loading a hundred zones. Bounded, the
// builds keep every processor busy and no more garbage than that.
var builds = make(chan struct{}, runtime.GOMAXPROCS(0))

// publish builds the snapshot of the zone's state and publishes it. It
// may wait for another zone's build (builds); nothing it waits on waits
// for a zone actor.
func (z *zoneActor) publish() {
	builds <- struct{}{}
	defer func() { <-builds }()
	var s *zone.Snapshot
	switch {
	case z.fileZone != nil:
		// A file zone's key is its origin, which a mesh zone may share;
		// the file's names are answered first, so its content wins.
		s = zone.BuildFileZone(z.fileZone)
	case z.mesh:
		s = zone.BuildMeshZone(z.cfg, z.key, z.serial, z.hosts)
	case z.pods:
		s = zone.BuildPodZone(z.cfg, z.key, z.origin, z.serial, z.podObjs)
	case z.reverse:
		s = zone.BuildReverseZone(z.cfg, z.key, z.origin, z.serial, z.ptrs)
		// The snapshot keeps the lists, copied into a block of its own and
		// sorted in a slice; the next change makes the map again from them.
		z.ptrs = nil
	default:
		if z.updatesLabels() {
			s = zone.UpdateServiceZone(z.cfg, z.slot.Load(), z.serial, z.sourcesOf(z.touched))
		} else {
			services, slices := z.thawed()
			s = zone.BuildServiceZone(z.cfg, z.key, z.origin, z.serial, services, slices)
		}
		s.Services, s.Slices = z.services, z.slices
		s.Imported = z.imported
	}
	z.shared = allMaps // the snapshot holds these maps now: never change them in place
	z.touched, z.wholeZone = nil, false
	z.slot.Store(s)
}

// applyImported applies a ServiceImport or imported EndpointSlice
// change; the zone's own services are not touched, since no record of
// the cluster domain comes from them. The imports are dropped whole once
// the last one goes.
func (z *zoneActor) applyImported(c model.Change) {
	var f model.Frozen
	if c.Object != nil {
		var ok bool
		if f, ok = c.Object.(model.Frozen); !ok {
			f, ok = model.Freeze(c.Object)
		}
		if !ok || f.Kind() != c.Key.Kind {
			return
		}
	}
	if z.imported == nil {
		if f == "" {
			return
		}
		z.imported = &zone.Imported{}
	}
	objects := &z.imported.Slices
	if c.Key.Kind == model.KindServiceImport {
		objects = &z.imported.Services
	}
	if f == "" {
		delete(*objects, c.Key.Name)
	} else {
		put(objects, c.Key.Name, f)
	}
	if len(z.imported.Services) == 0 && len(z.imported.Slices) == 0 {
		z.imported = nil
	}
}

// touch notes that the names of service (any case) may have changed.
func (z *zoneActor) touch(service string) {
	if !z.wholeZone {
		put(&z.touched, strings.ToLower(service), struct{}{})
	}
}

// sameString reports whether a and b are the same bytes in memory, not
// only equal.
func sameString(a, b string) bool {
	return len(a) == len(b) && unsafe.StringData(a) == unsafe.StringData(b)
}

// indexSlice notes that slice serves service, and touches the service.
func (z *zoneActor) indexSlice(service, slice string) {
	label := strings.ToLower(service)
	z.touch(label)
	if z.slicesOf != nil {
		z.slicesOf[label] = append(z.slicesOf[label], slice)
	}
}

// unindexSlice notes that slice no longer serves service, and touches the
// service.
func (z *zoneActor) unindexSlice(service, slice string) {
	label := strings.ToLower(service)
	z.touch(label)
	if z.slicesOf == nil {
		return
	}
	names := slices.DeleteFunc(z.slicesOf[label], func(name string) bool { return name == slice })
	if len(names) == 0 {
		delete(z.slicesOf, label)
	} else {
		z.slicesOf[label] = names
	}
}

// sourcesOf thaws the Services and EndpointSlices of each service label
// in labels, in the order of their names.
func (z *zoneActor) sourcesOf(labels map[string]struct{}) map[string]zone.ServiceSources {
	if z.slicesOf == nil {
		z.slicesOf = make(map[string][]string, len(z.services))
		for name, f := range z.slices {
			label := strings.ToLower(f.ServiceName())
			z.slicesOf[label] = append(z.slicesOf[label], name)
		}
		for name := range z.services {
			z.casedNames = z.casedNames || name != strings.ToLower(name)
		}
	}
	out := make(map[string]zone.ServiceSources, len(labels))
	for label := range labels {
		var src zone.ServiceSources
		if z.casedNames {
			for name, f := range z.services {
				if strings.ToLower(name) == label {
					src.Services = appendThawed[model.Service](z, src.Services, name, f)
				}
			}
		} else if f, ok := z.services[label]; ok {
			src.Services = appendThawed[model.Service](z, src.Services, label, f)
		}
		for _, name := range z.slicesOf[label] {
			src.Slices = appendThawed[model.EndpointSlice](z, src.Slices, name, z.slices[name])
		}
		out[label] = src
	}
	for _, src := range out {
		slices.SortFunc(src.Services, func(a, b *model.Service) int { return strings.Compare(a.Name, b.Name) })
		slices.SortFunc(src.Slices, func(a, b *model.EndpointSlice) int { return strings.Compare(a.Name, b.Name) })
	}
	return out
}

// thawed returns the zone's Services and EndpointSlices as model objects,
// made for one build and dropped after it.
func (z *zoneActor) thawed() (map[string]*model.Service, map[string]*model.EndpointSlice) {
	return thawAll[model.Service](z, z.services), thawAll[model.EndpointSlice](z, z.slices)
}

func thawAll[T any](z *zoneActor, frozen map[string]model.Frozen) map[string]*T {
	out := make(map[string]*T, len(frozen))
	for name, f := range frozen {
		if o := thaw[T](z, name, f); o != nil {
			out[name] = o
		}
	}
	return out
}

// appendThawed appends the object frozen as f to objs, unless it does
// not thaw.
func appendThawed[T any](z *zoneActor, objs []*T, name string, f model.Frozen) []*T {
	if o := thaw[T](z, name, f); o != nil {
		return append(objs, o)
	}
	return objs
}

// thaw returns the object frozen as f, or nil, logged, when it does not
// thaw: the zone is built without it.
func thaw[T any](z *zoneActor, name string, f model.Frozen) *T {
	obj, err := f.Thaw(z.namespace, name, "")
	if o, ok := obj.(*T); ok && err == nil {
		return o
	}
	z.log.Error("a frozen object of the zone does not thaw; building without it", "zone", z.key, "name", name, "err", err)
	return nil
}

// ptrLists makes the map of a reverse zone's PTR lists, by source, from
// the slice its snapshot keeps them in; empty for no snapshot.
func ptrLists(s *zone.Snapshot) map[model.Key]zone.PTRList {
	lists := map[model.Key]zone.PTRList{}
	if s != nil {
		for _, p := range s.PTRs {
			lists[p.Source] = p.PTRs
		}
	}
	return lists
}

// nextSerial is a SOA serial in seconds since the epoch that always grows.
func nextSerial(prev uint32, now time.Time) uint32 {
	s := uint32(now.Unix())
	if s <= prev {
		return prev + 1
	}
	return s
}
