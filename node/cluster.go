package node

import (
	"context"
	"fmt"
	"net"
	"net/netip"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/asynkron/protoactor-go/actor"
	"github.com/asynkron/protoactor-go/eventstream"
	"github.com/asynkron/protoactor-go/remote"
	"github.com/miekg/dns"
	"google.golang.org/grpc"

	"github.com/shardns/shardns/actors/dispatch"
	"github.com/shardns/shardns/actors/zonemanager"
	"github.com/shardns/shardns/cache"
	"github.com/shardns/shardns/cluster"
	"github.com/shardns/shardns/cluster/liveness"
	"github.com/shardns/shardns/cluster/membership"
	"github.com/shardns/shardns/cluster/trust"
	"github.com/shardns/shardns/config"
	"github.com/shardns/shardns/query"
	"github.com/shardns/shardns/sources/kubeclient"
	"github.com/shardns/shardns/zone"
)

// clusterState is the sharding machinery of a clustered replica: actor
// remote, the dispatch actors, memberlist and the ring. It lives for the
// whole process; reloads keep it.
type clusterState struct {
	// seenRemotes are the actor remotes of every member of the rings
	// published so far (dropReturned).
	seenRemotes sync.Map
	cfg         config.ClusterConfig
	remote      *remote.Remote
	outbound    *trust.Outbound // bounds what remote queues for other processes
	remoteAddr  string          // advertised host:port of actor remote
	dispatch    *dispatch.Client
	handoff     *dispatch.Handoff    // hands zones to replicas that gain them
	coherence   *dispatch.Coherence  // tells askers what changed, takes what owners tell
	ring        *dispatch.RingClient // tells node-local processes the ring, and asks for it in one
	members     memberSource         // gossip, or in a node-local process the replicas' word
	feed        *ringFeed            // members in a node-local process; nil in a replica
	life        *cluster.Lifecycle   // pending, owner, leaving: what this process announces

	// What admits other processes (trust.go).
	client     *kubeclient.Client // joinService or a Secret; nil without
	keys       [][]byte           // replica keys, the first in use; none: plain text
	credential *trust.Credential  // a node-local process's, in place of keys
	peers      *trust.AddrSet     // every peers Service's endpoints; nil without joinService
	// replicaPeers are joinService's endpoints, each with the names its
	// pod may use: the only members that may own zones.
	replicaPeers atomic.Pointer[map[netip.Addr][]string]
	peerWatch    *kubeclient.PeerWatch
	// The replica's publication of the node-local credential.
	stopPublish context.CancelFunc
	publishing  sync.WaitGroup
	// peersChanged is signalled when the peers Services list other
	// addresses: membership's RejoinNow.
	peersChanged chan struct{}
	memberIPs    *trust.AddrSet // hosts of the live members, for the remote port
	seedIPs      *trust.AddrSet // a node-local process's cluster.replicas hosts
	rejections   *trust.Rejections

	// Members whose remote port refused a connection (cluster/liveness):
	// they own nothing in this replica's ring until they serve again or
	// gossip drops them.
	liveness    *liveness.Checker
	liveChanged chan struct{} // a member was found down or up again
	endpoints   *eventstream.Subscription
	// checkRemote dials a member's remote port and completes the
	// handshake: nil when its process serves.
	checkRemote func(ctx context.Context, addr string) error
}

