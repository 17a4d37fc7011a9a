// Package dispatch carries queries for zones held by other replicas over
// protoactor-go remote, and hands zones' state between replicas
// (handoff.go).
//
// Every replica runs a server actor named "dispatch" that answers a
// wire.ZoneQuery from the zones it serves, in place, with the packed
// response, or says it does not hold the zone. The asking side sends with
// a reply actor of its own ("dispatch-replies") and waits on a channel
// with its own deadline: no actor.Future, whose late replies race.
package dispatch

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"strings"
	"sync/atomic"

	"github.com/asynkron/protoactor-go/actor"
	"github.com/miekg/dns"
	"github.com/prometheus/client_golang/prometheus"
	"google.golang.org/protobuf/proto"

	"github.com/shardns/shardns/cluster/trust"
	"github.com/shardns/shardns/cluster/wire"
	"github.com/shardns/shardns/zone"
)

// Actor names, the same on every replica.
const (
	ServerName  = "dispatch"
	repliesName = "dispatch-replies"
)

// mailboxSize bounds the mailboxes other replicas can fill. A full one
// drops its oldest message (never blocks, never grows), counted: that
// question times out on the asking replica, which tries the next owner.
const mailboxSize = 8192

// ErrNotServed is returned when the asked replica does not hold the zone.
var ErrNotServed = errors.New("dispatch: zone not served by that replica")

// Source gives the server the zones it currently serves (a reload swaps
// them).
type Source func() (*zone.Config, zone.Reader)

// Unserved is told the zone key of each question the server answered
// "not served" for a zone it knows of but does not hold complete: the
// asking replica got no answer from the replicas before this one in the
// zone's order, which may be gone. It must not block.
type Unserved func(zoneKey string)

// server answers ZoneQuery messages.
type server struct {
	source   Source
	unserved Unserved
	// interest, once coherence started, notes who asked about what.
	interest atomic.Pointer[interest]
}

func (s *server) Receive(ctx actor.Context) {
	q, ok := ctx.Message().(*wire.ZoneQuery)
	if !ok {
		return
	}
	if ctx.Sender() == nil {
		return // nowhere to answer
	}
	// Noted before the answer is read from the snapshot: whatever is
	// published after it, the asker is told (coherence.go).
	it, added := s.interest.Load(), false
	if it != nil && q.Invalidations && q.Zone != "" {
		added = it.note(q.Zone, ctx.Sender().Address)
	}
	reply, elsewhere := answer(s.source, q)
	if added && !reply.Served {
		it.unnote(q.Zone, ctx.Sender().Address) // nothing to cache
	}
	// Sent as this actor, not anonymously: the asker accepts a reply only
	// from the actor it asked.
	ctx.Request(ctx.Sender(), reply)
	if elsewhere && s.unserved != nil && q.Zone != "" {
		s.unserved(q.Zone)
	}
}

// Answer is the server's reply to q.
func Answer(source Source, q *wire.ZoneQuery) *wire.ZoneReply {
	reply, _ := answer(source, q)
	return reply
}

// answer is Answer, and whether the zone is one this replica knows to be
// held by others (or still loading here).
func answer(source Source, q *wire.ZoneQuery) (reply *wire.ZoneReply, elsewhere bool) {
	reply = &wire.ZoneReply{Id: q.Id, Zone: q.Zone, Name: q.Name, Qtype: q.Qtype}
	cfg, view := source()
	if cfg == nil || q.Qtype > 0xFFFF {
		return reply, false
	}
	// Local only: a replica asked by another answers from its own share
	// of a partial reverse zone, even when that share lacks the name
	// (NXDOMAIN here is "not in my share", which the asker merges); it
	// never sends the question on, so a fan-out does not recurse. Other
	// zones, and reverse zones held whole, are unaffected: a zone held
	// elsewhere still comes back with Remote, answered "not served", and
	// so does a zone still loading here (Wait).
	// A namespace (a node-local process's client's) adds the mesh hosts
	// exported to it alone, which are answered to no one else.
	resp := zone.Answer(cfg, view, zone.Question{Name: q.Name, Type: uint16(q.Qtype), LocalOnly: true, Asker: askerTopology(q),
		Namespace: q.Namespace})
	notHere := len(resp.Remote) > 0 || resp.Wait
	if resp.External || notHere || zone.KeyOfFor(cfg, view, q.Name, q.Namespace) != q.Zone {
		return reply, notHere // not a zone this replica serves now
	}
	m := new(dns.Msg)
	m.SetQuestion(q.Name, uint16(q.Qtype))
	m.Response, m.Authoritative, m.Rcode = true, !resp.Referral, resp.Rcode // a referral has no AA
	m.Answer, m.Ns, m.Extra = resp.Answer, resp.Ns, resp.Extra
	m.Compress = true
	b, err := m.Pack()
	if err != nil {
		return reply, false
	}
	reply.Served, reply.Msg, reply.Preferred = true, b, uint32(resp.Preferred)
	return reply, false
}

