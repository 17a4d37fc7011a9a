package dispatch

import (
	"cmp"
	"context"
	"fmt"
	"time"

	"github.com/asynkron/protoactor-go/actor"

	"github.com/shardns/shardns/actors/zonemanager"
	"github.com/shardns/shardns/cluster/wire"
	"github.com/shardns/shardns/model"
)

// Zone handoff: a replica that gains a zone its sources cannot list asks a
// replica that held it for the zone's objects (see the zones package's
// handoff.go). Every replica runs a server actor named "handoff" that
// takes a wire.ZoneStateRequest, asks its zone manager for one page of the
// zone (zonemanager.ExportZone), and answers with a wire.ZoneState; the asking
// side reads the pages in turn through its "handoff-replies" actor. A page
// holds at most StatePageBytes of objects, so that no remote message
// nears gRPC's 4 MB limit, whatever a zone holds and however many pages
// protoactor-go batches into one message.

// Actor names of the handoff, the same on every replica.
const (
	HandoffName        = "handoff"
	handoffRepliesName = "handoff-replies"
)

// StatePageBytes bounds the encoded objects of one page.
const StatePageBytes = 256 << 10

// MaxMessageBytes bounds one message on the remote port (a batch of
// envelopes protoactor sends one replica at once), which is decoded before
// it is checked: the largest legitimate one holds the pages of every zone
// a replica loads at once from one holder, twice over for the framing and
// for one object that alone exceeds a page.
const MaxMessageBytes = 2 * zonemanager.FetchParallel * StatePageBytes

// exportTimeout bounds the wait for the zone manager's page.
const exportTimeout = 5 * time.Second

// maxStatePages bounds the pages of one zone a replica reads: 4 GB of
// objects, far beyond any zone, so that a peer answering pages for ever
// cannot hold a load for ever.
const maxStatePages = 16384

// Exporter gives the handoff server the zone manager to ask: nil while
// none runs (starting, or a node-local process).
type Exporter func() *actor.PID

// handoffServer answers ZoneStateRequest messages.
type handoffServer struct{ manager Exporter }

func (s *handoffServer) Receive(ctx actor.Context) {
	q, ok := ctx.Message().(*wire.ZoneStateRequest)
	if !ok || ctx.Sender() == nil {
		return
	}
	reply := &wire.ZoneState{Id: q.Id, Format: model.FrozenFormat, Zone: q.Zone, AfterKind: q.AfterKind, AfterName: q.AfterName}
	// Sent as this actor, not anonymously: the asker accepts a page only
	// from the actor it asked.
	root, self, sender := ctx.ActorSystem().Root, ctx.Self(), ctx.Sender()
	manager := s.manager()
	if manager == nil || q.AfterKind > 0xFF {
		root.RequestWithCustomSender(sender, reply, self)
		return
	}
	// The manager answers from its zone's actor: wait for it off this
	// actor, which keeps taking requests.
	f := ctx.RequestFuture(manager, &zonemanager.ExportZone{Key: q.Zone, AfterKind: model.Kind(q.AfterKind),
		AfterName: q.AfterName, MaxBytes: StatePageBytes}, exportTimeout)
	go func() {
		if res, err := f.Result(); err == nil {
			if page, ok := res.(*zonemanager.ZoneExport); ok && page.Held {
				reply.Held, reply.Done = true, page.Done
				reply.Objects = make([]*wire.ZoneObject, len(page.Objects))
				for i, o := range page.Objects {
					reply.Objects[i] = &wire.ZoneObject{Kind: uint32(o.Kind), Name: o.Name, Frozen: []byte(o.Frozen)}
				}
			}
		}
		root.RequestWithCustomSender(sender, reply, self)
	}()
}

// Handoff reads zones from other replicas. It is safe for concurrent use.
type Handoff struct {
	system  *actor.ActorSystem
	replies *actor.PID
	pending *pending[*wire.ZoneState]
}