// startCluster starts remote, dispatch and membership. The replica joins
// as a non-owner: it owns zones only once its sources have synced.
func (n *Node) startCluster() error {
	cc := n.cfg.Cluster
	host, port, err := remoteBind(cc.Remote)
	if err != nil {
		return fmt.Errorf("cluster.remote: %w", err)
	}
	adv := advertiseHost(cc)
	// remote.Start panics when it cannot listen: find out first. Port 0
	// takes the port the system gives (a node-local process on the host
	// network, which the process replacing it runs beside).
	probe, err := net.Listen("tcp", net.JoinHostPort(host, strconv.Itoa(port)))
	if err != nil {
		return fmt.Errorf("cluster.remote: %w", err)
	}
	port = probe.Addr().(*net.TCPAddr).Port
	probe.Close()
	c := &clusterState{cfg: cc, remoteAddr: net.JoinHostPort(adv, strconv.Itoa(port)), life: cluster.NewLifecycle(n.nodeLocal),
		memberIPs: &trust.AddrSet{}, seedIPs: &trust.AddrSet{}}
	c.seedIPs.Set(seedHosts(cc.Replicas))
	c.rejections = trust.NewRejections(func(reason string) {
		n.metrics.Cluster.RejectedMembers.WithLabelValues(reason).Inc()
	}, n.log.With("component", "trust"), time.Now)
	if err := n.startTrust(c); err != nil {
		return err
	}
	guard, err := trust.NewGuard(trust.GuardConfig{Keys: c.keys, Credential: c.credential, Admitted: c.remoteAdmitted,
		Routes: dispatch.Routes(n.nodeLocal), Rejections: c.rejections,
		Limits: trust.Limits{MessageBytes: dispatch.MaxMessageBytes}})
	if err != nil {
		c.stopTrust()
		return fmt.Errorf("cluster: %w", err)
	}
	c.outbound = trust.NewOutbound(trust.OutboundLimits{}, c.rejections)
	dial := append(remoteDialOptions(guard, host, adv), c.outbound.DialOptions()...)
	c.remote = remote.NewRemote(n.system, remote.Configure(host, port, remote.WithAdvertisedHost(c.remoteAddr),
		remote.WithServerOptions(append(guard.ServerOptions(), grpc.ReadBufferSize(remoteBuffer), grpc.WriteBufferSize(remoteBuffer))...),
		remote.WithDialOptions(append(dial, grpc.WithReadBufferSize(remoteBuffer), grpc.WithWriteBufferSize(remoteBuffer))...),
		remote.WithEndpointWriterQueueSize(endpointWriterQueue), remote.WithEndpointWriterBatchSize(writerBatch(n.nodeLocal))))
	c.outbound.Attach(n.system, c.remote)
	c.remote.Start()
	timing := gossipTiming(cc)
	if err := n.startLiveness(c, guard, host, timing.ProbeInterval); err != nil {
		return err
	}
	counters := dispatch.Counters{MailboxDropped: n.metrics.Cluster.MailboxDropped, RepliesDropped: n.metrics.Cluster.RepliesDropped}
	c.dispatch, err = dispatch.Start(n.system, func() (*zone.Config, zone.Reader) {
		if core := n.core.Load(); core != nil && core.manager != nil {
			return core.answer, core.table
		}
		return nil, nil // starting, or node-local: no zone is served here
	}, func(zoneKey string) { c.suspectOwnersBefore(n.rings.Live(), zoneKey) }, counters)
	if err != nil {
		c.stopLiveness(n.system)
		return err
	}
	n.fresh = query.NewFreshness(0, time.Now)
	if err := n.startCoherence(c); err != nil {
		c.stopLiveness(n.system)
		return fmt.Errorf("cluster: %w", err)
	}
	c.handoff, err = dispatch.StartHandoff(n.system, func() *actor.PID {
		if core := n.core.Load(); core != nil {
			return core.manager // nil in a node-local process: nothing to hand over
		}
		return nil
	}, counters)
	if err != nil {
		c.stopLiveness(n.system)
		return err
	}
	if c.ring, err = dispatch.StartRing(n.system, n.rings.Live, counters); err != nil {
		c.stopLiveness(n.system)
		return err
	}
	c.ring.SetMeshSource(n.meshDirectory, n.metrics.Kubernetes.MeshNamesWithheld.Inc)
	if n.nodeLocal {
		c.feed = n.startRingFeed(c, timing.ProbeInterval)
		c.members = c.feed
	} else if c.members, err = n.startMembership(c, adv, timing); err != nil {
		c.stopLiveness(n.system)
		return err
	}
	n.cluster = c
	n.rings.Init(n.buildRing())
	return nil
}

