package trust

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/netip"
	"time"

	"github.com/asynkron/protoactor-go/remote"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/keepalive"
	"google.golang.org/grpc/peer"
	"google.golang.org/grpc/status"
)

// Guard is what a process's actor remote port lets in. protoactor-go's
// remote server hands every message it reads to the actor named in it,
// system messages included (a Stop or a PoisonPill stops any actor, and
// an unregistered type or an index out of range panics the reader), and
// its unary methods panic outright. So the Guard sits in front of it as
// gRPC server options: a connection from an address that is not admitted,
// or beyond the limits, is closed before anything is read; with keys the
// handshake is TLS both ways, and the certificate the peer proves decides
// its role; and every message of the one stream method is checked before
// protoactor sees it, against the routes of that role and against the
// peer's own address.
type Guard struct {
	admitted   func(netip.Addr) bool
	routes     map[Role]map[string]string
	rejections *Rejections
	identity   *Identity // nil: plain text
	server     credentials.TransportCredentials
	client     credentials.TransportCredentials
	limits     *connLimits
}

// GuardConfig configures a Guard.
type GuardConfig struct {
	// Keys are a replica's keys, the first one in use (see ReplicaTLS).
	Keys [][]byte
	// Credential is a node-local process's, used when Keys is empty (see
	// NodeLocalTLS). Neither leaves the remote port in plain text, for
	// loopback and explicitly insecure clusters.
	Credential *Credential
	// Admitted reports whether a connection from addr may be served: the
	// addresses of admitted members. Called on every new connection.
	Admitted func(addr netip.Addr) bool
	// Routes maps, for each role a peer may prove, each actor it may send
	// to onto the full protobuf name of the one message type that actor
	// takes from it. A plain-text peer proves RoleUnproven.
	Routes map[Role]map[string]string
	// Rejections records what the Guard turns away.
	Rejections *Rejections
	// Limits bound the connections the port holds; zero fields take
	// DefaultLimits'.
	Limits Limits
}

// handshakeTimeout bounds a connection that never finishes its handshake
// (gRPC's default is two minutes).
const handshakeTimeout = 3 * time.Second

// NewGuard returns the Guard of cfg.
func NewGuard(cfg GuardConfig) (*Guard, error) {
	if cfg.Admitted == nil {
		return nil, errors.New("trust: a guard needs an admission function")
	}
	g := &Guard{admitted: cfg.Admitted, routes: cfg.Routes, rejections: cfg.Rejections,
		server: insecure.NewCredentials(), client: insecure.NewCredentials(), limits: newConnLimits(cfg.Limits)}
	var err error
	switch {
	case len(cfg.Keys) > 0:
		g.identity, err = ReplicaTLS(cfg.Keys)
	case cfg.Credential != nil:
		g.identity, err = NodeLocalTLS(*cfg.Credential)
	}
	if err != nil {
		return nil, err
	}
	if g.identity != nil {
		g.server, g.client = credentials.NewTLS(g.identity.Server), credentials.NewTLS(g.identity.Client)
	}
	return g, nil
}

// ServerOptions are the options of the remote port's gRPC server.
func (g *Guard) ServerOptions() []grpc.ServerOption {
	l := g.limits.limits
	return []grpc.ServerOption{
		grpc.Creds(admittingCreds{TransportCredentials: g.server, g: g}),
		grpc.ConnectionTimeout(handshakeTimeout),
		grpc.StreamInterceptor(g.checkStream),
		grpc.UnaryInterceptor(g.refuseUnary),
		// protoactor opens one stream per connection, for its life.
		grpc.MaxConcurrentStreams(l.StreamsPerConnection),
		grpc.MaxRecvMsgSize(l.MessageBytes),
		// Fixed windows: what a peer may send ahead of what the stream
		// reads is 64 KiB a stream, 256 KiB a connection, never the
		// megabytes gRPC's bandwidth probe would grant a peer that
		// answers its pings quickly. A message larger than the window
		// (a replica's handoff pages) is still granted whole once its
		// header is read (gRPC's inFlow.maybeAdjust).
		grpc.InitialWindowSize(streamWindow),
		grpc.InitialConnWindowSize(int32(l.StreamsPerConnection) * streamWindow),
		// A connection without a stream serves nothing; one whose peer
		// stops answering pings is gone.
		grpc.KeepaliveParams(keepalive.ServerParameters{MaxConnectionIdle: l.Idle,
			Time: l.Idle, Timeout: 20 * time.Second}),
		// Pings more often than protoactor's clients send them (never, by
		// default) are a peer spending this replica's CPU.
		grpc.KeepaliveEnforcementPolicy(keepalive.EnforcementPolicy{MinTime: 10 * time.Second, PermitWithoutStream: true}),
	}
}

