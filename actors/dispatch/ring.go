package dispatch

import (
	"context"
	"encoding/binary"
	"fmt"
	"hash/fnv"
	"sync/atomic"

	"github.com/asynkron/protoactor-go/actor"

	"github.com/shardns/shardns/cluster"
	"github.com/shardns/shardns/cluster/wire"
)

// The ring, for node-local processes: they hold no replica key, so they
// do not gossip, and follow the ring by asking a replica for it every
// probe interval. Every replica runs a server actor named "ring" that
// answers a wire.RingRequest with its ring, or only its version when the
// asker holds that one already.

// Actor names of the ring, the same on every process.
const (
	RingName        = "ring"
	ringRepliesName = "ring-replies"
)

// RingSource gives the ring server the ring this replica serves by; nil
// while it has none.
type RingSource func() *cluster.Ring

// ringServer answers RingRequest messages.
type ringServer struct {
	source RingSource
	last   atomic.Pointer[ringView] // the view of the last ring asked about
	mesh   meshServer
}

// ringView is a ring as node-local processes are told it.
type ringView struct {
	ring    *cluster.Ring
	version uint64
	members []*wire.RingMember
}

func (s *ringServer) Receive(ctx actor.Context) {
	q, ok := ctx.Message().(*wire.RingRequest)
	if !ok || ctx.Sender() == nil {
		return
	}
	reply := &wire.RingState{Id: q.Id, AskedVersion: q.Version}
	if v := s.view(); v != nil {
		reply.Version = v.version
		if v.version != q.Version {
			reply.Members = v.members
		}
	}
	if m := s.mesh.view(); m != nil {
		reply.MeshVersion = m.version
		if m.version != q.MeshVersion {
			reply.MeshNames = m.names
		}
	}
	ctx.Request(ctx.Sender(), reply)
}

// view is the current ring as told, computed once per ring.
func (s *ringServer) view() *ringView {
	r := s.source()
	if r == nil {
		return nil
	}
	if v := s.last.Load(); v != nil && v.ring == r {
		return v
	}
	v := newRingView(r)
	s.last.Store(v)
	return v
}

// newRingView is what a replica tells of r: each member with its remote
// address, owning zones only if it does and was not found down here.
// The version is a hash of exactly that, so rings that tell the same have
// the same version.
func newRingView(r *cluster.Ring) *ringView {
	v := &ringView{ring: r}
	h := fnv.New64a()
	var b [1]byte
	for _, m := range r.Members { // sorted by name
		w := &wire.RingMember{Name: m.Name, Remote: m.Remote, Owner: m.Owner && !m.Down, Pending: m.Pending && !m.Down}
		v.members = append(v.members, w)
		h.Write(binary.AppendUvarint(nil, uint64(len(w.Name))))
		h.Write([]byte(w.Name))
		h.Write(binary.AppendUvarint(nil, uint64(len(w.Remote))))
		h.Write([]byte(w.Remote))
		b[0] = 0
		if w.Owner {
			b[0] |= 1
		}
		if w.Pending {
			b[0] |= 2
		}
		h.Write(b[:])
	}
	v.version = h.Sum64() | 1 // never 0, the version of no ring
	return v
}

// RingClient asks replicas for their ring. It is safe for concurrent use.
type RingClient struct {
	system  *actor.ActorSystem
	replies *actor.PID
	pending *pending[*wire.RingState]
	server  *ringServer
	mesh    atomic.Pointer[MeshNames] // what the replicas told last
}

// StartRing spawns the ring server and its reply actor on system, which
// must have remote started.
func StartRing(system *actor.ActorSystem, source RingSource, counters Counters) (*RingClient, error) {
	c := &RingClient{system: system, pending: newPending[*wire.RingState](counters.RepliesDropped), server: &ringServer{source: source}}
	var err error
	c.replies, err = spawnPair(system, RingName, c.server, ringRepliesName, c.receive,
		counters.MailboxDropped)
	if err != nil {
		return nil, fmt.Errorf("ring: %w", err)
	}
	return c, nil
}

func (c *RingClient) receive(ctx actor.Context) {
	if r, ok := ctx.Message().(*wire.RingState); ok {
		c.pending.deliver(ctx.Sender(), r.Id, r)
	}
}

// Fetch asks the replica whose actor remote listens on remoteAddr for its
// ring, telling it the version the caller holds, and waits until ctx
// ends. It returns the replica's version, and its members when that
// version differs from known (nil when it is the same).
func (c *RingClient) Fetch(ctx context.Context, remoteAddr string, known uint64) (uint64, []*wire.RingMember, error) {
	id, ch := c.pending.add(remoteAddr, RingName, func(r *wire.RingState) bool { return r.AskedVersion == known })
	defer c.pending.done(id)
	meshKnown := uint64(0)
	if m := c.mesh.Load(); m != nil {
		meshKnown = m.Version
	}
	c.system.Root.RequestWithCustomSender(actor.NewPID(remoteAddr, RingName),
		&wire.RingRequest{Id: id, Version: known, MeshVersion: meshKnown}, c.replies)
	select {
	case r := <-ch:
		c.takeMesh(meshKnown, r.MeshVersion, r.MeshNames)
		if r.Version == 0 {
			return 0, nil, fmt.Errorf("ring: %s has no ring yet", remoteAddr)
		}
		if r.Version == known {
			return known, nil, nil
		}
		return r.Version, r.Members, nil
	case <-ctx.Done():
		return 0, nil, fmt.Errorf("ring: %s: %w", remoteAddr, ctx.Err())
	}
}
