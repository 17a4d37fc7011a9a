package trust

import (
	"context"
	"errors"
	"net/netip"
	"sync"
	"sync/atomic"
	"time"

	"github.com/asynkron/protoactor-go/actor"
	"github.com/asynkron/protoactor-go/eventstream"
	"github.com/asynkron/protoactor-go/remote"
	"google.golang.org/grpc"
	"google.golang.org/grpc/backoff"
	"google.golang.org/protobuf/proto"
)

// A replica sends its replies to the address the asker names as sender,
// which the guard pins to the asker's host, not its port: a compromised
// node can name any port of its own. protoactor-go's remote sends to an
// address through one endpoint writer (remote/endpoint_writer.go), an
// actor whose mailbox grows without bound (goring, a ring buffer that
// doubles) and which blocks while it connects: it dials, opens a stream
// and waits for the peer's connect response with no deadline (its
// initialize, lines 44-55, and initializeInternal, lines 81-116, of
// version v0.0.0-20240822202345-3c0e61ca19c9), up to MaxRetryCount (5)
// times with 2 s between tries, dialling afresh each time without closing
// the connection it gave up on (line 82: state.conn is overwritten); and
// once connected, a batch the peer's flow control does not take blocks
// its Send (line 248) for as long. Meanwhile every reply to that address
// waits in the mailbox.
//
// Outbound bounds all of that from outside protoactor: gRPC's client
// interceptors put deadlines on the stream's creation, the connect
// response and each batch, and close a connection given up on; and a
// resolver in front of protoactor's counts what each address has queued,
// dropping a message that would take it (or its host) over its bound.
// What it cannot change: the 2 s sleeps and the number of tries, which
// protoactor fixes (one endpoint writer is blocked at most MaxRetryCount
// × (2 × ConnectTimeout + 2 s)); and the mailbox itself, which holds what
// Outbound admitted until the writer drops it.

// OutboundLimits bound what a process holds for the processes it sends to.
type OutboundLimits struct {
	// ConnectTimeout bounds each step of connecting to a peer: the TCP
	// and TLS handshakes and the stream's creation, then the peer's
	// connect response.
	ConnectTimeout time.Duration
	// SendTimeout bounds one batch waiting for the peer's flow control;
	// past it the connection is closed and protoactor dials afresh.
	SendTimeout time.Duration
	// QueueBytes bounds what one address has queued: messages accounted
	// at their encoded size plus MessageOverhead. A message to an
	// address with nothing queued is always taken.
	QueueBytes int
	// HostQueueBytes bounds what the addresses of one host have queued.
	HostQueueBytes int
	// EndpointsPerHost bounds the addresses of one host this process
	// keeps a connection (an endpoint writer) to.
	EndpointsPerHost int
	// ReplyBytes bounds a message this process reads on a connection it
	// dialled: only protoactor's connect response and disconnect request
	// come that way.
	ReplyBytes int
}

// MessageOverhead is what one queued message costs beside its encoded
// bytes: protoactor's envelope, the message's structure, a mailbox slot.
const MessageOverhead = 512

// DefaultOutboundLimits are the bounds of a replica's sends.
func DefaultOutboundLimits() OutboundLimits {
	return OutboundLimits{ConnectTimeout: 5 * time.Second, SendTimeout: 10 * time.Second,
		QueueBytes: 2 << 20, HostQueueBytes: 4 << 20, EndpointsPerHost: 32, ReplyBytes: 16 << 10}
}

func (l OutboundLimits) withDefaults() OutboundLimits {
	d := DefaultOutboundLimits()
	pick := func(v *int, def int) {
		if *v <= 0 {
			*v = def
		}
	}
	pick(&l.QueueBytes, d.QueueBytes)
	pick(&l.HostQueueBytes, d.HostQueueBytes)
	pick(&l.EndpointsPerHost, d.EndpointsPerHost)
	pick(&l.ReplyBytes, d.ReplyBytes)
	if l.ConnectTimeout <= 0 {
		l.ConnectTimeout = d.ConnectTimeout
	}
	if l.SendTimeout <= 0 {
		l.SendTimeout = d.SendTimeout
	}
	return l
}