// StartHandoff spawns the handoff server and its reply actor on system,
// which must have remote started.
func StartHandoff(system *actor.ActorSystem, manager Exporter, counters Counters) (*Handoff, error) {
	h := &Handoff{system: system, pending: newPending[*wire.ZoneState](counters.RepliesDropped)}
	var err error
	h.replies, err = spawnPair(system, HandoffName, &handoffServer{manager: manager}, handoffRepliesName, h.receive,
		counters.MailboxDropped)
	if err != nil {
		return nil, fmt.Errorf("handoff: %w", err)
	}
	return h, nil
}

func (h *Handoff) receive(ctx actor.Context) {
	if r, ok := ctx.Message().(*wire.ZoneState); ok {
		h.pending.deliver(ctx.Sender(), r.Id, r)
	}
}

// Fetch reads zone key, of namespace, from the replica whose actor remote
// listens on remoteAddr, page after page, until ctx ends: the changes that
// build the zone, each object checked to decode. It implements
// zonemanager.FetchZone.
func (h *Handoff) Fetch(ctx context.Context, remoteAddr, key, namespace string) ([]model.Change, error) {
	var changes []model.Change
	var afterKind model.Kind
	afterName := ""
	for range maxStatePages {
		page, err := h.page(ctx, remoteAddr, &wire.ZoneStateRequest{Zone: key, AfterKind: uint32(afterKind), AfterName: afterName})
		if err != nil {
			return nil, err
		}
		for _, o := range page.Objects {
			kind, f := model.Kind(o.Kind), model.Frozen(o.Frozen)
			if cmp.Or(cmp.Compare(kind, afterKind), cmp.Compare(o.Name, afterName)) <= 0 {
				return nil, fmt.Errorf("handoff: %s from %s: objects out of order at %s", key, remoteAddr, o.Name)
			}
			afterKind, afterName = kind, o.Name
			switch kind {
			case model.KindService, model.KindEndpointSlice, model.KindPod, model.KindServiceImport, model.KindMultiClusterSlice:
			default:
				return nil, fmt.Errorf("handoff: %s from %s: object %s of kind %d", key, remoteAddr, o.Name, o.Kind)
			}
			if f.Kind() != kind || o.Name == "" {
				return nil, fmt.Errorf("handoff: %s from %s: object %q is not a %s", key, remoteAddr, o.Name, kind)
			}
			if _, err := f.Thaw(namespace, o.Name, ""); err != nil {
				return nil, fmt.Errorf("handoff: %s from %s: object %s: %w", key, remoteAddr, o.Name, err)
			}
			changes = append(changes, model.Change{Key: model.Key{Kind: kind, Namespace: namespace, Name: o.Name}, Object: f})
		}
		if page.Done {
			return changes, nil
		}
		if len(page.Objects) == 0 {
			return nil, fmt.Errorf("handoff: %s from %s: an empty page that is not the last", key, remoteAddr)
		}
	}
	return nil, fmt.Errorf("handoff: %s from %s: more than %d pages", key, remoteAddr, maxStatePages)
}

// page asks for one page and waits for it until ctx ends.
func (h *Handoff) page(ctx context.Context, remoteAddr string, q *wire.ZoneStateRequest) (*wire.ZoneState, error) {
	id, ch := h.pending.add(remoteAddr, HandoffName, func(r *wire.ZoneState) bool {
		return r.Zone == q.Zone && r.AfterKind == q.AfterKind && r.AfterName == q.AfterName
	})
	defer h.pending.done(id)
	q.Id = id
	h.system.Root.RequestWithCustomSender(actor.NewPID(remoteAddr, HandoffName), q, h.replies)
	select {
	case r := <-ch:
		switch {
		case !r.Held:
			return nil, fmt.Errorf("handoff: %s from %s: %w", q.Zone, remoteAddr, zonemanager.ErrNotHeld)
		case r.Format != model.FrozenFormat:
			return nil, fmt.Errorf("handoff: %s answered in encoding %d, this replica reads %d", remoteAddr, r.Format, model.FrozenFormat)
		}
		return r, nil
	case <-ctx.Done():
		return nil, fmt.Errorf("handoff: %s from %s: %w", q.Zone, remoteAddr, ctx.Err())
	}
}
