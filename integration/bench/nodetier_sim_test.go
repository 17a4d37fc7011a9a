package bench

import (
	"context"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"net"
	"net/netip"
	"slices"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/asynkron/protoactor-go/actor"
	"github.com/asynkron/protoactor-go/remote"
	"github.com/miekg/dns"
	"github.com/prometheus/client_golang/prometheus"
	"google.golang.org/grpc"

	"github.com/shardns/shardns/actors/dispatch"
	"github.com/shardns/shardns/cluster"
	"github.com/shardns/shardns/cluster/trust"
	"github.com/shardns/shardns/cluster/wire"
	"github.com/shardns/shardns/integration/harness"
)

// A simulated node-local cache, as the replicas see one: an actor system
// of its own whose remote listens on a loopback address of its own (so
// the replicas' per-address limits apply to it as to a node), behind the
// same guard and credential as a node-local process. It polls the ring
// every probe interval as node.ringFeed does, asks the owners for the
// names its clients ask when its cache misses (saying it takes
// invalidations, when the bench says so), and counts the ZoneChanged
// messages its "invalidate" actor receives. Its cache is the bench's
// model of a node-local cache: an answer is kept for its TTL, or until an
// owner says its name changed.

// simConfig is what every simulated node shares.
type simConfig struct {
	cred     trust.Credential
	replicas []string      // the replicas' remote addresses, asked for the ring first
	rf       int           // the ring's replication factor
	probe    time.Duration // how often the ring is asked for, and each name by a client
	ttl      time.Duration // how long an answer without records is cached
	timeout  time.Duration // how long a question or a ring request may take
	// invalidations says the nodes' questions ask for invalidations;
	// switched between windows.
	invalidations atomic.Bool
	// patched is when the churn last changed each name (zone key + "/" +
	// label), for the time from a change to its invalidation.
	patched  sync.Map
	counters dispatch.Counters
	stats    simStats
}

// simStats are the simulated nodes' counts since the last reset.
type simStats struct {
	polls, pollErrors             atomic.Int64
	asked, answered, unserved     atomic.Int64
	timeouts                      atomic.Int64
	hits, misses                  atomic.Int64
	changed, changes, gaps, drops atomic.Int64
	mu                            sync.Mutex
	latencies                     []time.Duration // from a change in the API to a node told of it
}

// snapshot copies s's counts and latencies and resets them.
func (s *simStats) snapshot() simCounts {
	c := simCounts{polls: s.polls.Swap(0), pollErrors: s.pollErrors.Swap(0), asked: s.asked.Swap(0),
		answered: s.answered.Swap(0), unserved: s.unserved.Swap(0), timeouts: s.timeouts.Swap(0),
		hits: s.hits.Swap(0), misses: s.misses.Swap(0), changed: s.changed.Swap(0), changes: s.changes.Swap(0),
		gaps: s.gaps.Swap(0), drops: s.drops.Swap(0)}
	s.mu.Lock()
	c.latencies, s.latencies = s.latencies, nil
	s.mu.Unlock()
	slices.Sort(c.latencies)
	return c
}

func (s *simStats) observe(d time.Duration) {
	s.mu.Lock()
	if len(s.latencies) < 2_000_000 {
		s.latencies = append(s.latencies, d)
	}
	s.mu.Unlock()
}

// simCounts are simStats' counts over one window.
type simCounts struct {
	polls, pollErrors, asked, answered, unserved, timeouts int64
	hits, misses, changed, changes, gaps, drops            int64
	latencies                                              []time.Duration
}

func (c simCounts) quantile(q float64) time.Duration {
	if len(c.latencies) == 0 {
		return 0
	}
	return c.latencies[min(len(c.latencies)-1, int(q*float64(len(c.latencies))))]
}

func (c simCounts) hitRate() float64 {
	if c.hits+c.misses == 0 {
		return 0
	}
	return float64(c.hits) / float64(c.hits+c.misses)
}

// simName is a name a simulated node's clients ask.
type simName struct{ zone, label, fqdn string }

// simNode is one simulated node-local cache.
type simNode struct {
	cfg     *simConfig
	system  *actor.ActorSystem
	remote  *remote.Remote
	ring    *dispatch.RingClient
	replies *actor.PID
	names   []simName

	mu      sync.Mutex
	until   []time.Time       // when each name's cached answer expires (zero: not cached)
	warm    []bool            // each name was answered once
	asking  map[uint64]int    // question id → name index
	sentAt  []time.Time       // when each name was asked (zero: not being asked)
	owner   map[string]string // zone key → remote address of its first owner
	version uint64            // the ring held
	last    string            // the replica that told the ring last
	seqs    map[uint64]uint64 // owner epoch → the last seq it sent
	stop    chan struct{}
	done    chan struct{}
}

func newSimCounters() dispatch.Counters {
	return dispatch.Counters{
		MailboxDropped: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "mailbox_dropped"}, []string{"mailbox"}),
		RepliesDropped: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "replies_dropped"}, []string{"reason"}),
	}
}

