package node

import (
	"context"
	"log/slog"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/shardns/shardns/actors/dispatch"
	"github.com/shardns/shardns/cluster"
	"github.com/shardns/shardns/cluster/membership"
	"github.com/shardns/shardns/cluster/wire"
)

// memberSource is where a process learns the members of the ring:
// memberlist gossip for a replica, the replicas themselves for a
// node-local process (ringFeed).
type memberSource interface {
	Members() []membership.Member
	Subscribe() <-chan struct{}
	SetMeta(meta []byte, timeout time.Duration) error
	Leave(timeout time.Duration) error
	Close() error
	LocalAddr() string
}

// ringFeed is a node-local process's member source. It holds no replica
// key, so it does not gossip: every interval it asks one replica for the
// ring as that replica sees it (only its version when unchanged), and
// keeps the last ring it was told. It asks the replica that answered
// last, and when that one fails, the others of the ring and the seeds in
// turn.
//
// It also asks every owner of the ring once, so that the connection to
// each is up (dialled, TLS handshake done) before a query needs it: a
// node-local process is ready only once it has (reachedOwners), and the
// process it replaces keeps the queries until then. Without it, the
// first query for each owner's zones waited for that owner's handshake.
type ringFeed struct {
	fetch    func(ctx context.Context, remoteAddr string, known uint64) (uint64, []*wire.RingMember, error)
	reach    func(ctx context.Context, remoteAddr string, known uint64) error // asks an owner, to connect to it
	seeds    func(ctx context.Context) ([]string, error)
	interval time.Duration
	timeout  time.Duration
	log      *slog.Logger
	now      func() time.Time

	// For the metrics: when a replica last told the ring (unix ns; the
	// start until one has), and the polls no replica answered. A
	// process that cannot read the ring keeps routing by an old one.
	readAt      atomic.Int64
	failedPolls atomic.Uint64

	mu      sync.Mutex
	members []membership.Member
	version uint64
	last    string // the replica that answered last
	changed chan struct{}
	reached map[string]bool // replicas of the ring that answered once
	tried   bool            // every owner of the ring has been asked once

	stop chan struct{}
	done chan struct{}
}

func newRingFeed(ring *dispatch.RingClient, seeds func(ctx context.Context) ([]string, error),
	interval, timeout time.Duration, log *slog.Logger) *ringFeed {
	reach := func(ctx context.Context, addr string, known uint64) error {
		_, _, err := ring.Fetch(ctx, addr, known)
		return err
	}
	return &ringFeed{fetch: ring.Fetch, reach: reach, seeds: seeds, interval: interval, timeout: timeout, log: log, now: time.Now,
		changed: make(chan struct{}, 1), reached: map[string]bool{}, stop: make(chan struct{}), done: make(chan struct{})}
}

// start asks for the ring at once, then every interval, until Close.
func (f *ringFeed) start() {
	f.readAt.Store(f.now().UnixNano())
	go func() {
		defer close(f.done)
		tick := time.NewTicker(f.interval)
		defer tick.Stop()
		for {
			f.poll()
			select {
			case <-f.stop:
				return
			case <-tick.C:
			}
		}
	}()
}

// poll asks the replicas in turn until one answers: the one that
// answered last and the others of the ring, then the seeds (all replicas
// may have been replaced since).
func (f *ringFeed) poll() {
	f.mu.Lock()
	known, targets := f.version, f.targetsLocked()
	f.mu.Unlock()
	if f.ask(targets, known) {
		f.reachOwners()
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), f.timeout)
	seeds, err := f.seeds(ctx)
	cancel()
	if err != nil {
		f.log.Warn("listing the replicas to read the ring from", "err", err)
	}
	seeds = slices.DeleteFunc(seeds, func(s string) bool { return slices.Contains(targets, s) })
	if !f.ask(seeds, known) {
		f.failedPolls.Add(1)
		if len(targets)+len(seeds) > 0 {
			f.log.Debug("no replica told the ring", "asked", len(targets)+len(seeds))
		}
		return
	}
	f.reachOwners()
}

