package trust

import (
	"bytes"
	"context"
	"errors"
	"io"
	"log/slog"
	"net"
	"net/netip"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/asynkron/protoactor-go/actor"
	"github.com/asynkron/protoactor-go/remote"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials"
)

// The roles a peer proves follow from the key its certificate comes from:
// a node-local process holding the credential is a node-local process to
// a replica, never a replica; a replica is a replica to both; two
// node-local processes do not accept each other, and a credential of
// another cluster is refused.
func TestRolesFollowTheCertificate(t *testing.T) {
	t.Parallel()
	keys := [][]byte{testKey1}
	replica := mustReplica(t, keys)
	cred, err := NodeLocalCredential(keys)
	if err != nil {
		t.Fatal(err)
	}
	nodeLocal := mustNodeLocal(t, cred)
	otherCred, err := NodeLocalCredential([][]byte{testKey2})
	if err != nil {
		t.Fatal(err)
	}
	stranger := mustNodeLocal(t, otherCred)
	for _, tc := range []struct {
		name           string
		client, server *Identity
		role           Role // the client's, as the server sees it; RoleUnproven: refused
	}{
		{"replica to replica", replica, replica, RoleReplica},
		{"node-local to replica", nodeLocal, replica, RoleNodeLocal},
		{"replica to node-local", replica, nodeLocal, RoleReplica},
		{"node-local to node-local", nodeLocal, nodeLocal, RoleUnproven},
		{"another cluster's node-local to replica", stranger, replica, RoleUnproven},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			role, err := handshakeRole(t, tc.client, tc.server)
			switch {
			case tc.role == RoleUnproven && err == nil:
				t.Fatalf("handshake succeeded as %v, want it refused", role)
			case tc.role != RoleUnproven && err != nil:
				t.Fatalf("handshake: %v", err)
			case role != tc.role:
				t.Fatalf("the server saw %v, want %v", role, tc.role)
			}
		})
	}
}

// The credential holds neither replica key nor anything a replica
// presents: a process holding it cannot pass for a replica. It survives
// its encoding, and a rotation's keys all appear in it.
func TestCredentialCannotPassForAReplica(t *testing.T) {
	t.Parallel()
	keys := [][]byte{testKey1, testKey2}
	cred, err := NodeLocalCredential(keys)
	if err != nil {
		t.Fatal(err)
	}
	for _, k := range keys {
		if bytes.Contains(cred.Marshal(), k) || bytes.Equal(cred.Key, k) {
			t.Fatal("the credential contains a replica key")
		}
	}
	// The best a credential holder can do: use its key as a replica key.
	forged := mustReplica(t, [][]byte{cred.Key})
	if role, err := handshakeRole(t, forged, mustReplica(t, keys)); err == nil {
		t.Fatalf("a certificate made from the credential passed as %v", role)
	}
	parsed, err := ParseCredential(cred.Marshal())
	if err != nil || !parsed.Same(cred) || len(parsed.Replicas) != 2 {
		t.Fatalf("round trip: %+v, %v", parsed, err)
	}
	for _, bad := range []string{"", "kind: other\n", "kind: shardns-nodelocal-credential/v1\nkey: AAAA\n", "{[", "kind: shardns-nodelocal-credential/v1\nunknown: 1\n"} {
		if _, err := ParseCredential([]byte(bad)); err == nil {
			t.Errorf("ParseCredential(%q) accepted it", bad)
		}
	}
}

