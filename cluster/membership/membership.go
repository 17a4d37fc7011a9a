// Package membership tells a node which replicas are alive. It wraps
// hashicorp/memberlist (SWIM gossip and failure detection), the one
// membership source of the cluster: ownership is computed from its member
// list.
//
// On top of memberlist it adds what a StatefulSet needs: seeds that are
// re-joined periodically (memberlist never re-dials a peer it declared
// dead, so without this a healed partition stays split), a name that can
// come back at a new address after a restart, a cluster label, optional
// encryption, and memberlist's log routed into slog.
package membership

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/netip"
	"slices"
	"sort"
	"sync"
	"sync/atomic"
	"time"

	"github.com/hashicorp/memberlist"
)

// Member is one live node as this node sees it.
type Member struct {
	// Name is the member's NodeName.
	Name string
	// Addr is the member's gossip address, ip:port.
	Addr string
	// Meta is the member's Config.Meta.
	Meta []byte
}

// Membership is this node's view of the cluster. Its methods are safe for
// concurrent use.
type Membership struct {
	cfg  Config
	meta atomic.Pointer[[]byte] // served to memberlist as this node's metadata
	list *memberlist.Memberlist
	// joiner is list, for the disputes that memberlist's events may start
	// before Start has set list.
	joiner atomic.Pointer[memberlist.Memberlist]
	addr   string // own gossip address, ip:port
	port   string // own gossip port: the default port of seeds

	stopRejoin context.CancelFunc // ends the rejoin loop (Leave, Close)
	stopDials  context.CancelFunc // aborts dials in flight (Close)
	rejoinDone chan struct{}

	lifeMu sync.Mutex // serialises Leave and Close; held while calling memberlist
	closed bool

	// mu guards what the delegates write. memberlist calls them under its
	// node lock, so mu is never held while calling memberlist.
	mu         sync.Mutex
	members    map[string]Member // copied from memberlist's events
	holders    map[string]string // gossip address → the member's name there
	subs       []chan struct{}
	subsClosed bool
	conflicts  map[string]string // address → name claimed from it
	disputes   disputes          // members gossip declared dead that may serve

	seedHosts atomic.Pointer[map[netip.Addr]struct{}] // hosts of the seeds last resolved
}

// ErrClosed is returned by Leave after Close.
var ErrClosed = errors.New("membership: closed")

// Start binds the gossip sockets, joins the seeds and starts re-joining
// them every RejoinInterval. Unreachable seeds are not an error: the first
// replica of a cluster starts alone and the others find it later. Start
// may take up to TCPTimeout for each seed that drops packets.
func Start(cfg Config) (*Membership, error) {
	if err := cfg.validate(); err != nil {
		return nil, err
	}
	bindIP, bindPort, _ := splitBind(cfg.Bind)
	advIP, advPort, _ := splitAdvertise(cfg.Advertise)
	stdLog := newStdLogger(cfg.Logger, cfg.Rejected)
	dialCtx, stopDials := context.WithCancel(context.Background())
	m := &Membership{cfg: cfg, stopDials: stopDials, rejoinDone: make(chan struct{}),
		members: make(map[string]Member), holders: make(map[string]string), conflicts: make(map[string]string)}
	m.disputes.start()
	var admitSource func(netip.Addr) bool
	if cfg.AdmitSource != nil {
		admitSource = m.sourceAdmitted
	}
	gate := newStreamGate(cfg.Streams, admitSource, cfg.Rejected)
	tr, err := listen(dialCtx, bindIP, bindPort, stdLog, cfg.blocked, gate)
	if err != nil {
		stopDials()
		return nil, err
	}
	bound := tr.GetAutoBindPort()
	if advPort == 0 {
		advPort = bound
	}

	mc := memberlist.DefaultLANConfig()
	mc.Name = cfg.NodeName
	mc.Transport = tr
	mc.BindAddr, mc.BindPort = bindIP, bound
	mc.AdvertiseAddr, mc.AdvertisePort = advIP, advPort
	mc.Label = cfg.Label
	// Gossip packets are a few hundred bytes, and compressing each cost a
	// fresh LZW writer (over 0.8 MB/s of garbage at gossip: fast, idle).
	// A receiver decompresses what a peer compressed whatever this says,
	// so members of either setting gossip together.
	mc.EnableCompression = false
	if len(cfg.SecretKeys) > 0 {
		if mc.Keyring, err = memberlist.NewKeyring(cfg.SecretKeys, cfg.SecretKeys[0]); err != nil {
			stopDials()
			_ = tr.Shutdown()
			return nil, fmt.Errorf("membership: %w", err)
		}
	}
	mc.Logger = stdLog
	initial := slices.Clone(cfg.Meta)
	m.meta.Store(&initial)
	mc.Events, mc.Conflict, mc.Delegate = events{m}, conflicts{m}, meta{&m.meta}
	mc.Alive, mc.Merge = admission{m}, admission{m}
	cfg.Timing.apply(mc)
	list, err := memberlist.Create(mc)
	if err != nil {
		stopDials()
		_ = tr.Shutdown() // Create may fail before memberlist owns it
		return nil, fmt.Errorf("membership: %w", err)
	}
	m.list = list
	m.joiner.Store(list)
	m.mu.Lock()
	m.addr = m.members[cfg.NodeName].Addr // memberlist announced us in Create
	m.mu.Unlock()
	_, m.port, _ = net.SplitHostPort(m.addr)

	ctx, stopRejoin := context.WithCancel(context.Background())
	m.stopRejoin = stopRejoin
	r := m.newRejoiner()
	r.round(ctx)
	go m.rejoinLoop(ctx, r)
	return m, nil
}