// startMembership joins a replica to the gossip ring.
func (n *Node) startMembership(c *clusterState, adv string, timing membership.Timing) (*membership.Membership, error) {
	cc := c.cfg
	mc := membership.DefaultConfig()
	mc.NodeName, mc.Bind, mc.Seeds, mc.Label = n.name, cc.Bind, cc.Join, cc.Label
	mc.Logger = n.log.With("component", "membership")
	mc.Meta = cluster.EncodeMeta(c.life.Role(), c.remoteAddr) // pending until it announces
	mc.SecretKeys = c.keys
	mc.Admit, mc.Rejected = c.admit, c.rejections.Record
	mc.RejoinNow = c.peersChanged // nil without joinService
	if c.peers != nil {
		// Gossip streams only from the peers Services' endpoints (and the
		// members and seeds): memberlist reads a stream whole before the
		// key can refuse it.
		mc.AdmitSource = c.peers.Has
	}
	mc.Serving = c.serving
	switch {
	case cc.Advertise != "":
		mc.Advertise = gossipAdvertise(cc)
	case bindUnspecified(cc.Bind):
		// Gossip is advertised on the host remote is: admission checks
		// that a member's remote address is on its gossip host.
		mc.Advertise = net.JoinHostPort(adv, "0")
	}
	mc.Timing = timing
	if cc.JoinService != "" {
		_, gossipPort, _ := remoteBind(cc.Bind)
		mc.SeedsFunc = kubeclient.PeerSeeds(c.client, cc.JoinService, gossipPort)
	}
	return membership.Start(mc)
}

// reachedOwners reports whether a node-local process has asked every
// owner of its ring once (ringFeed.reachedOwners).
func (c *clusterState) reachedOwners() bool {
	return c != nil && c.feed != nil && c.feed.reachedOwners()
}

// startRingFeed has a node-local process follow the ring the replicas
// tell it, asking them every probe interval.
func (n *Node) startRingFeed(c *clusterState, interval time.Duration) *ringFeed {
	cc := c.cfg
	seeds := func(context.Context) ([]string, error) { return cc.Replicas, nil }
	if cc.JoinService != "" {
		_, remotePort, _ := remoteBind(cc.Remote)
		seeds = kubeclient.PeerRemotes(c.client, cc.JoinService, remotePort)
	}
	f := newRingFeed(c.ring, seeds, interval, cc.DispatchTimeout.D(), n.log.With("component", "ring"))
	f.start()
	return f
}

// buildRing is the ring of the current live members; those found down
// own nothing in it.
func (n *Node) buildRing() *cluster.Ring {
	members := n.cluster.members.Members()
	remotes := make(map[string]string, len(members))
	for _, m := range members {
		_, remotes[m.Name] = cluster.DecodeMeta(m.Meta)
	}
	n.cluster.liveness.Retain(remotes)
	ips := make([]netip.Addr, 0, len(members))
	for _, m := range members {
		if ap, err := netip.ParseAddrPort(m.Addr); err == nil {
			ips = append(ips, ap.Addr())
		}
	}
	n.cluster.memberIPs.Set(ips)
	return cluster.BuildRing(cluster.RingBuild{Self: n.name, SelfRemote: n.cluster.remoteAddr,
		Replication: *n.cluster.cfg.ReplicationFactor, LastStanding: n.cluster.life.LastStanding()}, n.candidates(members))
}