// startSimNode starts a simulated node at ip asking names.
func startSimNode(cfg *simConfig, ip string, names []simName) (*simNode, error) {
	l, err := net.Listen("tcp", net.JoinHostPort(ip, "0")) // remote.Start panics when it cannot listen
	if err != nil {
		return nil, err
	}
	port := l.Addr().(*net.TCPAddr).Port
	l.Close()
	n := &simNode{cfg: cfg, names: names, until: make([]time.Time, len(names)), warm: make([]bool, len(names)), sentAt: make([]time.Time, len(names)),
		asking: map[uint64]int{}, owner: map[string]string{}, seqs: map[uint64]uint64{},
		stop: make(chan struct{}), done: make(chan struct{})}
	n.system = actor.NewActorSystem(actor.WithLoggerFactory(func(*actor.ActorSystem) *slog.Logger { return harness.DiscardLog }))
	rejections := trust.NewRejections(func(string) {}, harness.DiscardLog, time.Now)
	guard, err := trust.NewGuard(trust.GuardConfig{Credential: &cfg.cred, Admitted: func(netip.Addr) bool { return true },
		Routes: dispatch.Routes(true), Rejections: rejections, Limits: trust.Limits{MessageBytes: dispatch.MaxMessageBytes}})
	if err != nil {
		return nil, err
	}
	outbound := trust.NewOutbound(trust.OutboundLimits{}, rejections)
	from := &net.TCPAddr{IP: net.ParseIP(ip)} // the replicas pin senders to the connection's address
	dial := append(guard.DialOptions(), grpc.WithContextDialer(func(ctx context.Context, addr string) (net.Conn, error) {
		d := net.Dialer{LocalAddr: from}
		return d.DialContext(ctx, "tcp", addr)
	}), grpc.WithReadBufferSize(16<<10), grpc.WithWriteBufferSize(16<<10))
	n.remote = remote.NewRemote(n.system, remote.Configure(ip, port,
		remote.WithServerOptions(append(guard.ServerOptions(), grpc.ReadBufferSize(16<<10), grpc.WriteBufferSize(16<<10))...),
		remote.WithDialOptions(append(dial, outbound.DialOptions()...)...),
		remote.WithEndpointWriterQueueSize(1024), remote.WithEndpointWriterBatchSize(trust.NodeLocalBatch)))
	outbound.Attach(n.system, n.remote)
	n.remote.Start()
	if n.ring, err = dispatch.StartRing(n.system, func() *cluster.Ring { return nil }, cfg.counters); err != nil {
		return nil, err
	}
	if n.replies, err = n.system.Root.SpawnNamed(actor.PropsFromFunc(n.onReply), "dispatch-replies"); err != nil {
		return nil, err
	}
	if _, err = n.system.Root.SpawnNamed(actor.PropsFromFunc(n.onChanged), dispatch.InvalidateName); err != nil {
		return nil, err
	}
	go n.run()
	return n, nil
}

// run polls the ring and has the clients ask every probe interval,
// starting at a random point of the first, as nodes started at different
// times do.
func (n *simNode) run() {
	defer close(n.done)
	select {
	case <-time.After(rand.N(n.cfg.probe)):
	case <-n.stop:
		return
	}
	tick := time.NewTicker(n.cfg.probe)
	defer tick.Stop()
	for {
		n.poll()
		n.clients()
		select {
		case <-n.stop:
			return
		case <-tick.C:
		}
	}
}

// poll asks the replica that told the ring last (then the others) for it.
func (n *simNode) poll() {
	n.mu.Lock()
	known, targets := n.version, append([]string{n.last}, n.cfg.replicas...)
	n.mu.Unlock()
	for _, addr := range targets {
		if addr == "" {
			continue
		}
		n.cfg.stats.polls.Add(1)
		ctx, cancel := context.WithTimeout(context.Background(), n.cfg.timeout)
		version, members, err := n.ring.Fetch(ctx, addr, known)
		cancel()
		if err != nil {
			n.cfg.stats.pollErrors.Add(1)
			continue
		}
		n.mu.Lock()
		n.last = addr
		if members != nil {
			n.version = version
			n.placeLocked(members)
		}
		n.mu.Unlock()
		return
	}
}

// placeLocked finds the first owner of each zone the clients ask about.
func (n *simNode) placeLocked(members []*wire.RingMember) {
	var ms []cluster.Member
	for _, m := range members {
		ms = append(ms, cluster.Member{Name: m.Name, Remote: m.Remote, Owner: m.Owner, Pending: m.Pending})
	}
	r := cluster.NewRing("", ms, n.cfg.rf)
	clear(n.owner)
	for _, name := range n.names {
		if order := r.Order(name.zone); len(order) > 0 {
			m, _ := r.Member(order[0])
			n.owner[name.zone] = m.Remote
		}
	}
}

