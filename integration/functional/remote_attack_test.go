package functional

import (
	"bytes"
	"context"
	"crypto/tls"
	"encoding/binary"
	"errors"
	"fmt"
	"net"
	"net/netip"
	"os"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/asynkron/protoactor-go/remote"
	"github.com/miekg/dns"
	"golang.org/x/net/http2"
	"golang.org/x/net/http2/hpack"
	"google.golang.org/grpc"
	"google.golang.org/protobuf/proto"

	"github.com/shardns/shardns/cluster/trust"
	"github.com/shardns/shardns/cluster/wire"
	"github.com/shardns/shardns/integration/harness"
)

// The actor remote port (cluster.remote) is reachable, with the
// node-local credential, by every node: a compromised node holds that
// credential and its address is admitted. What it may send there is
// questions, a few hundred bytes each; it must not make a replica hold
// memory for messages it only announces.

// remoteAttackHold is how long each remote attack is held once in place.
const remoteAttackHold = 10 * time.Second

// TestRemoteBigHeaders holds gRPC streams of protoactor's Receive method
// on the remote port with the node-local credential, each sending a
// message header that declares 2 MiB and no byte of the message: 16
// connections of 4 streams (as first measured), then 64 of 4 (every
// connection the port allows one address). The replica stays within
// budget, answers throughout, and counts the refusals.
func TestRemoteBigHeaders(t *testing.T) {
	h := startHostileTarget(t, "")
	for _, c := range []struct{ conns, streams int }{{16, 4}, {64, 4}} {
		before := harness.MetricSum(t, h.http, "shardns_cluster_rejected_members_total", `reason="remote-limit"`)
		r := runHostile(t, h, hostileSpec{Kind: "remote-big-headers", Target: h.remote, Conns: c.conns,
			Streams: c.streams, Size: 2 << 20, Files: map[string]string{"credential": h.credentialFile}}, remoteAttackHold)
		r.check(t, 32)
		after := harness.MetricSum(t, h.http, "shardns_cluster_rejected_members_total", `reason="remote-limit"`)
		t.Logf("remote-limit refusals during the attack: %.0f", after-before)
		if after <= before {
			t.Errorf("%d streams declaring 2 MiB were not refused: shardns_cluster_rejected_members_total{reason=\"remote-limit\"} stayed %.0f",
				r.Opened, after)
		}
	}
}

// TestRemoteSilentSender asks the replica's dispatch actor, with the
// node-local credential, a stream of questions that name as the address
// to answer ports of the attacker's own host that accept TCP and never
// answer: the replica's connections back to them never complete, and the
// replies to them queue. The replica stays within budget, answers its
// client throughout, and counts the replies it drops.
func TestRemoteSilentSender(t *testing.T) {
	h := startHostileTarget(t, "")
	before := harness.MetricSum(t, h.http, "shardns_cluster_rejected_members_total", `reason="remote-queue"`)
	r := runHostile(t, h, hostileSpec{Kind: "remote-silent-sender", Target: h.remote, Conns: 8, Streams: 1,
		Files: map[string]string{"credential": h.credentialFile}}, remoteAttackHold)
	r.check(t, 32)
	after := harness.MetricSum(t, h.http, "shardns_cluster_rejected_members_total", `reason="remote-queue"`)
	t.Logf("replies dropped to silent senders: %.0f", after-before)
	if after <= before {
		t.Errorf("no reply to a silent sender was dropped: shardns_cluster_rejected_members_total{reason=\"remote-queue\"} stayed %.0f", after)
	}
}