// apply copies t onto a memberlist configuration.
func (t Timing) apply(mc *memberlist.Config) {
	mc.ProbeInterval = t.ProbeInterval
	mc.ProbeTimeout = t.ProbeTimeout
	mc.SuspicionMult = t.SuspicionMult
	mc.GossipInterval = t.GossipInterval
	mc.PushPullInterval = t.PushPullInterval
	mc.GossipToTheDeadTime = t.PushPullInterval
	mc.TCPTimeout = t.TCPTimeout
	mc.DeadNodeReclaimTime = t.DeadNodeReclaimTime
}

// Members returns the live members, this node included until it leaves,
// sorted by name.
// A member that missed probes but is not yet declared dead (suspect) is
// still live, so ownership does not move on a single lost packet.
func (m *Membership) Members() []Member {
	m.mu.Lock()
	out := make([]Member, 0, len(m.members))
	for _, mem := range m.members {
		mem.Meta = slices.Clone(mem.Meta)
		out = append(out, mem)
	}
	m.mu.Unlock()
	sort.Slice(out, func(i, j int) bool { return out[i].Name < out[j].Name })
	return out
}

// LocalName returns this node's name.
func (m *Membership) LocalName() string { return m.cfg.NodeName }

// LocalAddr returns the gossip address other members reach this node at,
// ip:port (with Bind port 0, the port that was picked).
func (m *Membership) LocalAddr() string { return m.addr }

// SetMeta changes this member's metadata and gossips it to the others
// (e.g. a replica that finished loading and now owns zones). It waits at
// most timeout for the update to be sent.
func (m *Membership) SetMeta(b []byte, timeout time.Duration) error {
	c := slices.Clone(b)
	m.meta.Store(&c)
	return m.list.UpdateNode(timeout)
}

// Subscribe returns a channel that receives a value after the member list
// may have changed: a member joined, left, failed or changed its Meta.
// Signals are coalesced (the channel holds one) and never block
// memberlist, so read Members after each. Close closes the channel.
func (m *Membership) Subscribe() <-chan struct{} {
	ch := make(chan struct{}, 1)
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.subsClosed {
		close(ch)
		return ch
	}
	m.subs = append(m.subs, ch)
	return ch
}

