package trust

import (
	"context"
	"crypto/tls"
	"fmt"
	"net"
	"net/netip"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/asynkron/protoactor-go/actor"
	"github.com/asynkron/protoactor-go/remote"
	"google.golang.org/grpc"

	"github.com/shardns/shardns/internal/testutil"
)

var testRoutes = map[string]string{
	"dispatch":         "shardns.wire.v1.ZoneQuery",
	"dispatch-replies": "shardns.wire.v1.ZoneReply",
}

// testPeer is where the test batches come from; their senders are on it.
var testPeer = netip.MustParseAddr("10.0.0.7")

func batch(types []string, targets []string, envs ...*remote.MessageEnvelope) *remote.RemoteMessage {
	b := &remote.MessageBatch{TypeNames: types, Senders: []*actor.PID{{Address: "10.0.0.7:8090", Id: "dispatch-replies"}}}
	for _, t := range targets {
		b.Targets = append(b.Targets, &actor.PID{Address: "10.0.0.1:8090", Id: t})
	}
	b.Envelopes = envs
	return &remote.RemoteMessage{MessageType: &remote.RemoteMessage_MessageBatch{MessageBatch: b}}
}

func env(typeID, target int32) *remote.MessageEnvelope {
	return &remote.MessageEnvelope{TypeId: typeID, Target: target, MessageData: []byte{}}
}

func TestCheckMessage(t *testing.T) {
	t.Parallel()
	query := []string{"shardns.wire.v1.ZoneQuery"}
	for _, tc := range []struct {
		name    string
		msg     *remote.RemoteMessage
		wantErr string // empty: accepted
	}{
		{"connect", &remote.RemoteMessage{MessageType: &remote.RemoteMessage_ConnectRequest{ConnectRequest: &remote.ConnectRequest{
			ConnectionType: &remote.ConnectRequest_ServerConnection{ServerConnection: &remote.ServerConnection{SystemId: "x"}}}}}, ""},
		{"client connection", &remote.RemoteMessage{MessageType: &remote.RemoteMessage_ConnectRequest{ConnectRequest: &remote.ConnectRequest{
			ConnectionType: &remote.ConnectRequest_ClientConnection{ClientConnection: &remote.ClientConnection{}}}}}, "server connections"},
		{"zone query to dispatch", batch(query, []string{"dispatch"}, env(0, 0)), ""},
		{"reply to the replies actor", batch([]string{"shardns.wire.v1.ZoneReply"}, []string{"dispatch-replies"}, env(0, 0)), ""},
		{"both in one batch", batch([]string{"shardns.wire.v1.ZoneQuery", "shardns.wire.v1.ZoneReply"},
			[]string{"dispatch", "dispatch-replies"}, env(0, 0), env(1, 1)), ""},
		{"stop", batch([]string{"actor.Stop"}, []string{"dispatch"}, env(0, 0)), "actor.Stop"},
		{"poison pill", batch([]string{"actor.PoisonPill"}, []string{"dispatch"}, env(0, 0)), "actor.PoisonPill"},
		{"watch", batch([]string{"actor.Watch"}, []string{"dispatch-replies"}, env(0, 0)), "actor.Watch"},
		{"terminated", batch([]string{"actor.Terminated"}, []string{"dispatch"}, env(0, 0)), "actor.Terminated"},
		{"a query to another actor", batch(query, []string{"zones"}, env(0, 0)), `"zones"`},
		{"a query to the replies actor", batch(query, []string{"dispatch-replies"}, env(0, 0)), "not accepted"},
		{"an unknown type", batch([]string{"no.such.Type"}, []string{"dispatch"}, env(0, 0)), "no.such.Type"},
		{"type index out of range", batch(query, []string{"dispatch"}, env(1, 0)), "type index 1"},
		{"negative type index", batch(query, []string{"dispatch"}, env(-1, 0)), "type index -1"},
		{"target index out of range", batch(query, []string{"dispatch"}, env(0, 3)), "target index 3"},
		{"sender index out of range", batch(query, []string{"dispatch"}, &remote.MessageEnvelope{Sender: 2}), "sender index 2"},
		{"json serializer", batch(query, []string{"dispatch"}, &remote.MessageEnvelope{SerializerId: 1}), "serializer 1"},
		{"nil envelope", batch(query, []string{"dispatch"}, nil), "envelope 0 is nil"},
		{"a sender on another host", withSender(batch(query, []string{"dispatch"}, env(0, 0)), "10.0.0.8:8090"), "not on the connection's peer"},
		{"a sender on the peer's host, another port", withSender(batch(query, []string{"dispatch"}, env(0, 0)), "10.0.0.7:9999"), ""},
		{"a sender named by host name", withSender(batch(query, []string{"dispatch"}, env(0, 0)), "shardns-0:8090"), "not on the connection's peer"},
		{"disconnect", &remote.RemoteMessage{MessageType: &remote.RemoteMessage_DisconnectRequest{DisconnectRequest: &remote.DisconnectRequest{}}}, "not accepted"},
		{"empty", &remote.RemoteMessage{}, "not accepted"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			err := CheckMessage(tc.msg, testRoutes, testPeer)
			switch {
			case tc.wantErr == "" && err != nil:
				t.Fatalf("refused: %v", err)
			case tc.wantErr != "" && (err == nil || !strings.Contains(err.Error(), tc.wantErr)):
				t.Fatalf("error = %v, want one containing %q", err, tc.wantErr)
			}
		})
	}
}

