package membership

import (
	"context"
	"sync"
	"time"
)

// memberlist believes a dead message from any holder of the key, about
// any member, and drops the member at once; a member itself refutes it
// only once the rumour reaches it. So with Config.Serving set, a member
// gossip declares dead is first asked whether it still serves: if it
// does, it stays in Members while it refutes (its gossip address is
// joined, so that it hears of its death at once), and gossip hearing it
// alive again ends the dispute with nothing changed. One that does not
// serve (its process gone, a partition, a frozen process) goes at once,
// as before; one that serves but never refutes (it left, or another
// process now serves its address) goes after DeadNodeReclaimTime.

// disputes are the members gossip declared dead that are being asked.
// Its fields but ctx, stop and wg are guarded by Membership.mu.
type disputes struct {
	ctx  context.Context // ends at Close
	stop context.CancelFunc
	wg   sync.WaitGroup

	gen    map[string]uint64 // member → the generation of its dispute
	next   uint64
	closed bool
}

func (d *disputes) start() {
	d.ctx, d.stop = context.WithCancel(context.Background())
	d.gen = map[string]uint64{}
}

// end forgets the dispute of name, if any.
func (d *disputes) end(name string) { delete(d.gen, name) }

// close ends every dispute and starts none after it.
func (d *disputes) close() {
	d.closed = true
	d.stop()
}

func (d *disputes) wait() { d.wg.Wait() }

// memberDied is told, under memberlist's node lock, that gossip dropped
// name: declared it dead, or it left.
func (m *Membership) memberDied(name string) {
	m.mu.Lock()
	defer m.mu.Unlock()
	mem, ok := m.members[name]
	if !ok || m.cfg.Serving == nil || name == m.cfg.NodeName || m.disputes.closed {
		m.removeLocked(name)
		return
	}
	m.disputes.next++
	gen := m.disputes.next
	m.disputes.gen[name] = gen
	m.disputes.wg.Go(func() { m.settle(mem, gen) })
}

// settle asks whether mem serves every probe interval until gossip hears
// it alive again, it no longer serves, or DeadNodeReclaimTime passed.
func (m *Membership) settle(mem Member, gen uint64) {
	ctx, t := m.disputes.ctx, m.cfg.Timing
	until := time.Now().Add(t.DeadNodeReclaimTime)
	for kept := false; ; kept = true {
		check, cancel := context.WithTimeout(ctx, t.ProbeInterval)
		serving := m.cfg.Serving(check, mem)
		cancel()
		switch m.keepDisputed(mem.Name, gen, serving && time.Now().Before(until)) {
		case disputeSettled:
			return
		case disputeLost:
			if kept {
				m.cfg.Logger.Info("membership: a member declared dead did not refute it; dropped",
					"member", mem.Name, "addr", mem.Addr, "serving", serving)
			}
			return
		}
		if !kept {
			m.cfg.Logger.Warn("membership: gossip declared dead a member that still serves; it stays while it refutes",
				"member", mem.Name, "addr", mem.Addr)
			if list := m.joiner.Load(); list != nil {
				// Our state tells it it is dead: it refutes at once.
				_, _ = list.Join([]string{mem.Addr})
			}
		}
		select {
		case <-ctx.Done():
			return
		case <-time.After(min(t.ProbeInterval, time.Until(until))):
		}
	}
}

// What became of a dispute.
type disputeState int

const (
	disputeOpen    disputeState = iota // the member stays while it refutes
	disputeSettled                     // gossip heard it alive again, or dropped it since
	disputeLost                        // it was dropped
)

// keepDisputed ends the dispute gen of name unless keep, dropping the
// member; gossip may have settled it meanwhile.
func (m *Membership) keepDisputed(name string, gen uint64, keep bool) disputeState {
	m.mu.Lock()
	defer m.mu.Unlock()
	switch {
	case m.disputes.gen[name] != gen:
		return disputeSettled
	case keep:
		return disputeOpen
	}
	m.removeLocked(name)
	return disputeLost
}