// setMember and removeMember mirror memberlist's live set. memberlist's
// own Members returns pointers into state it keeps changing under its
// lock, so reading them races; events hand us the node under that lock.
func (m *Membership) setMember(n *memberlist.Node) {
	mem := Member{Name: n.Name, Addr: n.Address(), Meta: slices.Clone(n.Meta)}
	m.mu.Lock()
	defer m.mu.Unlock()
	m.disputes.end(n.Name) // alive again: the dispute is settled
	if old, ok := m.members[n.Name]; ok && m.holders[old.Addr] == n.Name {
		delete(m.holders, old.Addr)
	}
	m.members[n.Name] = mem
	m.holders[mem.Addr] = n.Name
	m.notifyLocked()
}

func (m *Membership) removeMember(name string) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.removeLocked(name)
}

func (m *Membership) removeLocked(name string) {
	m.disputes.end(name)
	if old, ok := m.members[name]; ok && m.holders[old.Addr] == name {
		delete(m.holders, old.Addr)
	}
	delete(m.members, name)
	m.notifyLocked()
}

// holder is the name of the member at gossip address addr, if any.
func (m *Membership) holder(addr string) (string, bool) {
	m.mu.Lock()
	defer m.mu.Unlock()
	name, ok := m.holders[addr]
	return name, ok
}

// sourceAdmitted is the stream gate's admission: the hosts of the live
// members and of the seeds, and what Config.AdmitSource admits.
func (m *Membership) sourceAdmitted(ip netip.Addr) bool {
	if seeds := m.seedHosts.Load(); seeds != nil {
		if _, ok := (*seeds)[ip]; ok {
			return true
		}
	}
	if m.memberHost(ip) {
		return true
	}
	return m.cfg.AdmitSource(ip)
}

// memberHost reports whether ip is the host of a live member.
func (m *Membership) memberHost(ip netip.Addr) bool {
	m.mu.Lock()
	defer m.mu.Unlock()
	for addr := range m.holders {
		if ap, err := netip.ParseAddrPort(addr); err == nil && ap.Addr().Unmap() == ip {
			return true
		}
	}
	return false
}

// notifyLocked signals every subscriber without blocking. memberlist may
// still call it after Close, from a suspicion timer.
func (m *Membership) notifyLocked() {
	if m.subsClosed {
		return
	}
	for _, ch := range m.subs {
		select {
		case ch <- struct{}{}:
		default:
		}
	}
}

// Leave tells the other members that this node is going away, so they drop
// it at once instead of after failure detection, and stops re-joining the
// seeds. It waits up to timeout for the news to be sent. Call Close after.
func (m *Membership) Leave(timeout time.Duration) error {
	m.lifeMu.Lock()
	defer m.lifeMu.Unlock()
	if m.closed {
		return ErrClosed
	}
	m.stopRejoin()
	if err := m.list.Leave(timeout); err != nil {
		return fmt.Errorf("membership: leave: %w", err)
	}
	return nil
}

// Close stops the rejoin loop and waits for it, shuts memberlist down
// (its sockets are closed when Close returns) and closes the Subscribe
// channels. Without Leave first, the others detect this node as failed.
// Close is idempotent.
func (m *Membership) Close() error {
	m.lifeMu.Lock()
	defer m.lifeMu.Unlock()
	if m.closed {
		return nil
	}
	m.closed = true
	m.stopRejoin()
	m.stopDials()
	<-m.rejoinDone
	m.mu.Lock()
	m.disputes.close() // no dispute starts after this
	m.mu.Unlock()
	m.disputes.wait()
	err := m.list.Shutdown()
	m.mu.Lock()
	m.subsClosed = true
	for _, ch := range m.subs {
		close(ch)
	}
	m.subs = nil
	m.mu.Unlock()
	if err != nil {
		return fmt.Errorf("membership: shutdown: %w", err)
	}
	return nil
}

// liveAddrs returns the gossip addresses of the live members.
func (m *Membership) liveAddrs() map[string]bool {
	m.mu.Lock()
	defer m.mu.Unlock()
	live := make(map[string]bool, len(m.members))
	for _, mem := range m.members {
		live[mem.Addr] = true
	}
	return live
}

// numMembers counts the live members, this node included.
func (m *Membership) numMembers() int {
	m.mu.Lock()
	defer m.mu.Unlock()
	return len(m.members)
}
