package zones

import (
	"log/slog"
	"maps"
	"time"

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
	cfg         *zone.Config
	slot        *zone.Slot
	table       *zone.Table
	now         func() time.Time
	log         *slog.Logger

	services map[string]*model.Service
	slices   map[string]*model.EndpointSlice
	ptrs     map[model.Key][]zone.PTR
	podObjs  map[string]*model.Pod
	hosts    map[model.Key][]zone.MeshHost
	serial   uint32
	pending  bool // a flush is in the mailbox
}

func (z *zoneActor) Receive(ctx actor.Context) {
	switch msg := ctx.Message().(type) {
	case *actor.Started:
		z.onStarted()
	case *zoneApply:
		z.onApply(ctx, msg)
	case *flush:
		if z.pending {
			z.onFlush()
		}
	case *barrier:
		if z.pending {
			z.onFlush()
		}
		ctx.Send(ctx.Parent(), &barrierDone{tag: msg.tag, key: z.key})
	case *actor.Stopping:
		z.table.RemoveSlot(z.key, z.slot)
	}
}

// onStarted resumes from the last published snapshot, so a zone actor
// restarted by its supervisor keeps serving what it served.
func (z *zoneActor) onStarted() {
	z.services = map[string]*model.Service{}
	z.slices = map[string]*model.EndpointSlice{}
	z.ptrs = map[model.Key][]zone.PTR{}
	z.podObjs = map[string]*model.Pod{}
	z.hosts = map[model.Key][]zone.MeshHost{}
	z.pending = false
	if s := z.slot.Load(); s != nil {
		maps.Copy(z.services, s.Services)
		maps.Copy(z.slices, s.Slices)
		maps.Copy(z.ptrs, s.PTRs)
		maps.Copy(z.podObjs, s.Pods)
		maps.Copy(z.hosts, s.Mesh)
		z.serial = s.Serial
		z.log.Warn("zone actor restarted; resuming from its last snapshot", "zone", z.key)
	}
}

func (z *zoneActor) onApply(ctx actor.Context, msg *zoneApply) {
	for _, c := range msg.services {
		k := c.change.Key
		switch o := c.change.Object.(type) {
		case nil:
			if k.Kind == model.KindService {
				delete(z.services, k.Name)
			} else {
				delete(z.slices, k.Name)
			}
		case *model.Service:
			z.services[k.Name] = o
		case *model.EndpointSlice:
			z.slices[k.Name] = o
		}
	}
	for _, c := range msg.pods {
		if p, ok := c.Object.(*model.Pod); ok {
			z.podObjs[c.Key.Name] = p
		} else {
			delete(z.podObjs, c.Key.Name)
		}
	}
	for _, p := range msg.ptrs {
		if len(p.ptrs) == 0 {
			delete(z.ptrs, p.source)
		} else {
			z.ptrs[p.source] = p.ptrs
		}
	}
	for _, m := range msg.mesh {
		if len(m.hosts) == 0 {
			delete(z.hosts, m.source)
		} else {
			z.hosts[m.source] = m.hosts
		}
	}
	if !z.pending {
		z.pending = true
		ctx.Send(ctx.Self(), &flush{})
	}
}

// onFlush builds and publishes the snapshot of everything applied so far.
func (z *zoneActor) onFlush() {
	z.pending = false
	z.serial = nextSerial(z.serial, z.now())
	var s *zone.Snapshot
	switch {
	case z.mesh:
		s = zone.BuildMeshZone(z.cfg, z.key, z.serial, maps.Clone(z.hosts))
	case z.pods:
		s = zone.BuildPodZone(z.cfg, z.key, z.origin, z.serial, maps.Clone(z.podObjs))
	case z.reverse:
		s = zone.BuildReverseZone(z.cfg, z.key, z.origin, z.serial, maps.Clone(z.ptrs))
	default:
		s = zone.BuildServiceZone(z.cfg, z.key, z.origin, z.serial, maps.Clone(z.services), maps.Clone(z.slices))
	}
	z.slot.Store(s)
}

// nextSerial is a SOA serial in seconds since the epoch that always grows.
func nextSerial(prev uint32, now time.Time) uint32 {
	s := uint32(now.Unix())
	if s <= prev {
		return prev + 1
	}
	return s
}
