package functional

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"net"
	"net/netip"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/asynkron/protoactor-go/actor"
	"github.com/asynkron/protoactor-go/remote"
	"github.com/miekg/dns"
	"google.golang.org/grpc"
	"google.golang.org/protobuf/proto"
	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/shardns/shardns/cluster/membership"
	"github.com/shardns/shardns/cluster/trust"
	"github.com/shardns/shardns/cluster/wire"
	"github.com/shardns/shardns/httpapi"
	"github.com/shardns/shardns/integration/harness"
	"github.com/shardns/shardns/integration/kubeapi"
	"github.com/shardns/shardns/internal/testutil"
)

// Least privilege inside the ring (docs/hardening.md, "Roles"): two
// replicas on a real apiserver, a node-local process beside them, and a
// compromised node that holds everything that node holds: the node-local
// credential (read from the Secret as the DaemonSet reads it) and the
// node's address, which the replicas admit to their remote port. While
// the replicas and the node-local process answer 1,000 verified queries
// a second, the node floods the replicas with forged ZoneReply and
// ZoneState messages (sequential and random ids), 10,000 connections and
// 1,000 streams: no answer changes and no query fails. A sender naming
// another address is refused. With the replicas' key as well (a worse
// compromise), the node still owns no zone, its forged replies are
// dropped by the replicas' dispatch, and a phantom member at a replica's
// address never enters the ring.

const forgeNS = "forge-ring" // the peers Services and the Secrets

var (
	forgeReplicaIPs = []string{"198.18.78.2", "198.18.78.3"}
	forgeReplicaIDs = []string{"keeper-0", "keeper-1"}
	forgeNodeIP     = "198.18.78.9"
)