// remoteSilentSender opens s.Conns connections to the remote port at
// s.Target with the node-local credential in s.Files["credential"] and,
// on each, sends batches of questions to the dispatch actor as fast as it
// can, naming as their sender a port of its own that accepts connections
// and never answers (one port per connection).
func remoteSilentSender(ctx context.Context, s hostileSpec, ready func(int64)) error {
	cred, err := readCredential(s.Files["credential"])
	if err != nil {
		return err
	}
	g, err := trust.NewGuard(trust.GuardConfig{Credential: &cred, Admitted: func(netip.Addr) bool { return false }})
	if err != nil {
		return err
	}
	var sending, sent atomic.Int64
	var wg sync.WaitGroup
	for range s.Conns {
		silent, err := holdSilent(ctx, &wg)
		if err != nil {
			return err
		}
		batch := silentQuestions(s.Target, silent)
		wg.Go(func() {
			first := true
			for ctx.Err() == nil {
				n := askUntilRefused(ctx, g, s.Target, batch, func() {
					if first {
						first = false
						sending.Add(1)
					}
				})
				sent.Add(n)
				select {
				case <-ctx.Done():
				case <-time.After(100 * time.Millisecond):
				}
			}
		})
	}
	waitUntil(ctx, func() bool { return sending.Load() == int64(s.Conns) })
	ready(sending.Load())
	<-ctx.Done()
	wg.Wait()
	fmt.Fprintf(os.Stderr, "remote-silent-sender: %d batches sent\n", sent.Load())
	return nil
}

// waitUntil polls done until it holds or ctx ends.
func waitUntil(ctx context.Context, done func() bool) {
	for !done() && ctx.Err() == nil {
		select {
		case <-ctx.Done():
		case <-time.After(50 * time.Millisecond):
		}
	}
}

// holdSilent listens on a loopback port that accepts connections and
// never reads or writes them, until ctx ends.
func holdSilent(ctx context.Context, wg *sync.WaitGroup) (string, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return "", err
	}
	wg.Go(func() {
		<-ctx.Done()
		l.Close()
	})
	wg.Go(func() {
		var held []net.Conn
		defer func() {
			for _, c := range held {
				c.Close()
			}
		}()
		for {
			c, err := l.Accept()
			if err != nil {
				return
			}
			held = append(held, c)
		}
	})
	return l.Addr().String(), nil
}

// silentQuestions is a batch of 64 questions for a name the target
// serves, to its dispatch actor, sent as an actor at silent.
func silentQuestions(target, silent string) *remote.RemoteMessage {
	var qs []proto.Message
	for i := range 64 {
		qs = append(qs, &wire.ZoneQuery{Id: uint64(i + 1), Zone: "shop.svc.cluster.local.", Name: hostileQuestion, Qtype: uint32(dns.TypeA)})
	}
	return forgedBatch(target, "dispatch", silent, qs...)
}

// askUntilRefused sends batch on a stream to target until the stream or
// ctx ends, calling started once the first batch went; it returns the
// batches sent.
func askUntilRefused(ctx context.Context, g *trust.Guard, target string, batch *remote.RemoteMessage, started func()) int64 {
	conn, err := grpc.DialContext(ctx, target, g.DialOptions()...)
	if err != nil {
		return 0
	}
	defer conn.Close()
	stream, err := remote.NewRemotingClient(conn).Receive(ctx)
	if err != nil {
		return 0
	}
	var n int64
	for ctx.Err() == nil && stream.Send(batch) == nil {
		if n++; n == 1 {
			started()
		}
	}
	return n
}

// remoteBigHeaders opens s.Conns TLS connections to the remote port at
// s.Target with the node-local credential in s.Files["credential"], and
// on each s.Streams streams of protoactor's Receive method, each sending
// the 5-byte header of a gRPC message of s.Size bytes and nothing more.
// A connection the replica closes is opened again, at the pace the
// replica lets it; what it reports is the streams sent in the first round.
func remoteBigHeaders(ctx context.Context, s hostileSpec, ready func(int64)) error {
	cred, err := readCredential(s.Files["credential"])
	if err != nil {
		return err
	}
	id, err := trust.NodeLocalTLS(cred)
	if err != nil {
		return err
	}
	var opened atomic.Int64
	var firstRound sync.WaitGroup
	var wg sync.WaitGroup
	dialing := make(chan struct{}, 4) // within the handshakes one address may have in progress
	for range s.Conns {
		firstRound.Add(1)
		wg.Go(func() {
			first := true
			for ctx.Err() == nil {
				dialing <- struct{}{}
				conn, n := openBigHeaders(ctx, id.Client, s)
				<-dialing
				opened.Add(n)
				if first {
					first = false
					firstRound.Done()
				}
				if conn != nil {
					conn.wait(ctx)
				}
				select {
				case <-ctx.Done():
				case <-time.After(100 * time.Millisecond): // the replica's handshake rate
				}
			}
		})
	}
	firstRound.Wait()
	ready(opened.Load())
	<-ctx.Done()
	wg.Wait()
	if opened.Load() == 0 {
		return errors.New("no stream could be opened")
	}
	return nil
}