// withSender adds a sender at addr to a batch.
func withSender(m *remote.RemoteMessage, addr string) *remote.RemoteMessage {
	b := m.GetMessageBatch()
	b.Senders = append(b.Senders, &actor.PID{Address: addr, Id: "dispatch-replies"})
	return m
}

// handshake runs TLS between a client and a server configured from their
// own keys and reports the client's and the server's error.
func handshake(t *testing.T, clientKeys, serverKeys [][]byte) (clientErr, serverErr error) {
	t.Helper()
	clientID, err := ReplicaTLS(clientKeys)
	if err != nil {
		t.Fatal(err)
	}
	serverID, err := ReplicaTLS(serverKeys)
	if err != nil {
		t.Fatal(err)
	}
	return handshakeConfigs(t, clientID.Client, serverID.Server)
}

// handshakeConfigs runs TLS between a client and a server configured with
// client and server.
func handshakeConfigs(t *testing.T, client, server *tls.Config) (clientErr, serverErr error) {
	t.Helper()
	a, b := net.Pipe()
	defer a.Close()
	defer b.Close()
	deadline := time.Now().Add(5 * time.Second)
	_ = a.SetDeadline(deadline)
	_ = b.SetDeadline(deadline)
	done := make(chan error, 1)
	go func() {
		s := tls.Server(b, server)
		err := s.Handshake()
		if err == nil {
			_, err = s.Read(make([]byte, 1)) // TLS 1.3: the client's certificate is checked by now
		}
		done <- err
		b.Close()
	}()
	c := tls.Client(a, client)
	clientErr = c.Handshake()
	if clientErr == nil {
		_, clientErr = c.Write([]byte{1})
	}
	return clientErr, <-done
}

// Two gossip keys for the TLS tests.
var (
	testKey1 = []byte("0123456789abcdef0123456789abcdef")
	testKey2 = []byte("fedcba9876543210fedcba9876543210")
)

func TestRemoteTLSPinsTheGossipKey(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name           string
		client, server [][]byte
		ok             bool
	}{
		{"same key", [][]byte{testKey1}, [][]byte{testKey1}, true},
		{"other key", [][]byte{testKey2}, [][]byte{testKey1}, false},
		{"client rotated first", [][]byte{testKey2, testKey1}, [][]byte{testKey1, testKey2}, true},
		{"server still on the old key only", [][]byte{testKey2, testKey1}, [][]byte{testKey1}, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			cerr, serr := handshake(t, tc.client, tc.server)
			if tc.ok && (cerr != nil || serr != nil) {
				t.Fatalf("client %v, server %v; want both to succeed", cerr, serr)
			}
			if !tc.ok && cerr == nil && serr == nil {
				t.Fatal("handshake with another key succeeded")
			}
		})
	}
}