// candidates are members with what this process found out about each:
// whether it may own zones (trust.go) and whether its remote port was
// found down (liveness.go). Self is neither checked nor read.
func (n *Node) candidates(members []membership.Member) []cluster.Candidate {
	out := make([]cluster.Candidate, 0, len(members))
	for _, m := range members {
		role, addr := cluster.DecodeMeta(m.Meta)
		c := cluster.Candidate{Name: m.Name, Role: role, Remote: addr}
		if m.Name != n.name {
			c.Down = n.cluster.liveness.Down(m.Name, addr)
			c.MayOwn = n.cluster.mayOwn(m.Addr)
		}
		out = append(out, c)
	}
	return out
}

// endpointWriterQueue is the first size of the queue of messages to one
// peer. The queue grows as it must; protoactor-go's default, a million,
// is allocated whole (16 MB) for each peer a replica sends to: every other
// replica and every node-local cache it answers. With 6 replicas that was
// 80 MB of each replica's RSS (TestShardedIngest).
const endpointWriterQueue = 1024

// writerBatch is how many messages protoactor puts in one batch to a
// peer: a node-local process's batches are questions, which replicas take
// up to trust.DefaultQuestionBytes at once; replicas keep protoactor's
// default.
func writerBatch(nodeLocal bool) int {
	if nodeLocal {
		return trust.NodeLocalBatch
	}
	return 1000
}

// remoteBuffer sizes the read and the write buffer of each actor remote
// connection, which gRPC keeps for the connection's life, 32 KB each by
// default: with six replicas a replica holds ten connections, 640 KB of
// buffers. Questions and answers are a few hundred bytes; a zone handed
// over is larger, and with TLS between replicas (cluster keys) a read
// fills with one record at a time, at most 16 KB, whatever the buffer.
const remoteBuffer = 16 << 10

// watchRing rebuilds the ring on every membership change and tells the
// serving core; once the core has synced, it announces this replica as an
// owner.
func (n *Node) watchRing() {
	changes := n.cluster.members.Subscribe()
	// Until the replica has announced that it owns zones, check every
	// 100 ms whether it may; then stop: ten wakeups a second for nothing
	// were the most CPU a replica of three spent idle outside gossip.
	tick := time.NewTicker(100 * time.Millisecond)
	defer tick.Stop()
	ticks := tick.C
	for {
		select {
		case <-n.stopWatch:
			return
		case _, ok := <-changes:
			if !ok {
				return
			}
			n.publishRing()
		case <-n.cluster.liveChanged:
			n.publishRing()
		case <-ticks:
			if n.maybeAnnounce() {
				tick.Stop()
				ticks = nil
			}
		}
	}
}

func (n *Node) publishRing() {
	r := n.buildRing()
	prev := n.rings.Live()
	n.dropReturned(prev, r)
	n.rings.SetLive(r)
	n.ringMoved(prev, r) // after the store: questions from now on go to the new owners
	if n.widening.Load() {
		// Its watches are being widened before it leaves: zones it would
		// gain from a replica leaving meanwhile could not load yet, while
		// that replica still answers them through its lameduck. The
		// zones keep their owners until the widening ends
		// (watchEverything has the ring published again then).
		return
	}
	if !n.rings.Place(r) {
		return
	}
	if c := n.core.Load(); c != nil && c.manager != nil {
		n.system.Root.Send(c.manager, &zonemanager.RingChanged{Ring: r})
	}
}

// othersStay reports whether another replica owns zones, is not found
// down and has not said it is leaving (cluster.OthersStay).
func (n *Node) othersStay() bool {
	return cluster.OthersStay(n.name, n.candidates(n.cluster.members.Members()))
}

// lastToLeave says, in this replica's metadata, that it is leaving, and
// waits up to settle for the others' word: it reports true at once when
// no other replica stays (every replica is stopping, as when the
// StatefulSet is deleted or scaled to zero), false when one still stays
// after settle (a scale-in, a rolling restart). Replicas stopped together
// each see the others say so within the settle, a few gossip rounds.
func (n *Node) lastToLeave(settle time.Duration) bool {
	deadline := time.Now().Add(settle)
	n.sayLeaving(settle) // waits while the word goes out, as the others' comes in
	tick := time.NewTicker(50 * time.Millisecond)
	defer tick.Stop()
	for n.othersStay() {
		if !time.Now().Before(deadline) {
			return false
		}
		<-tick.C
	}
	return true
}