// reachOwners asks, all at once, every owner of the ring that has not
// answered yet, so the connections to them are up; an owner that does
// not answer within the timeout is asked again at the next poll.
func (f *ringFeed) reachOwners() {
	f.mu.Lock()
	known := f.version
	asking := cluster.Unreached(told(f.members), f.reached)
	f.mu.Unlock()
	var wg sync.WaitGroup
	for _, addr := range asking {
		wg.Go(func() {
			ctx, cancel := context.WithTimeout(context.Background(), f.timeout)
			defer cancel()
			if err := f.reach(ctx, addr, known); err != nil {
				f.log.Debug("reaching an owner", "replica", addr, "err", err)
				return
			}
			f.mu.Lock()
			f.reached[addr] = true
			f.mu.Unlock()
		})
	}
	wg.Wait()
	f.mu.Lock()
	f.tried = true
	f.mu.Unlock()
}

// reachedOwners reports whether every owner of the ring has been asked
// once, answered or not: a node-local process is not ready before, so
// its first queries do not wait for connections to be made. An owner that
// did not answer does not hold readiness back: the replicas tell the ring
// without it soon, and the process it replaces has to stop some time.
func (f *ringFeed) reachedOwners() bool {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.tried
}

// ask asks addrs in turn for the ring until one answers, and reports
// whether one did.
func (f *ringFeed) ask(addrs []string, known uint64) bool {
	for _, addr := range addrs {
		select {
		case <-f.stop:
			return true
		default:
		}
		ctx, cancel := context.WithTimeout(context.Background(), f.timeout)
		version, members, err := f.fetch(ctx, addr, known)
		cancel()
		if err != nil {
			f.log.Debug("reading the ring", "replica", addr, "err", err)
			continue
		}
		f.update(addr, version, members)
		return true
	}
	return false
}

// targetsLocked are the replicas to ask (cluster.AskOrder).
func (f *ringFeed) targetsLocked() []string {
	return cluster.AskOrder(told(f.members), f.last)
}

// told reads the roles and remotes of members as the replicas told them.
func told(members []membership.Member) []cluster.Candidate {
	out := make([]cluster.Candidate, len(members))
	for i, m := range members {
		role, addr := cluster.DecodeMeta(m.Meta)
		out[i] = cluster.Candidate{Name: m.Name, Role: role, Remote: addr}
	}
	return out
}

// update takes what the replica at addr answered.
func (f *ringFeed) update(addr string, version uint64, members []*wire.RingMember) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.last = addr
	f.reached[addr] = true
	f.readAt.Store(f.now().UnixNano())
	if members == nil || version == f.version {
		return
	}
	f.version = version
	f.members = ringMembers(members)
	for a := range f.reached { // a replica gone from the ring is dialled again if it comes back
		if !slices.ContainsFunc(f.members, func(m membership.Member) bool { return m.Addr == a }) {
			delete(f.reached, a)
		}
	}
	select {
	case f.changed <- struct{}{}:
	default:
	}
}

// ringMembers are the members a replica told of, as gossip would give
// them: the remote address stands in for the gossip address (it is on the
// same host, which is what admission on the remote port reads).
func ringMembers(members []*wire.RingMember) []membership.Member {
	out := make([]membership.Member, 0, len(members))
	for _, m := range members {
		if m.GetName() == "" || m.GetRemote() == "" {
			continue
		}
		role := cluster.RoleOf(m.GetOwner(), m.GetPending())
		out = append(out, membership.Member{Name: m.Name, Addr: m.Remote, Meta: cluster.EncodeMeta(role, m.Remote)})
	}
	return out
}

// lastRead is when a replica last told the ring, or when the feed
// started if none has yet.
func (f *ringFeed) lastRead() time.Time { return time.Unix(0, f.readAt.Load()) }

// failures counts the polls that no replica answered.
func (f *ringFeed) failures() uint64 { return f.failedPolls.Load() }

func (f *ringFeed) Members() []membership.Member {
	f.mu.Lock()
	defer f.mu.Unlock()
	return slices.Clone(f.members)
}

// Subscribe returns the channel signalled when the ring changes; a
// ringFeed has one subscriber, the node's ring watch.
func (f *ringFeed) Subscribe() <-chan struct{} { return f.changed }

// SetMeta does nothing: a node-local process announces nothing.
func (f *ringFeed) SetMeta([]byte, time.Duration) error { return nil }

// Leave does nothing: the replicas never counted a node-local process.
func (f *ringFeed) Leave(time.Duration) error { return nil }

// Close stops asking and waits for the last question to end.
func (f *ringFeed) Close() error {
	select {
	case <-f.stop:
	default:
		close(f.stop)
	}
	<-f.done
	return nil
}

// LocalAddr is empty: a node-local process has no gossip address.
func (f *ringFeed) LocalAddr() string { return "" }