func TestRejectionsCountAndBound(t *testing.T) {
	t.Parallel()
	var counted []string
	now := time.Unix(0, 0)
	r := NewRejections(func(reason string) { counted = append(counted, reason) }, nil, func() time.Time {
		now = now.Add(time.Second)
		return now
	})
	r.Record("10.0.0.9:7946", "stranger", ReasonNotPeer)
	r.Record("10.0.0.9:50123", "", ReasonNotPeer)
	r.Record("[fd00::9]:8090", "", ReasonRemoteConnection)
	got := r.List()
	if len(got) != 2 || got[0].Addr != "fd00::9" || got[1].Addr != "10.0.0.9" || got[1].Count != 2 || got[1].Name != "stranger" {
		t.Fatalf("rejections = %+v", got)
	}
	if len(counted) != 3 {
		t.Fatalf("counted %v, want every attempt", counted)
	}
	for i := range maxRejections + 10 {
		r.Record(net.JoinHostPort(net.IPv4(10, 1, byte(i>>8), byte(i)).String(), "1"), "", ReasonKey)
	}
	if n := len(r.List()); n != maxRejections {
		t.Fatalf("%d rejections kept, want %d", n, maxRejections)
	}
}

// ClientHandshake completes against a guarded remote port that holds the same
// key, and the port counts no refusal for it; with another key it fails.
func TestClientHandshakeChecksARemotePortWithoutARefusal(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name           string
		client, server [][]byte
		ok             bool
	}{
		{"plain text", nil, nil, true},
		{"same key", [][]byte{testKey1}, [][]byte{testKey1}, true},
		{"other key", [][]byte{testKey2}, [][]byte{testKey1}, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			rej := NewRejections(nil, nil, time.Now)
			admitted := func(netip.Addr) bool { return true }
			routes := map[Role]map[string]string{RoleUnproven: testRoutes, RoleReplica: testRoutes}
			server, err := NewGuard(GuardConfig{Keys: tc.server, Admitted: admitted, Routes: routes, Rejections: rej})
			if err != nil {
				t.Fatal(err)
			}
			client, err := NewGuard(GuardConfig{Keys: tc.client, Admitted: admitted, Routes: routes,
				Rejections: NewRejections(nil, nil, time.Now)})
			if err != nil {
				t.Fatal(err)
			}
			inner, err := net.Listen("tcp", "127.0.0.1:0")
			if err != nil {
				t.Fatal(err)
			}
			l := &closeWatcher{Listener: inner, closed: make(chan struct{}, 1)}
			srv := grpc.NewServer(server.ServerOptions()...)
			go srv.Serve(l)
			defer srv.Stop()
			conn, err := net.Dial("tcp", l.Addr().String())
			if err != nil {
				t.Fatal(err)
			}
			ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
			defer cancel()
			secured, err := client.ClientHandshake(ctx, l.Addr().String(), conn)
			if tc.ok && err != nil {
				t.Fatalf("handshake: %v", err)
			}
			if !tc.ok && err == nil {
				t.Fatal("handshake with another key succeeded")
			}
			if err == nil {
				secured.Close()
			}
			select {
			case <-l.closed:
			case <-ctx.Done():
				t.Fatal("the server never closed the connection")
			}
			// A failed TLS handshake closes the connection before the
			// guard, which it returns to, records the refusal.
			if !tc.ok {
				testutil.Eventually(t, 5*time.Second, func() error {
					if len(rej.List()) == 0 {
						return fmt.Errorf("no refusal recorded")
					}
					return nil
				})
			} else if got := rej.List(); len(got) != 0 {
				t.Fatalf("refusals recorded: %+v", got)
			}
		})
	}
}

// closeWatcher signals when the server closes a connection it accepted.
type closeWatcher struct {
	net.Listener
	closed chan struct{}
}

func (l *closeWatcher) Accept() (net.Conn, error) {
	c, err := l.Listener.Accept()
	if err != nil {
		return nil, err
	}
	return &watchedConn{Conn: c, closed: l.closed}, nil
}

type watchedConn struct {
	net.Conn
	closed chan struct{}
	once   sync.Once
}

func (c *watchedConn) Close() error {
	c.once.Do(func() { c.closed <- struct{}{} })
	return c.Conn.Close()
}