func TestCompromisedNodeCannotForge(t *testing.T) {
	hostAddrs(t, append(slices.Clone(forgeReplicaIPs), forgeNodeIP)...)
	cp := kubeapi.Shared(t)
	harness.CreateNamespace(t, cp.Client, forgeNS, nil)
	names := harness.WebNamespaces(t, cp, "forge", 6)
	gossipPort, remotePort := harness.FreePort(t), harness.FreePort(t) // the same on every address, as in a StatefulSet
	forgePeersService(t, cp, "peers", forgeReplicaIPs, forgeReplicaIDs, int32(remotePort))
	forgePeersService(t, cp, "nodes", []string{forgeNodeIP}, nil, 0)
	replicas := make([]*harness.Replica, len(forgeReplicaIPs))
	for i, ip := range forgeReplicaIPs {
		replicas[i] = startForgeReplica(t, cp, forgeReplicaIDs[i], ip, gossipPort, remotePort, "")
	}
	harness.Settled(t, replicas, len(replicas))
	cred := waitCredential(t, cp)
	keys := forgeKeys(t, cp)
	remotes := map[string]string{}
	for i, ip := range forgeReplicaIPs {
		remotes[forgeReplicaIDs[i]] = net.JoinHostPort(ip, fmt.Sprint(remotePort))
	}

	// The node's own node-local process, with the credential the
	// replicas wrote, finds them through the peers Service.
	nl := startForgeNodeLocal(t, cp)
	targets := []string{replicas[0].Addr, replicas[1].Addr, nl.Addr}
	testutil.Eventually(t, 30*time.Second, func() error {
		for name, ip := range names {
			if err := harness.AnswerIs(nl.Addr, name, ip); err != nil {
				return err
			}
		}
		return nil
	})

	cpu := replicasCPU(t, replicas)
	quiet := runVerifiedLoad(t, targets, names, 5*time.Second)
	cpu, quietCPU := replicasCPU(t, replicas), replicasCPU(t, replicas)-cpu
	t.Logf("quiet: %s; the replicas used %.2f CPU-seconds", quiet, quietCPU)

	credentialGuard := mustGuard(t, trust.GuardConfig{Credential: &cred})
	keyGuard := mustGuard(t, trust.GuardConfig{Keys: keys})
	credFile, keyFile := harness.WriteFile(t, "credential", cred.Marshal()), writeKeyFile(t, keys)
	// Two phases under the same load: connections and streams, then
	// forged replies, so that each one's cost on the answers shows. The
	// attackers are processes of their own at the lowest CPU priority: a
	// compromised node attacks from its own cores, not the replicas'.
	flooded, counts := underAttack(t, targets, names,
		attack{Kind: "connections", Target: remotes[forgeReplicaIDs[0]], N: 10000},
		attack{Kind: "streams", Target: remotes[forgeReplicaIDs[1]], N: 1000, Credential: credFile})
	floodedCPU := replicasCPU(t, replicas) - cpu
	cpu += floodedCPU
	t.Logf("10,000 connections (%d opened) and 1,000 streams (%d opened): %s; p99 / quiet: %.2f; "+
		"the replicas used %.2f CPU-seconds (quiet: %.2f in half the time)",
		counts[0], counts[1], flooded, float64(flooded.p99)/float64(max(quiet.p99, 1)), floodedCPU, quietCPU)
	var floods []attack
	for _, target := range remotes {
		floods = append(floods, attack{Kind: "replies", Target: target, Credential: credFile},
			attack{Kind: "replies", Target: target, Keys: keyFile})
	}
	forged, counts := underAttack(t, targets, names, floods...)
	t.Logf("forged ZoneReply and ZoneState, %d batches with the credential, %d with the replicas' key: %s; p99 / quiet: %.2f; "+
		"the replicas used %.2f CPU-seconds", counts[0]+counts[2], counts[1]+counts[3], forged,
		float64(forged.p99)/float64(max(quiet.p99, 1)), replicasCPU(t, replicas)-cpu)
	quiet.check(t, "quiet")
	flooded.check(t, "under connections and streams")
	forged.check(t, "under forged replies")
	if counts[0] == 0 || counts[1] == 0 {
		t.Fatalf("the forged replies were not sent: %v", counts)
	}
	waitRejectedFrom(t, replicas, forgeNodeIP, trust.ReasonRemoteMessage)
	waitRejectedFrom(t, replicas, forgeNodeIP, trust.ReasonRemoteLimit)
	dropped := 0.0
	for _, r := range replicas {
		dropped += harness.ScrapeLabelled(t, r.HTTP, "shardns_cluster_replies_dropped_total", `reason="unknown-id"`)
	}
	if dropped == 0 {
		t.Error("no replica dropped a forged reply sent with the replicas' key: did any reach dispatch-replies?")
	}

	t.Run("a sender naming another address", func(t *testing.T) {
		q := &wire.ZoneQuery{Id: 1, Zone: "forge0.svc.cluster.local.", Name: "web.forge0.svc.cluster.local.", Qtype: uint32(dns.TypeA)}
		for _, g := range []*trust.Guard{credentialGuard, keyGuard} {
			// Retried while the node's handshakes are still over their
			// rate after the flood: the refusal must be the sender's.
			testutil.Eventually(t, 10*time.Second, func() error {
				err := sendBatch(context.Background(), g, remotes[forgeReplicaIDs[0]],
					forgedBatch(remotes[forgeReplicaIDs[0]], "dispatch", remotes[forgeReplicaIDs[1]], q))
				switch {
				case err == nil:
					t.Fatalf("a query naming %s as its sender was taken", remotes[forgeReplicaIDs[1]])
				case !strings.Contains(err.Error(), "not on the connection's peer"):
					return fmt.Errorf("a query naming %s as its sender: %v, want it refused for its sender", remotes[forgeReplicaIDs[1]], err)
				}
				return nil
			})
		}
	})

	t.Run("owns nothing, even with the replicas' key", func(t *testing.T) {
		keyFile := writeKeyFile(t, keys)
		// A replica at the node address (admitted to ask, not to own).
		startForgeReplica(t, cp, "intruder", forgeNodeIP, gossipPort, harness.FreePort(t), "secretKeyFile: "+keyFile)
		waitRejectedFrom(t, replicas, forgeNodeIP, trust.ReasonNotOwner)
		// A phantom at the first replica's address, under another name.
		phantom := fmt.Sprintf(`
dns: {listen: ["%s:0"]}
http: {listen: "127.0.0.1:0", lameduck: 0s}
kubernetes: {enabled: false}
forward: {upstreams: []}
cluster:
  nodeName: phantom
  join: [%q]
  bind: "%s:%d"
  advertise: %q
  remote: "%s:%d"
  secretKeyFile: %s
  replicationFactor: 1
  gossip: fast
`, forgeNodeIP, net.JoinHostPort(forgeReplicaIPs[1], fmt.Sprint(gossipPort)), forgeNodeIP, harness.FreePort(t),
			net.JoinHostPort(forgeReplicaIPs[0], fmt.Sprint(gossipPort)), forgeNodeIP, harness.FreePort(t), keyFile)
		harness.Start(t, harness.Options{Config: phantom})
		waitRejectedFrom(t, replicas, forgeReplicaIPs[0], trust.ReasonNotPeer)
		harness.Settled(t, replicas, len(replicas))
		for _, r := range replicas {
			ring, err := r.Ring(t)
			if err != nil {
				t.Fatal(err)
			}
			for _, m := range ring.Members {
				if !slices.Contains(forgeReplicaIDs, m.Name) {
					t.Errorf("%s lists %s (%s) as a member", ring.Self, m.Name, m.Remote)
				}
			}
			for _, owners := range ring.Zones {
				for _, o := range owners {
					if !slices.Contains(forgeReplicaIDs, o) {
						t.Errorf("%s: %s owns a zone", ring.Self, o)
					}
				}
			}
		}
	})
}

