package functional

import (
	"context"
	"crypto/rand"
	"encoding/binary"
	"fmt"
	"net"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/shardns/shardns/integration/harness"
	"github.com/shardns/shardns/internal/testutil"
)

// The gossip port (cluster.bind, 7946) is reachable by every pod unless
// a NetworkPolicy the network plugin enforces says otherwise, and
// memberlist reads a stream's whole payload, up to the length its header
// declares (20 MiB), before the key decides anything. A stream must cost
// the replica what the largest legitimate push/pull costs and no more,
// and only a few of them may be read at once.

// Stream headers as memberlist v0.7 reads them (label.go, net.go): the
// label header is the byte 244, the label's length and the label; an
// encrypted message is the byte 10 and the big-endian length of what
// follows.
const (
	gossipLabelHeader = 244
	gossipEncryptMsg  = 10
)

// TestGossipStreams sends, on many streams to the gossip port, the
// cluster's label (not a secret), an encrypted-message header declaring
// about 20 MiB and then all of it but its last byte, and holds them open
// while a client asks the replica a name: the replica's memory stays in
// budget, every question is answered, and the streams refused are
// counted. Before streams were bounded, eight of them grew the replica's
// RSS from 27 to over 500 MiB.
func TestGossipStreams(t *testing.T) {
	h := startHostileTarget(t, "")
	for _, conns := range []int{8, 64} {
		t.Run(fmt.Sprint(conns), func(t *testing.T) {
			before := harness.MetricSum(t, h.http, "shardns_cluster_rejected_members_total", `reason="gossip-limit"`)
			r := runHostile(t, h, hostileSpec{Kind: "gossip-streams", Target: h.gossip, Conns: conns, Size: 20<<20 - 1<<10},
				5*time.Second)
			r.check(t, 32)
			logAttacker(t, r)
			after := harness.MetricSum(t, h.http, "shardns_cluster_rejected_members_total", `reason="gossip-limit"`)
			t.Logf("shardns_cluster_rejected_members_total{reason=\"gossip-limit\"}: %.0f → %.0f", before, after)
			if after <= before {
				t.Errorf("%d streams declaring %d bytes were not refused: shardns_cluster_rejected_members_total{reason=\"gossip-limit\"} stayed %.0f",
					conns, r.Spec.Size, after)
			}
		})
	}
}

// TestGossipStreamsUnderTheCap holds streams that each declare and send
// a little less than a stream may carry, so that each is read to its last
// byte and waits there: only a few are read at once, and the rest are
// closed unread.
func TestGossipStreamsUnderTheCap(t *testing.T) {
	h := startHostileTarget(t, "")
	before := harness.MetricSum(t, h.http, "shardns_cluster_rejected_members_total", `reason="gossip-limit"`)
	r := runHostile(t, h, hostileSpec{Kind: "gossip-streams", Target: h.gossip, Conns: 64, Size: 1_000_000}, 5*time.Second)
	r.check(t, 32)
	logAttacker(t, r)
	after := harness.MetricSum(t, h.http, "shardns_cluster_rejected_members_total", `reason="gossip-limit"`)
	if after <= before {
		t.Errorf("64 streams were all read: shardns_cluster_rejected_members_total{reason=\"gossip-limit\"} stayed %.0f", after)
	}
}