// askerTopology is what the answer to q is ordered for: the asker's mode
// and zone. A mode this replica does not know, or none (an asker that
// sends none), orders nothing: the usual answer.
func askerTopology(q *wire.ZoneQuery) *zone.Topology {
	t := &zone.Topology{Zone: q.TopologyZone}
	if m := zone.TopologyMode(q.TopologyMode); q.TopologyMode <= uint32(zone.TopologyOnly) {
		t.Mode = m
	}
	return t
}

// Client asks other replicas. It is safe for concurrent use.
type Client struct {
	system  *actor.ActorSystem
	replies *actor.PID
	pending *pending[*wire.ZoneReply]
	server  *server
	// coherent: this process takes owners' ZoneChanged (StartCoherence).
	coherent atomic.Bool
}

// Counters are what the dispatch and handoff actors count, each by a
// label: the messages their full mailboxes dropped (by mailbox, the actor
// name), and the replies dropped because they answered no question this
// replica asked of their sender (by reason: DropUnknown, DropSender,
// DropMismatch).
type Counters struct {
	MailboxDropped *prometheus.CounterVec
	RepliesDropped *prometheus.CounterVec
}

// Start spawns the server and the reply actor on system, which must have
// remote started, and returns the client. unserved may be nil.
func Start(system *actor.ActorSystem, source Source, unserved Unserved, counters Counters) (*Client, error) {
	c := &Client{system: system, pending: newPending[*wire.ZoneReply](counters.RepliesDropped),
		server: &server{source: source, unserved: unserved}}
	var err error
	c.replies, err = spawnPair(system, ServerName, c.server,
		repliesName, c.receiveReply, counters.MailboxDropped)
	if err != nil {
		return nil, fmt.Errorf("dispatch: %w", err)
	}
	parts := actor.PropsFromProducer(func() actor.Actor { return &transferServer{source: source} },
		actor.WithMailbox(newDroppingMailbox(mailboxSize, counters.MailboxDropped.WithLabelValues(TransferName))))
	if _, err := system.Root.SpawnNamed(parts, TransferName); err != nil {
		return nil, fmt.Errorf("dispatch: %w", err)
	}
	return c, nil
}

// spawnPair spawns a server actor and a reply actor under their names,
// each with a dropping mailbox counted by name in dropped, and returns
// the reply actor. The server keeps no state of its own between
// messages: one value serves them all.
func spawnPair(system *actor.ActorSystem, serverName string, server actor.Actor, repliesName string,
	receive actor.ReceiveFunc, dropped *prometheus.CounterVec) (*actor.PID, error) {
	mailbox := func(name string) actor.PropsOption {
		return actor.WithMailbox(newDroppingMailbox(mailboxSize, dropped.WithLabelValues(name)))
	}
	if _, err := system.Root.SpawnNamed(actor.PropsFromProducer(func() actor.Actor { return server },
		mailbox(serverName)), serverName); err != nil {
		return nil, err
	}
	return system.Root.SpawnNamed(actor.PropsFromFunc(receive, mailbox(repliesName)), repliesName)
}

func (c *Client) receiveReply(ctx actor.Context) {
	if r, ok := ctx.Message().(*wire.ZoneReply); ok {
		c.pending.deliver(ctx.Sender(), r.Id, r)
	}
}