// Through a guarded gRPC server as protoactor's would be: a node-local
// peer may send a question, never a reply; a replica may send both; a
// batch naming a sender on another address is refused, whoever sends it.
func TestGuardRoutesByRole(t *testing.T) {
	t.Parallel()
	keys := [][]byte{testKey1}
	cred, err := NodeLocalCredential(keys)
	if err != nil {
		t.Fatal(err)
	}
	routes := map[Role]map[string]string{
		RoleReplica:   testRoutes,
		RoleNodeLocal: {"dispatch": testRoutes["dispatch"]},
	}
	rejections := NewRejections(nil, nil, time.Now)
	server, err := NewGuard(GuardConfig{Keys: keys, Admitted: func(netip.Addr) bool { return true },
		Routes: routes, Rejections: rejections, Limits: Limits{MessageBytes: 64 << 10}})
	if err != nil {
		t.Fatal(err)
	}
	addr := serveRemoting(t, server)
	query := batch([]string{"shardns.wire.v1.ZoneQuery"}, []string{"dispatch"}, env(0, 0))
	reply := batch([]string{"shardns.wire.v1.ZoneReply"}, []string{"dispatch-replies"}, env(0, 0))
	huge := batch([]string{"shardns.wire.v1.ZoneQuery"}, []string{"dispatch"},
		&remote.MessageEnvelope{MessageData: make([]byte, 128<<10)})
	for _, tc := range []struct {
		name   string
		as     GuardConfig
		msg    *remote.RemoteMessage
		sender string
		ok     bool
	}{
		{"a node-local question", GuardConfig{Credential: &cred}, query, "127.0.0.1:1", true},
		{"a node-local reply", GuardConfig{Credential: &cred}, reply, "127.0.0.1:1", false},
		{"a replica question", GuardConfig{Keys: keys}, query, "127.0.0.1:1", true},
		{"a replica reply", GuardConfig{Keys: keys}, reply, "127.0.0.1:1", true},
		{"a replica naming another address as sender", GuardConfig{Keys: keys}, query, "127.0.0.2:1", false},
		// Refused at its header, before gRPC allocates it: the connection is closed.
		{"a message over the size limit", GuardConfig{Keys: keys}, huge, "127.0.0.1:1", false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			tc.as.Admitted = func(netip.Addr) bool { return true }
			client, err := NewGuard(tc.as)
			if err != nil {
				t.Fatal(err)
			}
			m := tc.msg
			m.GetMessageBatch().Senders = []*actor.PID{{Address: tc.sender, Id: "dispatch-replies"}}
			err = sendOne(t, client, addr, m)
			if tc.ok && err != nil {
				t.Fatalf("refused: %v", err)
			}
			if !tc.ok && (err == nil || !strings.Contains(err.Error(), "PermissionDenied") && !strings.Contains(err.Error(), "Unavailable")) {
				t.Fatalf("error %v, want PermissionDenied, or the connection closed (Unavailable)", err)
			}
		})
	}
	limited := false
	for _, r := range rejections.List() {
		limited = limited || r.Reason == ReasonRemoteLimit
	}
	if !limited {
		t.Errorf("the message over the size limit was not counted as %s: %+v", ReasonRemoteLimit, rejections.List())
	}
}

// A peer cannot hold more connections, or more handshakes in progress,
// than the limits; a closed connection frees its slot.
func TestConnLimits(t *testing.T) {
	t.Parallel()
	l := newConnLimits(Limits{ConnectionsPerPeer: 2, Connections: 3, HandshakesPerPeer: 1, Handshakes: 2})
	a, b := netip.MustParseAddr("10.0.0.1"), netip.MustParseAddr("10.0.0.2")
	conn := func() net.Conn { c, _ := net.Pipe(); return c }
	c1, done1, err := l.open(a, conn())
	if err != nil {
		t.Fatal(err)
	}
	if _, _, err := l.open(a, conn()); !errors.Is(err, errLimit) {
		t.Fatalf("a second handshake from one peer: %v, want the limit", err)
	}
	done1()
	done1() // twice is once
	c2, done2, err := l.open(a, conn())
	if err != nil {
		t.Fatal(err)
	}
	done2()
	if _, _, err := l.open(a, conn()); !errors.Is(err, errLimit) {
		t.Fatalf("a third connection from one peer: %v, want the limit", err)
	}
	c3, done3, err := l.open(b, conn())
	if err != nil {
		t.Fatalf("another peer: %v", err)
	}
	done3()
	if _, _, err := l.open(b, conn()); !errors.Is(err, errLimit) {
		t.Fatalf("a fourth connection in all: %v, want the limit", err)
	}
	c1.Close()
	c1.Close() // twice is once
	if _, _, err := l.open(a, conn()); err != nil {
		t.Fatalf("after a close: %v", err)
	}
	c2.Close()
	c3.Close()
}

// One address may start only so many handshakes a second, another keeps
// its own allowance, and the allowance comes back with time.
func TestHandshakeRate(t *testing.T) {
	t.Parallel()
	now := time.Unix(0, 0)
	l := newConnLimits(Limits{HandshakeRate: 5})
	l.now = func() time.Time { return now }
	a, b := netip.MustParseAddr("10.0.0.1"), netip.MustParseAddr("10.0.0.2")
	open := func(peer netip.Addr) error {
		c, done, err := l.open(peer, &net.TCPConn{})
		if err == nil {
			done()
			c.(*limitedConn).once.Do(c.(*limitedConn).close)
		}
		return err
	}
	for i := range 10 { // the burst: twice the rate
		if err := open(a); err != nil {
			t.Fatalf("handshake %d of the burst: %v", i+1, err)
		}
	}
	if err := open(a); !errors.Is(err, errLimit) {
		t.Fatalf("past the burst: %v, want the limit", err)
	}
	if err := open(b); err != nil {
		t.Fatalf("another address: %v", err)
	}
	now = now.Add(time.Second)
	if err := open(a); err != nil {
		t.Fatalf("a second later: %v", err)
	}
}