// TestPhantomAtAReplicasAddress: a process with the replicas' key
// announces itself, under another name, at the gossip address of a
// replica, to replicas that have no peers Service to tell names by: it is
// refused as address-taken, counted, and never listed in the ring.
func TestPhantomAtAReplicasAddress(t *testing.T) {
	h := startHostileTarget(t, "")
	keyed := func(name, join, bind, advertise string) string {
		return fmt.Sprintf(`
dns: {listen: ["127.0.0.1:0"]}
http: {listen: "127.0.0.1:0", lameduck: 0s}
kubernetes: {enabled: false}
forward: {upstreams: []}
cluster:
  nodeName: %s
  join: [%q]
  bind: %q
  advertise: %q
  remote: "127.0.0.1:%d"
  secretKeyFile: %s
  replicationFactor: 1
`, name, join, bind, advertise, harness.FreePort(t), h.keyFile)
	}
	bGossip := fmt.Sprintf("127.0.0.1:%d", harness.FreePort(t))
	harness.Start(t, harness.Options{Config: keyed("b", h.gossip, bGossip, bGossip)})
	target := &harness.Replica{Process: h.p, HTTP: h.http, Gossip: h.gossip}
	harness.Settled(t, []*harness.Replica{target}, 2)

	harness.Start(t, harness.Options{Config: keyed("phantom", h.gossip, fmt.Sprintf("127.0.0.1:%d", harness.FreePort(t)), bGossip)})
	testutil.Eventually(t, 20*time.Second, func() error {
		if n := harness.MetricSum(t, h.http, "shardns_cluster_rejected_members_total", `reason="address-taken"`); n == 0 {
			return fmt.Errorf("no address-taken refusal counted yet")
		}
		return nil
	})
	ring, err := target.Ring(t)
	if err != nil {
		t.Fatal(err)
	}
	for _, m := range ring.Members {
		if m.Name != "target" && m.Name != "b" {
			t.Errorf("the ring lists %s (%s)", m.Name, m.Remote)
		}
	}
}

// logAttacker logs what the attacker said of the streams it held.
func logAttacker(t *testing.T, r hostileReport) {
	for _, line := range strings.Split(r.AttackerErrOutput, "\n") {
		if strings.HasPrefix(line, "gossip-streams:") {
			t.Log(line)
		}
	}
}

// gossipStreams opens s.Conns streams to the gossip port s.Target; on
// each it sends the label header of s.Files["label"] ("shardns", the
// default cluster.label, when unset), an encrypted-message header
// declaring s.Size bytes, then the declared bytes but the last, 64 KiB at
// a time (at most 64 MiB a second per stream), and holds the stream open.
// It is ready once every stream has sent all it would or was closed by
// the target, and says how many were closed.
func gossipStreams(ctx context.Context, s hostileSpec, ready func(int64)) error {
	label := s.Files["label"]
	if label == "" {
		label = "shardns"
	}
	head := append([]byte{gossipLabelHeader, byte(len(label))}, label...)
	head = append(head, gossipEncryptMsg)
	head = binary.BigEndian.AppendUint32(head, uint32(s.Size))
	chunk := make([]byte, 64<<10)
	rand.Read(chunk)

	var opened, closed atomic.Int64
	var mu sync.Mutex
	var conns []net.Conn
	var wg sync.WaitGroup
	for range s.Conns {
		wg.Go(func() {
			var d net.Dialer
			c, err := d.DialContext(ctx, "tcp", s.Target)
			if err != nil {
				return
			}
			opened.Add(1)
			mu.Lock()
			conns = append(conns, c)
			mu.Unlock()
			if !sendAllButLast(ctx, c, head, chunk, s.Size) {
				closed.Add(1)
			}
		})
	}
	wg.Wait()
	defer func() {
		for _, c := range conns {
			c.Close()
		}
	}()
	fmt.Printf("gossip-streams: %d streams opened, %d closed by the target before their last byte\n", opened.Load(), closed.Load())
	ready(opened.Load())
	<-ctx.Done()
	return nil
}

// sendAllButLast writes head, then size-1 bytes of chunk over and over; it
// reports false when the target closed the stream first.
func sendAllButLast(ctx context.Context, c net.Conn, head, chunk []byte, size int) bool {
	if _, err := c.Write(head); err != nil {
		return false
	}
	for left := size - 1; left > 0 && ctx.Err() == nil; {
		n := min(left, len(chunk))
		if _, err := c.Write(chunk[:n]); err != nil {
			return false
		}
		left -= n
		time.Sleep(time.Millisecond) // pacing, not synchronisation: a sender on a network
	}
	return true
}
