package node

import (
	"context"
	"errors"
	"net"
	"sync"
	"time"

	"github.com/shardns/shardns/listeners"
)

// A node-local process is replaced beside itself: a DaemonSet rolled with
// maxSurge starts the new pod on the node while the old one serves, both
// on the host network. So a node-local process binds its DNS addresses
// and its HTTP address shared with the process it replaces (SO_REUSEPORT,
// listeners.BindShared and ListenShared): the old process keeps every
// query until it is told to stop, which happens only once the new one is
// ready; the new one's HTTP answers its own readiness probes from the
// start. On SIGTERM the old process yields its addresses, answers
// what it holds through its lameduck, and closes only once its queues are
// empty.

// drainTimeout bounds the wait for queues to empty after the lameduck: a
// process alone on its address under load never sees them empty, and it
// must still stop within the pod's grace period.
const drainTimeout = 2 * time.Second

// listenHTTP binds http.listen; a node-local process shares it.
func (n *Node) listenHTTP(addr string) (net.Listener, error) {
	if n.nodeLocal {
		return listeners.ListenShared(addr)
	}
	return net.Listen("tcp", addr)
}

// takingBack tracks the goroutines of takeBack.
type takingBack struct {
	ctx    context.Context
	cancel context.CancelFunc
	wg     sync.WaitGroup
}

// takeBack makes a node-local process that replaced another beside itself
// take its DNS address back once that process has closed its sockets
// (listeners.Sockets.TakeBack): the next process to replace it then gets
// no query before its own program is in place.
func (n *Node) takeBack(e *listenerEntry) {
	if !n.nodeLocal || e.sockets == nil {
		return
	}
	tb := &n.takingBack
	if tb.ctx == nil {
		tb.ctx, tb.cancel = context.WithCancel(context.Background())
	}
	tb.wg.Go(func() {
		took, err := e.sockets.TakeBack(tb.ctx)
		switch {
		case took:
			n.log.Info("the process replaced beside this one has closed: its address is this process's alone", "addr", e.sockets.Addr())
		case err != nil && !errors.Is(err, context.Canceled) && !errors.Is(err, net.ErrClosed):
			n.log.Warn("taking the address back from the process replaced beside this one", "addr", e.sockets.Addr(), "err", err)
		}
	})
}

// stopTakingBack ends the waits of takeBack: a process handing its
// address over must not take it back.
func (n *Node) stopTakingBack() {
	if tb := &n.takingBack; tb.cancel != nil {
		tb.cancel()
		tb.wg.Wait()
	}
}

// yieldAddresses sends the new queries of every DNS address to the process
// that replaces this one, if one has bound beside it.
func (n *Node) yieldAddresses() {
	n.stopTakingBack()
	if !n.nodeLocal || !n.started {
		return
	}
	for _, e := range n.listeners {
		if err := e.sockets.Yield(); err != nil {
			n.log.Warn("yielding the address", "addr", e.sockets.Addr(), "err", err)
		}
	}
	n.log.Info("new queries go to the process started beside this one, if any; answering what is queued here")
}

// drain waits until no query waits in the sockets of the DNS addresses.
func (n *Node) drain() {
	if !n.nodeLocal || !n.started {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), drainTimeout)
	defer cancel()
	for _, e := range n.listeners {
		if err := e.sockets.Drain(ctx); err != nil {
			n.log.Info("closing with queries still queued (no process took the address over)", "addr", e.sockets.Addr())
			return
		}
	}
}
