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
	"google.golang.org/grpc/peer"
	"google.golang.org/grpc/status"
)

// Guard is what a replica's actor remote port lets in. protoactor-go's
// remote server hands every message it reads to the actor named in it,
// system messages included (a Stop or a PoisonPill stops any actor, and
// an unregistered type or an index out of range panics the reader), and
// its unary methods panic outright. So the Guard sits in front of it as
// gRPC server options: a connection from an address that is not admitted
// is closed during the handshake, before anything is read; with keys the
// handshake is TLS with the certificate derived from them, both ways; and
// every message of the one stream method is checked before protoactor
// sees it.
type Guard struct {
	admitted   func(netip.Addr) bool
	routes     map[string]string // actor name → the one message type it accepts
	rejections *Rejections
	server     credentials.TransportCredentials
	client     credentials.TransportCredentials
}

// GuardConfig configures a Guard.
type GuardConfig struct {
	// Keys are the gossip keys, the first one in use (see RemoteTLS); none
	// leaves the remote port in plain text, for loopback and explicitly
	// insecure clusters.
	Keys [][]byte
	// Admitted reports whether a connection from addr may be served: the
	// addresses of admitted members. Called on every new connection.
	Admitted func(addr netip.Addr) bool
	// Routes maps each actor that members may send to onto the full
	// protobuf name of the one message type it takes.
	Routes map[string]string
	// Rejections records what the Guard turns away.
	Rejections *Rejections
}

// handshakeTimeout bounds a connection that never finishes its handshake
// (gRPC's default is two minutes).
const handshakeTimeout = 5 * time.Second

// NewGuard returns the Guard of cfg.
func NewGuard(cfg GuardConfig) (*Guard, error) {
	if cfg.Admitted == nil {
		return nil, errors.New("trust: a guard needs an admission function")
	}
	g := &Guard{admitted: cfg.Admitted, routes: cfg.Routes, rejections: cfg.Rejections,
		server: insecure.NewCredentials(), client: insecure.NewCredentials()}
	if len(cfg.Keys) > 0 {
		server, client, err := RemoteTLS(cfg.Keys)
		if err != nil {
			return nil, err
		}
		g.server, g.client = credentials.NewTLS(server), credentials.NewTLS(client)
	}
	return g, nil
}

// ServerOptions are the options of the remote port's gRPC server.
func (g *Guard) ServerOptions() []grpc.ServerOption {
	return []grpc.ServerOption{
		grpc.Creds(admittingCreds{TransportCredentials: g.server, g: g}),
		grpc.ConnectionTimeout(handshakeTimeout),
		grpc.StreamInterceptor(g.checkStream),
		grpc.UnaryInterceptor(g.refuseUnary),
	}
}

// DialOptions are the options this replica dials other replicas with.
func (g *Guard) DialOptions() []grpc.DialOption {
	return []grpc.DialOption{grpc.WithTransportCredentials(g.client)}
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
	conn, info, err := c.TransportCredentials.ServerHandshake(raw)
	if err != nil {
		c.g.rejections.Record(from, "", ReasonRemoteConnection)
		return nil, nil, err
	}
	return conn, info, nil
}

func (c admittingCreds) Clone() credentials.TransportCredentials {
	return admittingCreds{TransportCredentials: c.TransportCredentials.Clone(), g: c.g}
}

// checkStream serves protoactor's one stream method with every message
// checked; any other method is refused.
func (g *Guard) checkStream(srv any, ss grpc.ServerStream, info *grpc.StreamServerInfo, handler grpc.StreamHandler) error {
	from := peerAddr(ss.Context())
	if info.FullMethod != receiveMethod {
		g.rejections.Record(from, "", ReasonRemoteMessage)
		return status.Errorf(codes.PermissionDenied, "method %s is not served", info.FullMethod)
	}
	return handler(srv, &checkedStream{ServerStream: ss, g: g, from: from})
}

// refuseUnary refuses protoactor's unary methods, which are unimplemented
// and panic.
func (g *Guard) refuseUnary(ctx context.Context, _ any, info *grpc.UnaryServerInfo, _ grpc.UnaryHandler) (any, error) {
	g.rejections.Record(peerAddr(ctx), "", ReasonRemoteMessage)
	return nil, status.Errorf(codes.PermissionDenied, "method %s is not served", info.FullMethod)
}

// checkedStream ends the stream at the first message that is not a
// connection request or a batch of allowed messages.
type checkedStream struct {
	grpc.ServerStream
	g    *Guard
	from string
}

func (s *checkedStream) RecvMsg(m any) error {
	if err := s.ServerStream.RecvMsg(m); err != nil {
		return err
	}
	msg, ok := m.(*remote.RemoteMessage)
	if !ok {
		return status.Error(codes.Internal, "trust: unexpected stream message type")
	}
	if err := CheckMessage(msg, s.g.routes); err != nil {
		s.g.rejections.Record(s.from, "", ReasonRemoteMessage)
		return status.Error(codes.PermissionDenied, err.Error())
	}
	return nil
}

func peerAddr(ctx context.Context) string {
	if p, ok := peer.FromContext(ctx); ok && p.Addr != nil {
		return p.Addr.String()
	}
	return "unknown"
}

// CheckMessage accepts a connection request, and a message batch whose
// every envelope is well formed, protobuf-serialised, and carries the
// type routes names for its target actor. Everything else, protoactor's
// system messages among it, is an error.
func CheckMessage(m *remote.RemoteMessage, routes map[string]string) error {
	switch t := m.GetMessageType().(type) {
	case *remote.RemoteMessage_ConnectRequest:
		if t.ConnectRequest.GetServerConnection() == nil {
			return errors.New("trust: only server connections are accepted")
		}
		return nil
	case *remote.RemoteMessage_MessageBatch:
		return checkBatch(t.MessageBatch, routes)
	default:
		return fmt.Errorf("trust: message %T is not accepted", t)
	}
}

// protoSerializer is protoactor's serializer id for protobuf.
const protoSerializer = 0

func checkBatch(b *remote.MessageBatch, routes map[string]string) error {
	if b == nil {
		return errors.New("trust: empty batch")
	}
	for _, s := range b.Senders {
		if s == nil {
			return errors.New("trust: batch with a nil sender")
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