// sayLeaving tells the others, in this replica's metadata, that it is
// leaving, unless it has or owns nothing (cluster.Lifecycle.SayLeaving);
// it waits up to timeout for the word to go out.
func (n *Node) sayLeaving(timeout time.Duration) {
	if !n.cluster.life.SayLeaving() {
		return
	}
	if err := n.cluster.members.SetMeta(cluster.EncodeMeta(n.cluster.life.Role(), n.cluster.remoteAddr), timeout); err != nil {
		n.log.Warn("telling the others this replica is leaving", "err", err)
	}
}

// remoteOf is the actor-remote address of member (cluster.RingState.Remote).
// A replica widening its watches before it leaves keeps placing zones by
// the ring it had, a replica loading zones it gained from one that left
// asks that one for them meanwhile, and replicas that left answer in
// their lameduck.
func (n *Node) remoteOf(member string) (string, bool) { return n.rings.Remote(member) }

// maybeAnnounce makes this replica an owner once its sources synced; done
// says it is one, or never will be (a node-local cache), so there is no
// need to ask again.
func (n *Node) maybeAnnounce() (done bool) {
	c := n.core.Load()
	switch n.cluster.life.NextAnnounce(c != nil && c.synced.Load()) {
	case cluster.AnnounceDone:
		return true
	case cluster.AnnounceWait:
		return false
	}
	// The zones the announcement gains load after the zone manager sees
	// the new ring; until then the replica must not look ready, or it
	// would be sent queries for zones it does not hold yet. The manager
	// sets loaded again once they have loaded.
	c.loaded.Store(false)
	if err := n.cluster.members.SetMeta(cluster.EncodeMeta(cluster.RoleOwner, n.cluster.remoteAddr), 5*time.Second); err != nil {
		c.loaded.Store(true)
		n.log.Warn("announcing ownership", "err", err)
		return false
	}
	n.cluster.life.Announced()
	n.log.Info("sources synced: this replica now owns zones", "node", n.name)
	n.publishRing()
	return true
}

// announcedOwner reports whether the replica owns zones (always true
// outside a cluster).
func (n *Node) announcedOwner() bool {
	return n.cluster == nil || n.cluster.life.Owner()
}

// clusterHandler is the query path's access to the other replicas.
func (n *Node) clusterHandler(c *config.Config) *query.Cluster {
	if n.cluster == nil {
		return nil
	}
	m := n.metrics.Cluster
	owners := ownersCache(c)
	n.fresh.Keep(owners.MaxLife())
	return &query.Cluster{
		Ask: func(ctx context.Context, member, zoneKey, name string, qtype uint16, topo zone.Topology) (*dns.Msg, int, error) {
			return n.askFor(ctx, member, zoneKey, name, qtype, topo, "")
		},
		AskFor:  n.askFor,
		Cache:   owners,
		Fresh:   n.fresh,
		Timeout: c.Cluster.DispatchTimeout.D(), Attempts: 3, Budget: c.Cluster.QuestionTimeout.D(),
		MaxInFlight: int64(c.Forward.MaxConcurrent),
		Now:         time.Now,
		Observe: func(member string, took time.Duration, err error) {
			result := "ok"
			if err != nil {
				result = "error"
			}
			m.Dispatches.WithLabelValues(result).Inc()
			m.DispatchDuration.Observe(took.Seconds())
			m.OwnerDispatches.WithLabelValues(member, result).Inc()
			if err == nil {
				m.OwnerDuration.WithLabelValues(member).Observe(took.Seconds())
			}
		},
		CacheResult: func(result string) {
			if result == "hit" {
				m.CacheHits.Inc()
			} else {
				m.CacheMisses.Inc()
			}
		},
	}
}