// forgePeersService makes a headless Service name in forgeNS whose one
// EndpointSlice lists ips, each for the pod podNames names (none: no
// pod), with the tcp-remote port when remotePort is set.
func forgePeersService(t *testing.T, cp *kubeapi.ControlPlane, name string, ips, podNames []string, remotePort int32) {
	t.Helper()
	harness.CreateService(t, cp.Client, &corev1.Service{ObjectMeta: metav1.ObjectMeta{Namespace: forgeNS, Name: name},
		Spec: corev1.ServiceSpec{ClusterIP: corev1.ClusterIPNone,
			Ports: []corev1.ServicePort{{Name: "tcp-remote", Port: 8090, Protocol: corev1.ProtocolTCP}}}})
	sl := &discoveryv1.EndpointSlice{
		ObjectMeta: metav1.ObjectMeta{Namespace: forgeNS, Name: name + "-1",
			Labels: map[string]string{discoveryv1.LabelServiceName: name}},
		AddressType: discoveryv1.AddressTypeIPv4,
	}
	if remotePort != 0 {
		sl.Ports = []discoveryv1.EndpointPort{{Name: harness.Ptr("tcp-remote"), Port: &remotePort, Protocol: harness.Ptr(corev1.ProtocolTCP)}}
	}
	for i, ip := range ips {
		ep := discoveryv1.Endpoint{Addresses: []string{ip}}
		if i < len(podNames) {
			ep.TargetRef = &corev1.ObjectReference{Kind: "Pod", Namespace: forgeNS, Name: podNames[i]}
		}
		sl.Endpoints = append(sl.Endpoints, ep)
	}
	if _, err := cp.Client.DiscoveryV1().EndpointSlices(forgeNS).Create(ctx, sl, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
}

// startForgeReplica starts a replica at ip, admitted through the peers
// Service, with the node addresses admitted to ask; keys says where its
// key comes from ("": the Secret the replicas generate).
func startForgeReplica(t *testing.T, cp *kubeapi.ControlPlane, name, ip string, gossipPort, remotePort int, keys string) *harness.Replica {
	t.Helper()
	if keys == "" {
		keys = "secret: " + forgeNS + "/gossip"
	}
	gossip := net.JoinHostPort(ip, fmt.Sprint(gossipPort))
	cfg := fmt.Sprintf(`
dns: {listen: ["%s:0"]}
http: {listen: "127.0.0.1:0", lameduck: 0s}
kubernetes: {enabled: true, kubeconfig: %q}
forward: {upstreams: []}
cluster:
  nodeName: %s
  joinService: %s/peers
  admitServices: [%s/nodes]
  %s
  nodeLocalSecret: %s/nodelocal
  bind: %q
  remote: "%s:%d"
  replicationFactor: 1
  gossip: fast
  handoffGrace: 5s
`, ip, cp.Kubeconfig, name, forgeNS, forgeNS, keys, forgeNS, gossip, ip, remotePort)
	p := harness.Start(t, harness.Options{Config: cfg})
	return &harness.Replica{Process: p, HTTP: p.HTTPAddr(t), Gossip: gossip}
}

// startForgeNodeLocal starts the node's node-local process as the
// DaemonSet runs it: the credential from the Secret, the replicas from
// the peers Service.
func startForgeNodeLocal(t *testing.T, cp *kubeapi.ControlPlane) *harness.Replica {
	t.Helper()
	cfg := fmt.Sprintf(`
mode: nodelocal
dns: {listen: ["%s:0"]}
http: {listen: "127.0.0.1:0", lameduck: 0s}
kubernetes: {kubeconfig: %q}
forward: {upstreams: []}
cluster:
  nodeName: node-a
  joinService: %s/peers
  nodeLocalSecret: %s/nodelocal
  remote: "%s:%d"
  replicationFactor: 1
  gossip: fast
`, forgeNodeIP, cp.Kubeconfig, forgeNS, forgeNS, forgeNodeIP, harness.FreePort(t))
	p := harness.Start(t, harness.Options{Config: cfg})
	return &harness.Replica{Process: p, HTTP: p.HTTPAddr(t)}
}

// waitCredential is the node-local credential once a replica wrote it.
func waitCredential(t *testing.T, cp *kubeapi.ControlPlane) trust.Credential {
	t.Helper()
	var cred trust.Credential
	testutil.Eventually(t, 20*time.Second, func() error {
		s, err := cp.Client.CoreV1().Secrets(forgeNS).Get(ctx, "nodelocal", metav1.GetOptions{})
		if err != nil {
			return err
		}
		cred, err = trust.ParseCredential(s.Data["credential"])
		return err
	})
	return cred
}

func forgeKeys(t *testing.T, cp *kubeapi.ControlPlane) [][]byte {
	t.Helper()
	s, err := cp.Client.CoreV1().Secrets(forgeNS).Get(ctx, "gossip", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	keys, err := membership.ParseSecretKeys(s.Data["key"], "in the Secret")
	if err != nil {
		t.Fatal(err)
	}
	return keys
}

// writeKeyFile writes keys as a key file: base64, one per line.
func writeKeyFile(t *testing.T, keys [][]byte) string {
	t.Helper()
	var b strings.Builder
	for _, k := range keys {
		b.WriteString(base64.StdEncoding.EncodeToString(k) + "\n")
	}
	path := filepath.Join(t.TempDir(), "gossip.key")
	if err := os.WriteFile(path, []byte(b.String()), 0o600); err != nil {
		t.Fatal(err)
	}
	return path
}

func mustGuard(t *testing.T, cfg trust.GuardConfig) *trust.Guard {
	t.Helper()
	cfg.Admitted = func(netip.Addr) bool { return false } // dials only
	g, err := trust.NewGuard(cfg)
	if err != nil {
		t.Fatal(err)
	}
	return g
}

// waitRejectedFrom waits until one of rs lists a rejection of ip for
// reason in /debug/ring.
func waitRejectedFrom(t *testing.T, rs []*harness.Replica, ip, reason string) {
	t.Helper()
	waitRejectedWith(t, rs, ip, reason, func(httpapi.Ring) {})
}

// dialFromNode opens a gRPC connection to a remote port from the node's
// address with g's identity.
func dialFromNode(ctx context.Context, g *trust.Guard, addr string) (*grpc.ClientConn, error) {
	dialer := func(ctx context.Context, addr string) (net.Conn, error) {
		d := net.Dialer{LocalAddr: &net.TCPAddr{IP: net.ParseIP(forgeNodeIP)}}
		return d.DialContext(ctx, "tcp", addr)
	}
	return grpc.DialContext(ctx, addr, append(g.DialOptions(), grpc.WithContextDialer(dialer))...)
}

// forgedBatch is a protoactor batch of msgs to the actor target at addr,
// sent as the actor sender at senderAddr.
func forgedBatch(addr, target, senderAddr string, msgs ...proto.Message) *remote.RemoteMessage {
	b := &remote.MessageBatch{
		Targets: []*actor.PID{{Address: addr, Id: target}},
		Senders: []*actor.PID{{Address: senderAddr, Id: "dispatch"}},
	}
	for _, m := range msgs {
		name := string(m.ProtoReflect().Descriptor().FullName())
		i := slices.Index(b.TypeNames, name)
		if i < 0 {
			i = len(b.TypeNames)
			b.TypeNames = append(b.TypeNames, name)
		}
		data, _ := proto.Marshal(m)
		b.Envelopes = append(b.Envelopes, &remote.MessageEnvelope{TypeId: int32(i), MessageData: data, Target: 0, Sender: 1})
	}
	return &remote.RemoteMessage{MessageType: &remote.RemoteMessage_MessageBatch{MessageBatch: b}}
}

// sendBatch sends one batch on a new stream and returns how the server
// ended it (nil: it took the batch).
func sendBatch(ctx context.Context, g *trust.Guard, addr string, m *remote.RemoteMessage) error {
	ctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	conn, err := dialFromNode(ctx, g, addr)
	if err != nil {
		return err
	}
	defer conn.Close()
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
	for {
		if _, err := stream.Recv(); err != nil {
			if errors.Is(err, io.EOF) {
				return nil
			}
			return err
		}
	}
}

// floodForgedReplies sends, until ctx ends, batches of forged ZoneReply
// (A 6.6.6.6, NOERROR, ids counting from 1 and random) to dispatch-replies
// and ZoneState to handoff-replies at addr, reconnecting whenever the
// stream is ended. It returns the batches sent and refused.
func floodForgedReplies(ctx context.Context, g *trust.Guard, addr string) int64 {
	forged := new(dns.Msg)
	forged.SetQuestion("x.forge0.svc.cluster.local.", dns.TypeA)
	forged.Response = true
	forged.Answer = []dns.RR{&dns.A{Hdr: dns.RR_Header{Name: "x.forge0.svc.cluster.local.", Rrtype: dns.TypeA, Class: dns.ClassINET, Ttl: 300},
		A: net.ParseIP("6.6.6.6")}}
	packed, _ := forged.Pack()
	self := net.JoinHostPort(forgeNodeIP, "8091")
	var batches int64
	next := uint64(1)
	for ctx.Err() == nil {
		replies := make([]proto.Message, 0, 200)
		states := make([]proto.Message, 0, 20)
		for i := range 100 {
			id := next
			next++
			if i%2 == 1 {
				id = rand.Uint64()
			}
			replies = append(replies, &wire.ZoneReply{Id: id, Served: true, Msg: packed})
			if i%10 == 0 {
				states = append(states, &wire.ZoneState{Id: id, Held: true, Done: true, Format: 1})
			}
		}
		err := sendBatch(ctx, g, addr, forgedBatch(addr, "dispatch-replies", self, replies...))
		batches++
		if err == nil {
			_ = sendBatch(ctx, g, addr, forgedBatch(addr, "handoff-replies", self, states...))
			batches++
		}
	}
	return batches
}

// floodConnections opens n TCP connections to addr from the node's
// address, 200 at a time, each held until the server closes it or for a
// second, sending nothing: the slow handshakes of a flood. It returns how
// many it opened.
func floodConnections(ctx context.Context, addr string, n int) int64 {
	var opened atomic.Int64
	var wg sync.WaitGroup
	todo := make(chan struct{}, n)
	for range n {
		todo <- struct{}{}
	}
	close(todo)
	for range 200 {
		wg.Go(func() {
			d := net.Dialer{LocalAddr: &net.TCPAddr{IP: net.ParseIP(forgeNodeIP)}, Timeout: time.Second}
			for range todo {
				c, err := d.DialContext(ctx, "tcp", addr)
				if err != nil {
					continue
				}
				opened.Add(1)
				_ = c.SetReadDeadline(time.Now().Add(time.Second))
				_, _ = c.Read(make([]byte, 1))
				c.Close()
			}
		})
	}
	wg.Wait()
	return opened.Load()
}

// floodStreams opens n streams to addr with g's identity over 25
// connections and holds them until ctx ends. It returns how many the
// server let open.
func floodStreams(ctx context.Context, g *trust.Guard, addr string, n int) int64 {
	var opened atomic.Int64
	var wg sync.WaitGroup
	for range 25 {
		wg.Go(func() {
			conn, err := dialFromNode(ctx, g, addr)
			if err != nil {
				return
			}
			defer conn.Close()
			var inner sync.WaitGroup
			for range n / 25 {
				inner.Go(func() {
					if _, err := remote.NewRemotingClient(conn).Receive(ctx); err == nil {
						opened.Add(1)
						<-ctx.Done()
					}
				})
			}
			inner.Wait()
		})
	}
	wg.Wait()
	return opened.Load()
}

// attack is what one attacker process does (TestForgeryAttacker).
type attack struct {
	Kind       string // connections, streams or replies
	Target     string // a replica's remote address
	N          int    // connections or streams to open
	Credential string // the node-local credential's file, or
	Keys       string // the replicas' key file
}

// underAttack runs an attacker process for each of attacks, at the
// lowest CPU priority, while it asks targets for 10 s as runVerifiedLoad
// does; then it stops them and returns, with the load, what each one
// counted (connections or streams opened, batches sent).
func underAttack(t *testing.T, targets []string, names map[string]string, attacks ...attack) (verifiedLoad, []int64) {
	t.Helper()
	var procs []*exec.Cmd
	var outs []*bytes.Buffer
	var stdins []io.Closer
	for _, a := range attacks {
		spec, err := json.Marshal(a)
		if err != nil {
			t.Fatal(err)
		}
		cmd := exec.Command("nice", "-n", "19", os.Args[0], "-test.run", "^TestForgeryAttacker$")
		cmd.Env = append(os.Environ(), "SHARDNS_FORGERY_ATTACK="+string(spec))
		out := &bytes.Buffer{}
		cmd.Stdout, cmd.Stderr = out, out
		stdin, err := cmd.StdinPipe()
		if err != nil {
			t.Fatal(err)
		}
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { stdin.Close(); cmd.Process.Kill(); cmd.Wait() })
		procs, outs, stdins = append(procs, cmd), append(outs, out), append(stdins, stdin)
	}
	load := runVerifiedLoad(t, targets, names, 10*time.Second)
	counts := make([]int64, len(procs))
	for i, cmd := range procs {
		stdins[i].Close() // the attacker stops when its standard input closes
		if err := cmd.Wait(); err != nil {
			t.Fatalf("attacker %+v: %v\n%s", attacks[i], err, outs[i])
		}
		if _, err := fmt.Sscanf(attackCount.FindString(outs[i].String()), "attacked %d", &counts[i]); err != nil {
			t.Fatalf("attacker %+v said no count: %v\n%s", attacks[i], err, outs[i])
		}
	}
	return load, counts
}

var attackCount = regexp.MustCompile(`attacked \d+`)

// TestForgeryAttacker is the attacker process of underAttack: it runs
// only with SHARDNS_FORGERY_ATTACK set, attacks until its standard input
// closes, and prints how much it did.
func TestForgeryAttacker(t *testing.T) {
	spec := os.Getenv("SHARDNS_FORGERY_ATTACK")
	if spec == "" {
		t.Skip("run by TestCompromisedNodeCannotForge in a process of its own")
	}
	var a attack
	if err := json.Unmarshal([]byte(spec), &a); err != nil {
		t.Fatal(err)
	}
	cfg := trust.GuardConfig{}
	switch {
	case a.Credential != "":
		cred, err := readCredential(a.Credential)
		if err != nil {
			t.Fatal(err)
		}
		cfg.Credential = &cred
	case a.Keys != "":
		keys, err := membership.ReadSecretKeys(a.Keys)
		if err != nil {
			t.Fatal(err)
		}
		cfg.Keys = keys
	}
	g := mustGuard(t, cfg)
	ctx, stop := context.WithCancel(context.Background())
	go func() { io.Copy(io.Discard, os.Stdin); stop() }()
	var n int64
	switch a.Kind {
	case "connections":
		n = floodConnections(ctx, a.Target, a.N)
	case "streams":
		n = floodStreams(ctx, g, a.Target, a.N)
	case "replies":
		n = floodForgedReplies(ctx, g, a.Target)
	}
	<-ctx.Done()
	fmt.Printf("attacked %d\n", n)
}

// replicasCPU is the CPU time the processes rs have used so far, in
// seconds: what an attack costs the replicas, apart from what it costs
// the attacker, which shares this machine's cores here.
func replicasCPU(t *testing.T, rs []*harness.Replica) float64 {
	t.Helper()
	total := 0.0
	for _, r := range rs {
		total += harness.CPUSeconds(t, r.Cmd.Process.Pid)
	}
	return total
}

// verifiedLoad is what runVerifiedLoad saw.
type verifiedLoad struct {
	asked, failed int
	wrong         []string
	p50, p99      time.Duration
}

func (v verifiedLoad) String() string {
	return fmt.Sprintf("%d queries, %d failed, %d wrong, p50 %v, p99 %v", v.asked, v.failed, len(v.wrong), v.p50, v.p99)
}

func (v verifiedLoad) check(t *testing.T, what string) {
	t.Helper()
	if v.failed > 0 || len(v.wrong) > 0 {
		t.Errorf("%s: %s; e.g. %v", what, v, v.wrong[:min(5, len(v.wrong))])
	}
}

// runVerifiedLoad asks targets 1,000 questions a second for d: names
// never asked before, which must be NXDOMAIN (a forged reply would make
// one NOERROR), and the names of names, which must be their address.
// A question that gets no answer is asked once more before it counts as
// failed.
func runVerifiedLoad(t *testing.T, targets []string, names map[string]string, d time.Duration) verifiedLoad {
	t.Helper()
	known := make([]string, 0, len(names))
	for n := range names {
		known = append(known, n)
	}
	sort.Strings(known)
	var mu sync.Mutex
	var out verifiedLoad
	var latencies []time.Duration
	var wg sync.WaitGroup
	tick := time.NewTicker(time.Millisecond)
	defer tick.Stop()
	deadline := time.Now().Add(d)
	run := rand.Uint32()
	for i := 0; time.Now().Before(deadline); i++ {
		<-tick.C
		addr := targets[i%len(targets)]
		name, want := fmt.Sprintf("v%d-%d.forge%d.svc.cluster.local.", run, i, i%6), "NXDOMAIN"
		if i%4 == 0 {
			name = known[(i/4)%len(known)]
			want = "NOERROR A " + names[name]
		}
		wg.Go(func() {
			start := time.Now()
			m, err := testutil.Exchange(addr, "udp", name, dns.TypeA)
			if err != nil {
				m, err = testutil.Exchange(addr, "udp", name, dns.TypeA)
			}
			took := time.Since(start)
			mu.Lock()
			defer mu.Unlock()
			out.asked++
			switch {
			case err != nil:
				out.failed++
				out.wrong = append(out.wrong, fmt.Sprintf("%s via %s: %v", name, addr, err))
			case harness.AnswerText(m) != want:
				out.wrong = append(out.wrong, fmt.Sprintf("%s via %s: %s, want %s", name, addr, harness.AnswerText(m), want))
			default:
				latencies = append(latencies, took)
			}
		})
	}
	wg.Wait()
	slices.Sort(latencies)
	if len(latencies) > 0 {
		out.p50, out.p99 = latencies[len(latencies)/2], latencies[len(latencies)*99/100]
	}
	return out
}