// streamWindow is the HTTP/2 flow-control window of each stream of the
// remote port: gRPC's default, which it grows only by probing.
const streamWindow = 64 << 10

// clientPing is how long a connection this replica dialled may carry
// nothing before it pings; clientPingTimeout how long a ping or data it
// sent may stay unacknowledged before the connection is given up.
const (
	clientPing        = 30 * time.Second
	clientPingTimeout = 10 * time.Second
)

// DialOptions are the options this replica dials other replicas with.
func (g *Guard) DialOptions() []grpc.DialOption {
	return []grpc.DialOption{grpc.WithTransportCredentials(g.client),
		// A connection whose peer went silent (a network partition) is
		// closed once what was sent on it stayed unacknowledged for
		// Timeout (gRPC sets TCP_USER_TIMEOUT from it) or a ping went
		// unanswered, and protoactor dials afresh at the next message;
		// otherwise TCP retransmits on it for minutes and every question
		// sent meanwhile is lost. Time stays above the server's MinTime.
		grpc.WithKeepaliveParams(keepalive.ClientParameters{Time: clientPing, Timeout: clientPingTimeout})}
}

// ClientHandshake runs this replica's side of the handshake on conn,
// dialled to another replica's remote port at addr, as a dispatch would,
// and returns the connection to use; on failure it closes conn. It is how
// a replica checks that another one serves (cluster/liveness) without the
// other counting a connection that stops mid-handshake as a stranger's.
func (g *Guard) ClientHandshake(ctx context.Context, addr string, conn net.Conn) (net.Conn, error) {
	host, _, err := net.SplitHostPort(addr)
	if err != nil {
		conn.Close()
		return nil, err
	}
	secured, _, err := g.client.ClientHandshake(ctx, host, conn)
	if err != nil {
		conn.Close()
		return nil, err
	}
	return secured, nil
}

// receiveMethod is protoactor's one stream method, the only one it uses.
const receiveMethod = "/remote.Remoting/Receive"

var errNotAdmitted = errors.New("trust: not an admitted member")

// admittingCreds refuses connections from addresses that are not
// admitted, then runs the TLS (or plain) handshake.
type admittingCreds struct {
	credentials.TransportCredentials
	g *Guard
}

func (c admittingCreds) ServerHandshake(raw net.Conn) (net.Conn, credentials.AuthInfo, error) {
	from := raw.RemoteAddr().String()
	ap, err := netip.ParseAddrPort(from)
	if err != nil || !c.g.admitted(ap.Addr().Unmap()) {
		c.g.rejections.Record(from, "", ReasonRemoteConnection)
		return nil, nil, errNotAdmitted
	}
	held, release, err := c.g.limits.open(ap.Addr().Unmap(), raw)
	if err != nil {
		c.g.rejections.Record(from, "", ReasonRemoteLimit)
		return nil, nil, err
	}
	conn, info, err := c.TransportCredentials.ServerHandshake(held)
	release() // the handshake slot; the connection's stays until it closes
	if err != nil {
		held.Close()
		c.g.rejections.Record(from, "", ReasonRemoteConnection)
		return nil, nil, err
	}
	role := RoleUnproven
	if tlsInfo, ok := info.(credentials.TLSInfo); ok {
		role = c.g.identity.RoleOf(tlsInfo.State)
	}
	limited := newMessageLimitConn(conn, c.g.limits.limits.messageBytes(role), func(error) {
		c.g.rejections.Record(from, "", ReasonRemoteLimit)
	})
	return limited, roleInfo{AuthInfo: info, role: role}, nil
}

// roleInfo carries the role a peer proved to the stream interceptor.
type roleInfo struct {
	credentials.AuthInfo
	role Role
}

func (c admittingCreds) Clone() credentials.TransportCredentials {
	return admittingCreds{TransportCredentials: c.TransportCredentials.Clone(), g: c.g}
}

// checkStream serves protoactor's one stream method with every message
// checked against the routes of the role the peer proved; any other
// method is refused.
func (g *Guard) checkStream(srv any, ss grpc.ServerStream, info *grpc.StreamServerInfo, handler grpc.StreamHandler) error {
	from, role := peerOf(ss.Context())
	if info.FullMethod != receiveMethod || !from.IsValid() {
		g.rejections.Record(from.String(), "", ReasonRemoteMessage)
		return status.Errorf(codes.PermissionDenied, "method %s is not served", info.FullMethod)
	}
	return handler(srv, &checkedStream{ServerStream: ss, g: g, from: from, routes: g.routes[role]})
}