// A flood of rejections from ever new addresses logs a bounded number of
// lines a minute, then one that sums the rest up; each is still counted.
func TestRejectionsLogIsBounded(t *testing.T) {
	t.Parallel()
	var buf bytes.Buffer
	now := time.Unix(0, 0)
	counted := 0
	r := NewRejections(func(string) { counted++ }, slog.New(slog.NewTextHandler(&buf, nil)), func() time.Time { return now })
	for i := range 1000 {
		r.Record(netip.AddrFrom4([4]byte{10, 9, byte(i >> 8), byte(i)}).String()+":7946", "", ReasonKey)
	}
	if lines := strings.Count(buf.String(), "\n"); lines != maxLogsPerMinute {
		t.Fatalf("%d lines logged for 1000 new addresses in a minute, want %d", lines, maxLogsPerMinute)
	}
	now = now.Add(time.Minute)
	r.Record("10.10.0.1:7946", "", ReasonKey)
	if !strings.Contains(buf.String(), "unlogged="+strconv.Itoa(1000-maxLogsPerMinute)) {
		t.Fatalf("no summary of the unlogged rejections:\n%s", buf.String())
	}
	if counted != 1001 {
		t.Fatalf("counted %d, want every attempt", counted)
	}
}

func mustReplica(t *testing.T, keys [][]byte) *Identity {
	t.Helper()
	id, err := ReplicaTLS(keys)
	if err != nil {
		t.Fatal(err)
	}
	return id
}

func mustNodeLocal(t *testing.T, c Credential) *Identity {
	t.Helper()
	id, err := NodeLocalTLS(c)
	if err != nil {
		t.Fatal(err)
	}
	return id
}

// handshakeRole runs TLS from client to server and returns the role the
// server sees the client in, or the first error of either side.
func handshakeRole(t *testing.T, client, server *Identity) (Role, error) {
	t.Helper()
	a, b := net.Pipe()
	defer a.Close()
	defer b.Close()
	deadline := time.Now().Add(5 * time.Second)
	_ = a.SetDeadline(deadline)
	_ = b.SetDeadline(deadline)
	type result struct {
		role Role
		err  error
	}
	done := make(chan result, 1)
	go func() {
		_, info, err := credentials.NewTLS(server.Server).ServerHandshake(b)
		if err != nil {
			done <- result{err: err}
			b.Close()
			return
		}
		done <- result{role: server.RoleOf(info.(credentials.TLSInfo).State)}
	}()
	_, _, cerr := credentials.NewTLS(client.Client).ClientHandshake(context.Background(), "shardns", a)
	if cerr != nil {
		a.Close()
	}
	res := <-done
	return res.role, errors.Join(cerr, res.err)
}

// sink is a remoting server that reads its stream to the end.
type sink struct {
	remote.UnimplementedRemotingServer
}

func (sink) Receive(s remote.Remoting_ReceiveServer) error {
	for {
		if _, err := s.Recv(); err != nil {
			if errors.Is(err, io.EOF) {
				return nil
			}
			return err
		}
	}
}

func serveRemoting(t *testing.T, g *Guard) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	srv := grpc.NewServer(g.ServerOptions()...)
	remote.RegisterRemotingServer(srv, sink{})
	go srv.Serve(l)
	t.Cleanup(srv.Stop)
	return l.Addr().String()
}

// sendOne sends m on a new stream from client's identity and returns how
// the server ended the stream.
func sendOne(t *testing.T, client *Guard, addr string, m *remote.RemoteMessage) error {
	t.Helper()
	conn, err := grpc.Dial(addr, client.DialOptions()...)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	stream, err := remote.NewRemotingClient(conn).Receive(ctx)
	if err != nil {
		return err
	}
	if err := stream.Send(m); err != nil {
		return err
	}
	if err := stream.CloseSend(); err != nil {
		return err
	}
	if _, err := stream.Recv(); err != nil && !errors.Is(err, io.EOF) {
		return err
	}
	return nil
}

// Through the three rolling restarts of a key rotation (docs/hardening.md),
// with the node-local DaemonSet restarted after each: the credential the
// replicas of a step write is accepted by them and by the replicas of the
// next step, which the step after them runs beside, both ways; the last
// one holds the new key alone.
func TestCredentialThroughARotation(t *testing.T) {
	t.Parallel()
	steps := [][][]byte{{testKey1}, {testKey1, testKey2}, {testKey2, testKey1}, {testKey2}}
	for i, keys := range steps {
		cred, err := NodeLocalCredential(keys)
		if err != nil {
			t.Fatal(err)
		}
		nodeLocal := mustNodeLocal(t, cred)
		for _, replicaKeys := range steps[i:min(i+2, len(steps))] {
			replica := mustReplica(t, replicaKeys)
			if role, err := handshakeRole(t, nodeLocal, replica); err != nil || role != RoleNodeLocal {
				t.Errorf("step %d: a node-local process with the credential of %d keys to a replica of %d: %v, %v",
					i, len(keys), len(replicaKeys), role, err)
			}
			if role, err := handshakeRole(t, replica, nodeLocal); err != nil || role != RoleReplica {
				t.Errorf("step %d: a replica of %d keys to a node-local process: %v, %v", i, len(replicaKeys), role, err)
			}
		}
	}
	last, _ := NodeLocalCredential(steps[3])
	if old := mustReplica(t, steps[0]); func() bool { _, err := handshakeRole(t, mustNodeLocal(t, last), old); return err == nil }() {
		t.Error("after the rotation the node-local credential still trusts the old key")
	}
}