// Ask sends one question to the replica whose actor remote listens on
// remoteAddr and waits for its answer until ctx ends. Only that replica's
// dispatch actor can answer it, and only with a reply that echoes the
// question. The answer is ordered for topo (the asker's zone), and
// preferred is how many of its records lead it as preferred for that
// zone (zone.Response.Preferred). An AXFR asks for a namespace's part of
// a transfer (TransferName).
func (c *Client) Ask(ctx context.Context, remoteAddr, zoneKey, name string, qtype uint16, topo zone.Topology) (m *dns.Msg, preferred int, err error) {
	return c.AskFor(ctx, remoteAddr, zoneKey, name, qtype, topo, "")
}

// AskFor is Ask for a client pod of namespace ns: the answer includes the
// mesh hosts exported to ns alone. Only a node-local process, which knows
// its clients, asks with a namespace.
func (c *Client) AskFor(ctx context.Context, remoteAddr, zoneKey, name string, qtype uint16, topo zone.Topology, ns string) (m *dns.Msg, preferred int, err error) {
	server := ServerName
	if qtype == dns.TypeAXFR {
		server = TransferName
	}
	id, ch := c.pending.add(remoteAddr, server, func(r *wire.ZoneReply) bool {
		return r.Zone == zoneKey && r.Name == name && r.Qtype == uint32(qtype)
	})
	defer c.pending.done(id)
	q := &wire.ZoneQuery{Id: id, Zone: zoneKey, Name: name, Qtype: uint32(qtype),
		TopologyMode: uint32(topo.Mode), TopologyZone: topo.Zone, Namespace: ns, Invalidations: c.coherent.Load()}
	c.system.Root.RequestWithCustomSender(actor.NewPID(remoteAddr, server), q, c.replies)
	select {
	case r := <-ch:
		if !r.Served {
			return nil, 0, ErrNotServed
		}
		m := new(dns.Msg)
		if err := m.Unpack(r.Msg); err != nil {
			return nil, 0, fmt.Errorf("dispatch: reply from %s does not unpack: %w", remoteAddr, err)
		}
		if len(m.Question) != 1 || !strings.EqualFold(m.Question[0].Name, name) || m.Question[0].Qtype != qtype {
			return nil, 0, fmt.Errorf("dispatch: reply from %s answers another question", remoteAddr)
		}
		// A count past the answer (a peer's mistake) orders nothing.
		if int64(r.Preferred) < int64(len(m.Answer)) {
			preferred = int(r.Preferred)
		}
		return m, preferred, nil
	case <-ctx.Done():
		return nil, 0, ctx.Err()
	}
}

// Routes names, for each role a peer proves on the remote port, the one
// message type each actor takes from it, for the remote port's guard:
// everything else is refused before it reaches an actor. A replica takes
// everything from replicas, and only questions from node-local
// processes; a node-local process (nodeLocal) takes only the replies to
// its own questions and owners' word of changes (InvalidateName), from
// replicas; the parts of transfers are asked by replicas only. A
// plain-text peer (no keys: loopback or an explicitly insecure cluster)
// proves nothing and is taken as a replica: a node-local process in
// plain text cannot tell a replica from anything else on the port, and
// refusing a replica's word would end the stream its answers come by.
func Routes(nodeLocal bool) map[trust.Role]map[string]string {
	name := func(m proto.Message) string { return string(m.ProtoReflect().Descriptor().FullName()) }
	questions := map[string]string{
		ServerName: name(&wire.ZoneQuery{}),
		RingName:   name(&wire.RingRequest{}),
	}
	replies := map[string]string{
		repliesName:     name(&wire.ZoneReply{}),
		ringRepliesName: name(&wire.RingState{}),
		InvalidateName:  name(&wire.ZoneChanged{}),
	}
	if nodeLocal {
		return map[trust.Role]map[string]string{trust.RoleReplica: replies, trust.RoleUnproven: replies}
	}
	all := map[string]string{
		HandoffName:        name(&wire.ZoneStateRequest{}),
		handoffRepliesName: name(&wire.ZoneState{}),
	}
	maps.Copy(all, questions)
	maps.Copy(all, replies)
	all[TransferName] = name(&wire.ZoneQuery{})
	return map[trust.Role]map[string]string{trust.RoleReplica: all, trust.RoleUnproven: all, trust.RoleNodeLocal: questions}
}