// refuseUnary refuses protoactor's unary methods, which are unimplemented
// and panic.
func (g *Guard) refuseUnary(ctx context.Context, _ any, info *grpc.UnaryServerInfo, _ grpc.UnaryHandler) (any, error) {
	from, _ := peerOf(ctx)
	g.rejections.Record(from.String(), "", ReasonRemoteMessage)
	return nil, status.Errorf(codes.PermissionDenied, "method %s is not served", info.FullMethod)
}

// checkedStream ends the stream at the first message that is not a
// connection request or a batch of messages its peer may send.
type checkedStream struct {
	grpc.ServerStream
	g      *Guard
	from   netip.AddrPort
	routes map[string]string
}

func (s *checkedStream) RecvMsg(m any) error {
	if err := s.ServerStream.RecvMsg(m); err != nil {
		if status.Code(err) == codes.ResourceExhausted { // over Limits.MessageBytes
			s.g.rejections.Record(s.from.String(), "", ReasonRemoteLimit)
		}
		return err
	}
	msg, ok := m.(*remote.RemoteMessage)
	if !ok {
		return status.Error(codes.Internal, "trust: unexpected stream message type")
	}
	if err := CheckMessage(msg, s.routes, s.from.Addr()); err != nil {
		s.g.rejections.Record(s.from.String(), "", ReasonRemoteMessage)
		return status.Error(codes.PermissionDenied, err.Error())
	}
	return nil
}

// peerOf is the address of a stream's peer and the role it proved.
func peerOf(ctx context.Context) (netip.AddrPort, Role) {
	p, ok := peer.FromContext(ctx)
	if !ok || p.Addr == nil {
		return netip.AddrPort{}, RoleUnproven
	}
	ap, err := netip.ParseAddrPort(p.Addr.String())
	if err != nil {
		return netip.AddrPort{}, RoleUnproven
	}
	role := RoleUnproven
	if ri, ok := p.AuthInfo.(roleInfo); ok {
		role = ri.role
	}
	return netip.AddrPortFrom(ap.Addr().Unmap(), ap.Port()), role
}

// CheckMessage accepts a connection request, and a message batch whose
// every envelope is well formed, protobuf-serialised, and carries the
// type routes names for its target actor, and whose every sender is on
// peer, the address the batch came from: a process may name only its own
// actors as senders, so that replies go back to it and nowhere else.
// Everything else, protoactor's system messages among it, is an error.
func CheckMessage(m *remote.RemoteMessage, routes map[string]string, peer netip.Addr) error {
	switch t := m.GetMessageType().(type) {
	case *remote.RemoteMessage_ConnectRequest:
		if t.ConnectRequest.GetServerConnection() == nil {
			return errors.New("trust: only server connections are accepted")
		}
		return nil
	case *remote.RemoteMessage_MessageBatch:
		return checkBatch(t.MessageBatch, routes, peer)
	default:
		return fmt.Errorf("trust: message %T is not accepted", t)
	}
}

// protoSerializer is protoactor's serializer id for protobuf.
const protoSerializer = 0

func checkBatch(b *remote.MessageBatch, routes map[string]string, peer netip.Addr) error {
	if b == nil {
		return errors.New("trust: empty batch")
	}
	for _, s := range b.Senders {
		if s == nil {
			return errors.New("trust: batch with a nil sender")
		}
		ap, err := netip.ParseAddrPort(s.Address)
		if err != nil || ap.Addr().Unmap() != peer {
			return fmt.Errorf("trust: sender %q is not on the connection's peer %s", s.Address, peer)
		}
	}
	for i, e := range b.Envelopes {
		switch {
		case e == nil:
			return fmt.Errorf("trust: envelope %d is nil", i)
		case e.SerializerId != protoSerializer:
			return fmt.Errorf("trust: envelope %d: serializer %d is not accepted", i, e.SerializerId)
		case e.TypeId < 0 || int(e.TypeId) >= len(b.TypeNames):
			return fmt.Errorf("trust: envelope %d: type index %d out of range", i, e.TypeId)
		case e.Target < 0 || int(e.Target) >= len(b.Targets) || b.Targets[e.Target] == nil:
			return fmt.Errorf("trust: envelope %d: target index %d out of range", i, e.Target)
		case e.Sender < 0 || int(e.Sender) > len(b.Senders):
			return fmt.Errorf("trust: envelope %d: sender index %d out of range", i, e.Sender)
		}
		target, typ := b.Targets[e.Target].Id, b.TypeNames[e.TypeId]
		if want, ok := routes[target]; !ok || want != typ {
			return fmt.Errorf("trust: envelope %d: %s to actor %q is not accepted", i, typ, target)
		}
	}
	return nil
}
