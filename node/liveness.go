package node

import (
	"context"
	"net"
	"slices"
	"time"

	"github.com/asynkron/protoactor-go/actor"
	"github.com/asynkron/protoactor-go/remote"

	"github.com/shardns/shardns/cluster"
	"github.com/shardns/shardns/cluster/liveness"
	"github.com/shardns/shardns/cluster/membership"
	"github.com/shardns/shardns/cluster/trust"
	"github.com/shardns/shardns/config"
)

// A replica whose process exits (a crash, an OOM kill, kill -9) leaves its
// zones unanswered until gossip declares it dead, about 5 s with the LAN
// timing. The replicas that talk to it learn sooner: its remote port
// refuses connections. Three things make a replica check a member's port
// (cluster/liveness), each at most once per probe interval:
//
//   - protoactor's connection to the member broke (EndpointTerminatedEvent:
//     the member's end closed, as a dying process's kernel does at once);
//   - a question to the member went unanswered;
//   - another replica asked this one for a zone that a member before it
//     in the zone's order owns (the asker could not reach that member).
//
// A member behind a network that drops what it is sent (a partition, one
// way or both) refuses nothing. Its questions time out; once none has
// been answered for silentProbes probe intervals and a check of its
// port times out as well, it is found down here too. A check that
// completes brings it back: a member that is only busy answers checks.
//
// A member found down owns nothing in this replica's ring, so this
// replica loads the zones it is next in line for from its own sources, as
// it would once gossip declared the member dead, and asks the others
// for the rest. Answers stay the owners' own: every replica's sources
// hold every object, and a zone is visible only once loaded whole.

// silentProbes is how many probe intervals (about 2 s with the LAN
// timing) a member's questions must go unanswered before a check that
// times out finds it down: two checks at least, so one lost packet or
// one pause does not move its zones, and still well before gossip's
// verdict (about 5 s).
const silentProbes = 2

// startLiveness starts the checker of c and listens for broken remote
// connections. Dials go from bindHost when it is an address, through the
// guard's handshake, as dispatches do.
func (n *Node) startLiveness(c *clusterState, guard *trust.Guard, bindHost string, interval time.Duration) error {
	c.liveChanged = make(chan struct{}, 1)
	c.checkRemote = remoteCheck(guard, bindHost)
	var err error
	c.liveness, err = liveness.New(liveness.Config{
		Dial:        c.checkRemote,
		Timeout:     c.cfg.DispatchTimeout.D(),
		Interval:    interval,
		SilentAfter: silentProbes * interval,
		Changed: func(_ string, down bool) {
			if down {
				n.metrics.Cluster.MembersDown.Inc()
			}
			select {
			case c.liveChanged <- struct{}{}: // watchRing rebuilds the ring
			default:
			}
		},
		Logger: n.log.With("component", "liveness"),
	})
	if err != nil {
		return err
	}
	c.endpoints = n.system.EventStream.Subscribe(func(evt any) {
		if e, ok := evt.(*remote.EndpointTerminatedEvent); ok {
			c.suspectRemote(n.rings.Live(), e.Address)
		}
	})
	return nil
}

// stopLiveness undoes startLiveness.
func (c *clusterState) stopLiveness(system *actor.ActorSystem) {
	system.EventStream.Unsubscribe(c.endpoints)
	c.liveness.Close()
}

// suspectRemote checks the member whose actor remote is addr.
func (c *clusterState) suspectRemote(ring *cluster.Ring, addr string) {
	if ring == nil {
		return
	}
	for _, m := range ring.Members {
		if m.Remote == addr && m.Name != ring.Self {
			c.liveness.Suspect(m.Name, addr)
		}
	}
}