// Outbound is what bounds a process's sends through protoactor's remote.
type Outbound struct {
	limits     OutboundLimits
	rejections *Rejections

	mu     sync.Mutex
	queued map[string]int            // accounted bytes queued, by address with an endpoint
	hosts  map[netip.Addr]*hostQueue // by host of those addresses

	system   *actor.ActorSystem
	remote   *remote.Remote
	next     int // the index of protoactor's resolver in the registry
	terminal *eventstream.Subscription
}

type hostQueue struct {
	bytes, endpoints int
}

// NewOutbound returns the bounds of limits (zero fields: the defaults'),
// counting the messages it drops in rejections as ReasonRemoteQueue.
func NewOutbound(limits OutboundLimits, rejections *Rejections) *Outbound {
	return &Outbound{limits: limits.withDefaults(), rejections: rejections,
		queued: map[string]int{}, hosts: map[netip.Addr]*hostQueue{}}
}

// Attach puts o in front of r, the remote of system, which must not have
// started yet: every user message to another process is counted, or
// dropped, before r queues it. Detach undoes what Attach started.
func (o *Outbound) Attach(system *actor.ActorSystem, r *remote.Remote) {
	o.system, o.remote = system, r
	reg := system.ProcessRegistry
	o.next = len(reg.RemoteHandlers) + 1 // protoactor's, registered by r.Start
	p := &outboundProcess{o: o}
	reg.RegisterAddressResolver(func(*actor.PID) (actor.Process, bool) { return p, true })
	o.terminal = system.EventStream.SubscribeWithPredicate(func(evt any) {
		o.terminated(evt.(*remote.EndpointTerminatedEvent).Address)
	}, func(evt any) bool { _, ok := evt.(*remote.EndpointTerminatedEvent); return ok })
}

// Detach stops following protoactor's endpoints.
func (o *Outbound) Detach() {
	if o.terminal != nil {
		o.system.EventStream.Unsubscribe(o.terminal)
	}
}

// DialOptions are the options protoactor dials other processes with,
// beside the guard's.
func (o *Outbound) DialOptions() []grpc.DialOption {
	return []grpc.DialOption{
		grpc.WithConnectParams(grpc.ConnectParams{Backoff: backoff.DefaultConfig, MinConnectTimeout: o.limits.ConnectTimeout}),
		grpc.WithDefaultCallOptions(grpc.MaxCallRecvMsgSize(o.limits.ReplyBytes)),
		grpc.WithStreamInterceptor(o.intercept),
	}
}

// admit counts a message of size bytes to addr, or reports that it must
// be dropped.
func (o *Outbound) admit(addr string, size int) bool {
	host := hostOfAddr(addr)
	o.mu.Lock()
	defer o.mu.Unlock()
	h := o.hosts[host]
	queued, known := o.queued[addr]
	switch {
	case !known && h != nil && h.endpoints >= o.limits.EndpointsPerHost,
		queued > 0 && queued+size > o.limits.QueueBytes,
		h != nil && h.bytes > 0 && h.bytes+size > o.limits.HostQueueBytes:
		return false
	}
	if h == nil {
		h = &hostQueue{}
		o.hosts[host] = h
	}
	if !known {
		h.endpoints++
	}
	o.queued[addr] = queued + size
	h.bytes += size
	return true
}

// sent uncounts the bytes of a batch sent to addr.
func (o *Outbound) sent(addr string, b *remote.MessageBatch) {
	size := 0
	for _, e := range b.GetEnvelopes() {
		size += len(e.GetMessageData()) + MessageOverhead
	}
	o.mu.Lock()
	defer o.mu.Unlock()
	queued, ok := o.queued[addr]
	if !ok {
		return
	}
	size = min(size, queued) // a batch of the writer before a reconnection
	o.queued[addr] = queued - size
	o.hosts[hostOfAddr(addr)].bytes -= size
}

// terminated forgets an address whose endpoint protoactor ended: its
// writer drops what it still holds.
func (o *Outbound) terminated(addr string) {
	o.mu.Lock()
	defer o.mu.Unlock()
	queued, ok := o.queued[addr]
	if !ok {
		return
	}
	delete(o.queued, addr)
	host := hostOfAddr(addr)
	h := o.hosts[host]
	h.bytes -= queued
	if h.endpoints--; h.endpoints == 0 {
		delete(o.hosts, host)
	}
}

// Queued is what addr has queued, in accounted bytes.
func (o *Outbound) Queued(addr string) int {
	o.mu.Lock()
	defer o.mu.Unlock()
	return o.queued[addr]
}

