package node

import (
	"context"
	"fmt"
	"maps"
	"net"
	"net/netip"
	"slices"
	"sync"
	"testing"
	"time"

	"google.golang.org/grpc"

	"github.com/shardns/shardns/cluster"
	"github.com/shardns/shardns/cluster/liveness"
	"github.com/shardns/shardns/cluster/membership"
	"github.com/shardns/shardns/cluster/trust"
	"github.com/shardns/shardns/config"
	"github.com/shardns/shardns/internal/testutil"
)

// cluster.failureDetection changes only what it sets; unset, memberlist
// runs the gossip profile as it is.
func TestGossipTiming(t *testing.T) {
	parse := func(yaml string) config.ClusterConfig {
		t.Helper()
		cfg, err := config.Parse([]byte("kubernetes: {enabled: false}\ncluster: " + yaml + "\n"))
		if err != nil {
			t.Fatal(err)
		}
		return cfg.Cluster
	}
	if got := gossipTiming(parse("{}")); got != membership.DefaultTiming() {
		t.Errorf("lan: %+v, want %+v", got, membership.DefaultTiming())
	}
	if got := gossipTiming(parse("{gossip: fast}")); got != membership.FastTiming() {
		t.Errorf("fast: %+v, want %+v", got, membership.FastTiming())
	}
	got := gossipTiming(parse("{failureDetection: {probeInterval: 300ms, suspicionMult: 3}}"))
	want := membership.DefaultTiming()
	want.ProbeInterval, want.ProbeTimeout, want.SuspicionMult = 300*time.Millisecond, 150*time.Millisecond, 3
	want.DeadNodeReclaimTime = 900 * time.Millisecond
	if got != want {
		t.Errorf("overridden: %+v, want %+v", got, want)
	}
	if got := gossipTiming(parse("{failureDetection: {probeTimeout: 800ms}}")); got.ProbeTimeout != 800*time.Millisecond ||
		got.ProbeInterval != time.Second {
		t.Errorf("probe timeout alone: %+v", got)
	}
	// The configuration checks probeTimeout against the profile's probe
	// interval: it must be memberlist's.
	for profile, timing := range map[string]membership.Timing{"lan": membership.DefaultTiming(), "fast": membership.FastTiming()} {
		at := fmt.Sprintf("kubernetes: {enabled: false}\ncluster: {gossip: %s, failureDetection: {probeTimeout: %v}}\n",
			profile, timing.ProbeInterval)
		over := fmt.Sprintf("kubernetes: {enabled: false}\ncluster: {gossip: %s, failureDetection: {probeTimeout: %v}}\n",
			profile, timing.ProbeInterval+time.Millisecond)
		if _, err := config.Parse([]byte(at)); err != nil {
			t.Errorf("%s: a probe timeout of the profile's interval refused: %v", profile, err)
		}
		if _, err := config.Parse([]byte(over)); err == nil {
			t.Errorf("%s: a probe timeout over the profile's interval accepted", profile)
		}
	}
}

// A replica asked for a zone checks the members before it in the zone's
// order, the ones the asker could not get an answer from; none when it
// comes first or owns nothing.
func TestSuspectOwnersBefore(t *testing.T) {
	var mu sync.Mutex
	var dialled []string
	checker, err := liveness.New(liveness.Config{Timeout: time.Second, Interval: time.Hour,
		Dial: func(_ context.Context, addr string) error {
			mu.Lock()
			defer mu.Unlock()
			dialled = append(dialled, addr)
			return nil
		}})
	if err != nil {
		t.Fatal(err)
	}
	defer checker.Close()
	c := &clusterState{liveness: checker}
	members := []cluster.Member{{Name: "a", Remote: "a:1", Owner: true}, {Name: "b", Remote: "b:1", Owner: true},
		{Name: "c", Remote: "c:1", Owner: true}, {Name: "nl", Remote: "nl:1"}}
	ring := cluster.NewRing("b", members, 1)
	want := map[string]bool{}
	for i := range 50 {
		key := fmt.Sprintf("ns%d.svc.cluster.local.", i)
		order := ring.Order(key)
		for _, m := range order[:slices.Index(order, "b")] {
			want[m+":1"] = true
		}
		c.suspectOwnersBefore(ring, key)
		c.suspectOwnersBefore(cluster.NewRing("nl", members, 1), key)
	}
	c.suspectOwnersBefore(nil, "x.")
	testutil.Eventually(t, 5*time.Second, func() error {
		mu.Lock()
		defer mu.Unlock()
		got := map[string]bool{}
		for _, a := range dialled {
			got[a] = true
		}
		if !maps.Equal(got, want) {
			return fmt.Errorf("dialled %v, want %v", dialled, want)
		}
		return nil
	})
	if len(want) == 0 {
		t.Fatal("b came first in every order: the test shows nothing")
	}
}

// remoteCheck on real sockets: a guarded gRPC server serves; a closed port
// is refused; a port that accepts and never speaks proves nothing (a
// stopped process: the kernel accepts for it); one that accepts and
// closes is closing, not gone yet.
func TestRemoteCheck(t *testing.T) {
	for name, keys := range map[string][][]byte{"plain text": nil, "key": {[]byte("0123456789abcdef0123456789abcdef")}} {
		t.Run(name, func(t *testing.T) { testRemoteCheck(t, keys) })
	}
}

func testRemoteCheck(t *testing.T, keys [][]byte) {
	guard, err := trust.NewGuard(trust.GuardConfig{Keys: keys, Admitted: func(netip.Addr) bool { return true },
		Routes: map[trust.Role]map[string]string{}, Rejections: trust.NewRejections(nil, nil, time.Now)})
	if err != nil {
		t.Fatal(err)
	}
	listen := func() net.Listener {
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { l.Close() })
		return l
	}
	serving := listen()
	srv := grpc.NewServer(guard.ServerOptions()...)
	go srv.Serve(serving)
	defer srv.Stop()
	silent := listen() // never accepts: the kernel completes the handshake alone
	closing := listen()
	go func() {
		for {
			c, err := closing.Accept()
			if err != nil {
				return
			}
			c.Close()
		}
	}()
	gone := listen()
	gone.Close()

	check := remoteCheck(guard, "127.0.0.1")
	run := func(addr string) error {
		ctx, cancel := context.WithTimeout(context.Background(), 300*time.Millisecond)
		defer cancel()
		return check(ctx, addr)
	}
	if err := run(serving.Addr().String()); err != nil {
		t.Errorf("serving replica: %v", err)
	}
	if err := run(gone.Addr().String()); !liveness.Refused(err) {
		t.Errorf("closed port: %v, want refused", err)
	}
	if err := run(silent.Addr().String()); err == nil || liveness.Refused(err) {
		t.Errorf("silent port: %v, want a timeout", err)
	}
	if err := run(closing.Addr().String()); err == nil || liveness.Refused(err) {
		t.Errorf("closing port: %v, want a closed connection", err)
	}
}