// dropReturned drops this replica's remote connections to the members
// that serve in next but did not in prev (cluster.Returned): protoactor
// removes an endpoint whose EndpointTerminatedEvent it is told of, closes
// its gRPC connection, and the next message to the member dials afresh.
// Without it, a replica cut off by a partition and back was asked over the
// connection made before the cut, which carried nothing until TCP gave
// up on it: seconds of SERVFAIL once the handoff grace ended. The
// liveness check the event also starts (startLiveness) finds the member
// serving.
//
// A member seen for the first time (one that joins) has no connection to
// drop: it is left alone, and not logged as back.
func (n *Node) dropReturned(prev, next *cluster.Ring) {
	if prev != nil {
		for _, m := range prev.Members {
			n.cluster.seenRemotes.Store(m.Remote, true)
		}
	}
	for _, addr := range cluster.Returned(prev, next) {
		if _, seen := n.cluster.seenRemotes.Load(addr); !seen {
			continue
		}
		n.log.Info("a member is back: its next question opens a new connection", "remote", addr)
		n.system.EventStream.Publish(&remote.EndpointTerminatedEvent{Address: addr})
	}
}

// suspectOwnersBefore checks the members that come before this replica in
// zoneKey's order: another replica asked this one for the zone, so it got
// no answer from them. A replica that is not in the order learns nothing.
func (c *clusterState) suspectOwnersBefore(ring *cluster.Ring, zoneKey string) {
	if ring == nil {
		return
	}
	order := ring.Order(zoneKey)
	i := slices.Index(order, ring.Self)
	if i < 0 {
		return
	}
	for _, name := range order[:i] {
		if m, ok := ring.Member(name); ok {
			c.liveness.Suspect(name, m.Remote)
		}
	}
}

// remoteCheck dials a member's remote port, completes the handshake (so a
// serving member sees a member's connection, not a stranger's) and waits
// for the first bytes of its gRPC server, which speaks first: only a
// process that runs answers that. A process being torn down may still
// accept for a moment, then resets: liveness checks it again.
func remoteCheck(guard *trust.Guard, bindHost string) func(ctx context.Context, addr string) error {
	var d net.Dialer
	if ip := net.ParseIP(bindHost); ip != nil && !ip.IsUnspecified() {
		d.LocalAddr = &net.TCPAddr{IP: ip}
	}
	return func(ctx context.Context, addr string) error {
		raw, err := d.DialContext(ctx, "tcp", addr)
		if err != nil {
			return err
		}
		conn, err := guard.ClientHandshake(ctx, addr, raw)
		if err != nil {
			return err
		}
		defer conn.Close()
		if deadline, ok := ctx.Deadline(); ok {
			conn.SetReadDeadline(deadline)
		}
		_, err = conn.Read(make([]byte, 1))
		return err
	}
}

// serving is membership's question about a member gossip declared dead:
// any holder of the key may declare any member dead, so one whose remote
// port still completes a handshake stays in the ring while it refutes.
// One that said it is leaving goes at once: memberlist cannot tell its
// leave from a death. Without a key the remote port proves nothing, and
// gossip's word stands.
func (c *clusterState) serving(ctx context.Context, m membership.Member) bool {
	role, addr := cluster.DecodeMeta(m.Meta)
	if role == cluster.RoleLeaving || addr == "" || len(c.keys) == 0 {
		return false
	}
	ctx, cancel := context.WithTimeout(ctx, c.cfg.DispatchTimeout.D())
	defer cancel()
	return c.checkRemote(ctx, addr) == nil
}

// gossipTiming is memberlist's timing: the profile of cluster.gossip with
// cluster.failureDetection's settings on top.
func gossipTiming(cc config.ClusterConfig) membership.Timing {
	t := membership.DefaultTiming()
	if cc.Gossip == "fast" {
		t = membership.FastTiming()
	}
	fd := cc.FailureDetection
	if fd == (config.FailureDetectionConfig{}) {
		return t
	}
	if fd.ProbeInterval > 0 {
		t.ProbeInterval = fd.ProbeInterval.D()
		t.ProbeTimeout = t.ProbeInterval / 2
	}
	if fd.ProbeTimeout > 0 {
		t.ProbeTimeout = fd.ProbeTimeout.D()
	}
	if fd.SuspicionMult > 0 {
		t.SuspicionMult = fd.SuspicionMult
	}
	// As in the profiles: a dead member's name is free again one
	// suspicion period after it was declared dead.
	t.DeadNodeReclaimTime = time.Duration(t.SuspicionMult) * t.ProbeInterval
	return t
}