// ownersStale is how long past its TTL an owner's answer may be given
// when no owner answers in time (RFC 8767) and cache.serveStale does not
// say: long enough to bridge until a silent owner is found down and its
// zones answered by another replica (seconds), short enough that an
// answer no owner could update meanwhile is not kept for long.
const ownersStale = time.Minute

// ownersCache is a cache of the owners' answers bounded by c's cache
// section. Its answers serve stale for cache.serveStale, or ownersStale;
// an owner's word that one is outdated removes it, so it never serves.
func ownersCache(c *config.Config) *cache.Cache {
	sec := func(s int) time.Duration { return time.Duration(s) * time.Second }
	stale := c.Cache.ServeStale.D()
	if stale <= 0 {
		stale = ownersStale
	}
	return cache.New(cache.Config{Size: c.Cache.Size, MaxBytes: c.Cache.Bytes(), SuccessMaxTTL: sec(c.Cache.MaxTTL),
		DenialMaxTTL: sec(c.Cache.DenialMaxTTL), ServeStale: stale})
}

// stopCluster leaves the ring, so the others take over at once, then
// shuts gossip and remote down.
func (n *Node) leaveCluster() {
	if n.cluster == nil {
		return
	}
	// The others let a member that said so go at once; one that did not,
	// they keep while its remote port serves (clusterState.serving).
	n.sayLeaving(time.Second)
	if err := n.cluster.members.Leave(2 * time.Second); err != nil {
		n.log.Warn("leaving the ring", "err", err)
	}
}

func (n *Node) stopCluster() {
	if n.cluster == nil {
		return
	}
	n.cluster.stopLiveness(n.system)
	n.cluster.coherence.Stop()
	n.cluster.members.Close()
	n.cluster.remote.Shutdown(false)
	n.cluster.outbound.Detach()
	n.cluster.stopTrust()
}

func remoteBind(addr string) (string, int, error) {
	host, p, err := net.SplitHostPort(addr)
	if err != nil {
		return "", 0, err
	}
	port, err := config.ParsePort(p)
	return host, int(port), err
}

// advertiseHost is the host other replicas reach this one at: the
// configured advertise host, the gossip or else the remote bind host, or
// non-loopback address.
func advertiseHost(cc config.ClusterConfig) string {
	if cc.Advertise != "" {
		if h, _, err := net.SplitHostPort(cc.Advertise); err == nil {
			return h
		}
		return cc.Advertise
	}
	// The gossip bind host first (a replica's gossip and remote are
	// advertised on one host), then the remote one's: all a node-local
	// process, which does not gossip, listens on.
	for _, hostPort := range []string{cc.Bind, cc.Remote} {
		if h, _, err := net.SplitHostPort(hostPort); err == nil {
			if a, err := netip.ParseAddr(h); err == nil && !a.IsUnspecified() {
				return h
			}
		}
	}
	addrs, _ := net.InterfaceAddrs()
	for _, a := range addrs {
		// Not link-local either: a node-local process on the host network
		// listens on 169.254.20.10, which no other node can reach.
		if p, err := netip.ParsePrefix(a.String()); err == nil && !p.Addr().IsLoopback() && p.Addr().Is4() &&
			!p.Addr().IsLinkLocalUnicast() {
			return p.Addr().String()
		}
	}
	return "127.0.0.1"
}

// gossipAdvertise is cluster.advertise as host:port for memberlist.
func gossipAdvertise(cc config.ClusterConfig) string {
	if _, _, err := net.SplitHostPort(cc.Advertise); err == nil {
		return cc.Advertise
	}
	_, port, _ := net.SplitHostPort(cc.Bind)
	return net.JoinHostPort(cc.Advertise, port)
}

// GossipAddr is this replica's memberlist address, or "" outside a cluster.
func (n *Node) GossipAddr() string {
	if n.cluster == nil {
		return ""
	}
	return n.cluster.members.LocalAddr()
}
