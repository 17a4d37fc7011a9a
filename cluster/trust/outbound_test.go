package trust

import (
	"fmt"
	"io"
	"log/slog"
	"net"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/asynkron/protoactor-go/actor"
	"github.com/asynkron/protoactor-go/remote"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"

	"github.com/shardns/shardns/internal/testutil"
)

// What one address and one host may have queued is bounded; a message to
// an address with nothing queued is taken whatever its size; what is
// sent, or an endpoint that ended, frees its share; a host has only so
// many endpoints.
func TestOutboundBoundsQueues(t *testing.T) {
	t.Parallel()
	o := NewOutbound(OutboundLimits{QueueBytes: 1000, HostQueueBytes: 1500, EndpointsPerHost: 2}, nil)
	for i, step := range []struct {
		addr string
		size int
		ok   bool
	}{
		{"10.0.0.1:1", 600, true},
		{"10.0.0.1:1", 600, false}, // over the address's bound
		{"10.0.0.1:2", 600, true},  // the host's 1200 of 1500
		{"10.0.0.1:2", 400, false}, // over the host's bound
		{"10.0.0.1:3", 10, false},  // a third endpoint of the host
		{"10.0.0.2:1", 5000, true}, // nothing queued there
		{"[::1]:1", 10, true},      // another host
		{"10.0.0.2:1", 10, false},  // 5000 queued
		{"10.0.0.2:2", 10, false},  // the host holds 5000 already
	} {
		if got := o.admit(step.addr, step.size); got != step.ok {
			t.Fatalf("step %d: %d bytes to %s taken: %v, want %v", i, step.size, step.addr, got, step.ok)
		}
	}
	o.sent("10.0.0.1:1", &remote.MessageBatch{Envelopes: []*remote.MessageEnvelope{{MessageData: make([]byte, 600-MessageOverhead)}}})
	if q := o.Queued("10.0.0.1:1"); q != 0 {
		t.Fatalf("after its batch went out, %d bytes queued", q)
	}
	if !o.admit("10.0.0.1:1", 900) {
		t.Fatal("a message refused after the queue emptied")
	}
	o.terminated("10.0.0.1:2")
	if !o.admit("10.0.0.1:3", 10) {
		t.Fatal("an ended endpoint's place was not freed")
	}
	o.sent("10.0.0.9:1", &remote.MessageBatch{Envelopes: []*remote.MessageEnvelope{{}}}) // never admitted: nothing to free
	if q := o.Queued("10.0.0.9:1"); q != 0 {
		t.Fatalf("an address never sent to has %d bytes queued", q)
	}
}

// A process that names, as the address to answer, a port that accepts
// TCP and says nothing, or that serves gRPC and never answers
// protoactor's connect request: the messages to it are queued up to their
// bound and the rest dropped and counted; protoactor's endpoint writer
// gives up within its tries' deadlines, closing every connection it
// opened, and the queue is forgotten.
//
// Not in parallel: protoactor's remote.Start sets gRPC's logger, which
// every gRPC server and client of the process reads.
func TestOutboundGivesUpASilentPeer(t *testing.T) {
	rejections := NewRejections(nil, nil, time.Now)
	o := NewOutbound(OutboundLimits{ConnectTimeout: 200 * time.Millisecond, QueueBytes: 4 << 10}, rejections)
	system := actor.NewActorSystem(actor.WithLoggerFactory(func(*actor.ActorSystem) *slog.Logger {
		return slog.New(slog.NewTextHandler(io.Discard, nil))
	}))
	r := remote.NewRemote(system, remote.Configure("127.0.0.1", freeTCPPort(t),
		remote.WithDialOptions(append(o.DialOptions(), grpc.WithTransportCredentials(insecure.NewCredentials()))...)))
	o.Attach(system, r)
	r.Start() // before any peer serves: it sets gRPC's logger
	t.Cleanup(func() { r.Shutdown(false); o.Detach() })
	for _, tc := range []struct {
		name string
		peer func(t *testing.T) (string, *connCount)
	}{
		{"accepts TCP only", silentListener},
		{"never answers the connect request", mutePeer},
	} {
		t.Run(tc.name, func(t *testing.T) {
			silent, accepted := tc.peer(t)
			dropped := countReason(rejections, ReasonRemoteQueue)

			target := actor.NewPID(silent, "dispatch-replies")
			reply := &actor.PID{Address: silent, Id: strings.Repeat("a", 500)} // a proto message of about 520 bytes
			for range 100 {
				system.Root.Send(target, reply)
			}
			if q := o.Queued(silent); q == 0 || q > 4<<10 {
				t.Fatalf("%d bytes queued to the silent peer, want some, at most 4 KiB", q)
			}
			if n := countReason(rejections, ReasonRemoteQueue) - dropped; n == 0 || n == 100 {
				t.Fatalf("%d of 100 messages dropped as %s, want those past the bound", n, ReasonRemoteQueue)
			}
			// protoactor tries 5 times, 2 s apart.
			testutil.Eventually(t, 30*time.Second, func() error {
				if q := o.Queued(silent); q != 0 {
					return fmt.Errorf("%d bytes still queued to the silent peer", q)
				}
				if open := accepted.open(); open > 0 || accepted.total() == 0 {
					return fmt.Errorf("%d of %d connections to the silent peer still open", open, accepted.total())
				}
				return nil
			})
		})
	}
}

// mutePeer serves protoactor's remote over gRPC and never answers a
// stream; it tells how many connections it accepted and how many are
// still open.
func mutePeer(t *testing.T) (string, *connCount) {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	c := &connCount{}
	srv := grpc.NewServer()
	remote.RegisterRemotingServer(srv, mute{})
	go srv.Serve(countingListener{Listener: l, c: c})
	t.Cleanup(srv.Stop)
	return l.Addr().String(), c
}

// mute is a remoting server that reads its streams and never writes.
type mute struct {
	remote.UnimplementedRemotingServer
}

func (mute) Receive(s remote.Remoting_ReceiveServer) error {
	for {
		if _, err := s.Recv(); err != nil {
			return err
		}
	}
}

type countingListener struct {
	net.Listener
	c *connCount
}

func (l countingListener) Accept() (net.Conn, error) {
	conn, err := l.Listener.Accept()
	if err != nil {
		return nil, err
	}
	l.c.add(1, 1)
	return &countedConn{Conn: conn, c: l.c}, nil
}

type countedConn struct {
	net.Conn
	c    *connCount
	once sync.Once
}

func (c *countedConn) Close() error {
	c.once.Do(func() { c.c.add(0, -1) })
	return c.Conn.Close()
}

// silentListener accepts connections and never writes; it tells how many
// it accepted and how many their dialler has not closed.
func silentListener(t *testing.T) (string, *connCount) {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { l.Close() })
	c := &connCount{}
	go func() {
		for {
			conn, err := l.Accept()
			if err != nil {
				return
			}
			c.add(1, 1)
			go func() {
				io.Copy(io.Discard, conn) // until the dialler closes it
				conn.Close()
				c.add(0, -1)
			}()
		}
	}()
	return l.Addr().String(), c
}

type connCount struct {
	mu                  sync.Mutex
	accepted, stillOpen int
}

func (c *connCount) add(accepted, open int) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.accepted += accepted
	c.stillOpen += open
}

func (c *connCount) open() int  { c.mu.Lock(); defer c.mu.Unlock(); return c.stillOpen }
func (c *connCount) total() int { c.mu.Lock(); defer c.mu.Unlock(); return c.accepted }

func freeTCPPort(t *testing.T) int {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port
}