// h2Conn is an HTTP/2 connection written by hand, so that it can send
// what no gRPC client sends: half a message.
type h2Conn struct {
	conn   net.Conn
	mu     sync.Mutex // writes: the reader acknowledges settings and pings
	fr     *http2.Framer
	closed chan struct{}
}

// dialErrors prints the first dial an attacker could not make.
var dialErrors sync.Once

// openBigHeaders dials s.Target with client's TLS settings and opens
// s.Streams streams declaring s.Size bytes each; it returns the
// connection (nil if it failed) and the streams it sent.
func openBigHeaders(ctx context.Context, client *tls.Config, s hostileSpec) (*h2Conn, int64) {
	cfg := client.Clone()
	cfg.NextProtos = []string{"h2"}
	d := tls.Dialer{Config: cfg, NetDialer: &net.Dialer{Timeout: 5 * time.Second}}
	raw, err := d.DialContext(ctx, "tcp", s.Target)
	if err != nil {
		dialErrors.Do(func() { fmt.Fprintln(os.Stderr, "remote-big-headers: first refused dial:", err) })
		return nil, 0
	}
	c := &h2Conn{conn: raw, fr: http2.NewFramer(raw, raw), closed: make(chan struct{})}
	go c.read()
	c.mu.Lock()
	defer c.mu.Unlock()
	if _, err := raw.Write([]byte(http2.ClientPreface)); err != nil || c.fr.WriteSettings() != nil {
		raw.Close()
		return nil, 0
	}
	var sent int64
	header := make([]byte, 5)
	binary.BigEndian.PutUint32(header[1:], uint32(s.Size))
	for i := range s.Streams {
		id := uint32(2*i + 1)
		if c.fr.WriteHeaders(http2.HeadersFrameParam{StreamID: id, BlockFragment: grpcRequestHeaders(s.Target),
			EndHeaders: true}) != nil || c.fr.WriteData(id, false, header) != nil {
			break
		}
		sent++
	}
	return c, sent
}

// read answers the server's settings and pings until the connection ends.
func (c *h2Conn) read() {
	defer close(c.closed)
	defer c.conn.Close()
	for {
		f, err := c.fr.ReadFrame()
		if err != nil {
			return
		}
		c.mu.Lock()
		switch f := f.(type) {
		case *http2.SettingsFrame:
			if !f.IsAck() {
				err = c.fr.WriteSettingsAck()
			}
		case *http2.PingFrame:
			if !f.IsAck() {
				err = c.fr.WritePing(true, f.Data)
			}
		case *http2.GoAwayFrame:
			err = errors.New("goaway")
		}
		c.mu.Unlock()
		if err != nil {
			return
		}
	}
}

// wait returns when the connection ends or ctx does; it closes it.
func (c *h2Conn) wait(ctx context.Context) {
	select {
	case <-ctx.Done():
	case <-c.closed:
	}
	c.conn.Close()
}

// grpcRequestHeaders are the headers of a call to protoactor's Receive.
func grpcRequestHeaders(authority string) []byte {
	var buf bytes.Buffer
	enc := hpack.NewEncoder(&buf)
	for _, f := range [][2]string{{":method", "POST"}, {":scheme", "https"}, {":path", "/remote.Remoting/Receive"},
		{":authority", authority}, {"content-type", "application/grpc"}, {"te", "trailers"}} {
		enc.WriteField(hpack.HeaderField{Name: f[0], Value: f[1]})
	}
	return buf.Bytes()
}

// readCredential reads the node-local credential in the file at path.
func readCredential(path string) (trust.Credential, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return trust.Credential{}, err
	}
	return trust.ParseCredential(b)
}