// clients ask each name once: a cached answer is a hit, else the node
// asks the zone's owner (unless it is asking already).
func (n *simNode) clients() {
	now := time.Now()
	n.mu.Lock()
	defer n.mu.Unlock()
	for i, name := range n.names {
		if now.Before(n.until[i]) {
			n.cfg.stats.hits.Add(1)
			continue
		}
		n.cfg.stats.misses.Add(1)
		if !n.sentAt[i].IsZero() && now.Sub(n.sentAt[i]) < n.cfg.timeout {
			continue
		}
		if !n.sentAt[i].IsZero() {
			n.cfg.stats.timeouts.Add(1)
		}
		owner, ok := n.owner[name.zone]
		if !ok {
			continue
		}
		id := rand.Uint64()
		n.asking[id], n.sentAt[i] = i, now
		n.cfg.stats.asked.Add(1)
		n.system.Root.RequestWithCustomSender(actor.NewPID(owner, dispatch.ServerName), &wire.ZoneQuery{Id: id,
			Zone: name.zone, Name: name.fqdn, Qtype: uint32(dns.TypeA), Invalidations: n.cfg.invalidations.Load()}, n.replies)
	}
}

// onReply caches an owner's answer for the TTL.
func (n *simNode) onReply(ctx actor.Context) {
	r, ok := ctx.Message().(*wire.ZoneReply)
	if !ok {
		return
	}
	n.mu.Lock()
	defer n.mu.Unlock()
	i, ok := n.asking[r.Id]
	if !ok {
		return
	}
	delete(n.asking, r.Id)
	n.sentAt[i] = time.Time{}
	if !r.Served {
		n.cfg.stats.unserved.Add(1)
		return
	}
	n.cfg.stats.answered.Add(1)
	life := answerLife(r.Msg, n.cfg.ttl)
	if !n.warm[i] {
		// A node that has run a while holds answers of every age: its
		// first answers are kept for a random part of the TTL, so that
		// the nodes' questions do not all fall due together.
		n.warm[i], life = true, rand.N(life)
	}
	n.until[i] = time.Now().Add(life)
}

// answerLife is how long a node keeps the packed answer msg: its
// records' least TTL, or ttl when it has none.
func answerLife(msg []byte, ttl time.Duration) time.Duration {
	m := new(dns.Msg)
	if m.Unpack(msg) != nil || len(m.Answer) == 0 {
		return ttl
	}
	least := m.Answer[0].Header().Ttl
	for _, rr := range m.Answer[1:] {
		least = min(least, rr.Header().Ttl)
	}
	return max(time.Duration(least)*time.Second, time.Second)
}

// onChanged drops the cached names an owner says changed (every name,
// when a message of that owner was lost), and records how long after the
// churn's change each changed label was told.
func (n *simNode) onChanged(ctx actor.Context) {
	m, ok := ctx.Message().(*wire.ZoneChanged)
	if !ok {
		return
	}
	now := time.Now()
	st := &n.cfg.stats
	st.changed.Add(1)
	n.mu.Lock()
	defer n.mu.Unlock()
	last, known := n.seqs[m.Epoch]
	n.seqs[m.Epoch] = m.Seq
	if known && m.Seq != last+1 && m.Seq != 1 {
		st.gaps.Add(1)
		n.dropLocked(func(simName) bool { return true })
	}
	for _, c := range m.Changes {
		st.changes.Add(int64(max(1, len(c.Labels))))
		n.dropLocked(func(s simName) bool { return s.zone == c.Zone && (c.All || slices.Contains(c.Labels, s.label)) })
		for _, l := range c.Labels {
			if at, ok := n.cfg.patched.Load(c.Zone + "/" + l); ok && now.Sub(at.(time.Time)) < 10*time.Second {
				st.observe(now.Sub(at.(time.Time)))
			}
		}
	}
}

func (n *simNode) dropLocked(match func(simName) bool) {
	for i, s := range n.names {
		if match(s) && !n.until[i].IsZero() {
			n.until[i] = time.Time{}
			n.cfg.stats.drops.Add(1)
		}
	}
}

// close stops the node's polls and questions, and its remote.
func (n *simNode) close() {
	close(n.stop)
	<-n.done
	n.remote.Shutdown(false)
	n.system.Shutdown()
}

// simIP is the loopback address of simulated node i: 127.10.0.1 on,
// never a replica's 127.0.0.1.
func simIP(i int) string {
	return "127." + strconv.Itoa(10+i/62500) + "." + strconv.Itoa(i/250%250) + "." + strconv.Itoa(i%250+1)
}

// simNames are the names the clients of node i ask: two services in each
// of five namespaces, spread over the bench's services.
func simNames(i, namespaces, services int) []simName {
	var out []simName
	perNS := services / namespaces
	for z := range 5 {
		ns := (i*7 + z*13) % namespaces
		for k := range 2 {
			svc := ns + ((i+k*perNS/2)%perNS)*namespaces // bench service numbers of namespace ns
			zone := fmt.Sprintf("bench%d.svc.cluster.local.", ns)
			label := fmt.Sprintf("svc%d", svc)
			out = append(out, simName{zone: zone, label: label, fqdn: label + "." + zone})
		}
	}
	return out
}