func hostOfAddr(addr string) netip.Addr {
	ap, err := netip.ParseAddrPort(addr)
	if err != nil {
		return netip.Addr{} // a host name: one bucket for all of them
	}
	return ap.Addr().Unmap()
}

// outboundProcess is the registry's process for every actor of another
// process: user messages go through Outbound, the rest straight to
// protoactor's own process for the actor.
type outboundProcess struct {
	o *Outbound
}

func (p *outboundProcess) SendUserMessage(pid *actor.PID, message any) {
	header, msg, sender := actor.UnwrapEnvelope(message)
	size := MessageOverhead
	if m, ok := msg.(proto.Message); ok {
		size += proto.Size(m)
	}
	if !p.o.admit(pid.Address, size) {
		p.o.rejections.Record(pid.Address, "", ReasonRemoteQueue)
		return
	}
	p.o.remote.SendMessage(pid, header, msg, sender, -1)
}

func (p *outboundProcess) SendSystemMessage(pid *actor.PID, message any) {
	if next, ok := p.protoactors(pid); ok {
		next.SendSystemMessage(pid, message)
	}
}

func (p *outboundProcess) Stop(pid *actor.PID) {
	if next, ok := p.protoactors(pid); ok {
		next.Stop(pid)
	}
}

// protoactors is protoactor's own process for pid.
func (p *outboundProcess) protoactors(pid *actor.PID) (actor.Process, bool) {
	handlers := p.o.system.ProcessRegistry.RemoteHandlers
	if p.o.next >= len(handlers) {
		return nil, false
	}
	return handlers[p.o.next](pid)
}

var (
	errConnectTimeout = errors.New("trust: the peer did not answer its connection in time")
	errSendTimeout    = errors.New("trust: the peer did not take a batch in time")
)

// intercept gives protoactor's stream to a peer its deadlines: its
// creation and the peer's connect response within ConnectTimeout each,
// every batch taken within SendTimeout. A connection given up before it
// connected is closed: protoactor would dial afresh and leave it
// reconnecting for ever.
func (o *Outbound) intercept(ctx context.Context, desc *grpc.StreamDesc, cc *grpc.ClientConn, method string,
	streamer grpc.Streamer, opts ...grpc.CallOption) (grpc.ClientStream, error) {
	ctx, cancel := context.WithCancel(ctx)
	timer := time.AfterFunc(o.limits.ConnectTimeout, cancel)
	cs, err := streamer(ctx, desc, cc, method, opts...)
	if !timer.Stop() && err == nil {
		err = errConnectTimeout
	}
	if err != nil {
		cancel()
		cc.Close()
		return nil, err
	}
	return &outboundStream{ClientStream: cs, o: o, addr: cc.Target(), cc: cc, cancel: cancel}, nil
}

// outboundStream is protoactor's stream to a peer, with deadlines.
type outboundStream struct {
	grpc.ClientStream
	o         *Outbound
	addr      string
	cc        *grpc.ClientConn
	cancel    context.CancelFunc
	connected atomic.Bool // the peer's connect response came
}

// fail ends the stream; before the peer connected, its connection too.
func (s *outboundStream) fail() {
	s.cancel()
	if !s.connected.Load() {
		s.cc.Close()
	}
}

func (s *outboundStream) SendMsg(m any) error {
	timer := time.AfterFunc(s.o.limits.SendTimeout, s.fail)
	err := s.ClientStream.SendMsg(m)
	if !timer.Stop() && err == nil {
		err = errSendTimeout
	}
	if err != nil {
		s.fail()
		return err
	}
	if rm, ok := m.(*remote.RemoteMessage); ok && rm.GetMessageBatch() != nil {
		s.o.sent(s.addr, rm.GetMessageBatch())
	}
	return nil
}

func (s *outboundStream) RecvMsg(m any) error {
	if s.connected.Load() {
		return s.ClientStream.RecvMsg(m) // the writer's reader, waiting for the end
	}
	timer := time.AfterFunc(s.o.limits.ConnectTimeout, s.fail)
	err := s.ClientStream.RecvMsg(m)
	if !timer.Stop() && err == nil {
		err = errConnectTimeout
	}
	if err != nil {
		s.fail()
		return err
	}
	s.connected.Store(true)
	return nil
}
