package functional

import (
	"context"
	"fmt"
	"net"
	"net/netip"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/asynkron/protoactor-go/actor"
	"github.com/asynkron/protoactor-go/remote"
	"github.com/miekg/dns"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/shardns/shardns/cluster/membership"
	"github.com/shardns/shardns/cluster/trust"
	"github.com/shardns/shardns/httpapi"
	"github.com/shardns/shardns/integration/harness"
	"github.com/shardns/shardns/integration/kubeapi"
	"github.com/shardns/shardns/internal/testutil"
)

// Trust between replicas (docs/hardening.md): two honest replicas on a
// real apiserver, admitted through a peers Service whose EndpointSlice
// lists their addresses and sharing a key they generate into a Secret,
// and strangers on other loopback addresses: one without the key, one
// with the key but not behind the peers Service, one with the key and
// another cluster label, and one that sends protoactor system messages to
// the remote port, from outside and from a member's own address with the
// key. No stranger becomes a member or an owner, no answer ever carries a
// stranger's record, every dispatch actor keeps answering, and each
// stranger is counted under its reason.

const (
	trustNS     = "trust-ring"  // the peers Service and the key's Secret
	trustDataNS = "trust-data"  // the record strangers try to replace
	honestRedis = "10.96.77.10" // redis.trust-data in the API
	forgedRedis = "10.96.77.99" // the strangers' redis
)

// The processes' addresses, added to the loopback interface for the
// test: an EndpointSlice may not list 127.0.0.0/8. 198.18.0.0/15 is
// reserved for benchmarks (RFC 2544), so no real network is shadowed.
var (
	honestIPs   = []string{"198.18.77.2", "198.18.77.3"}
	strangerIPs = []string{"198.18.77.9", "198.18.77.10", "198.18.77.11", "198.18.77.12"}
)

// hostAddrs adds ips to the loopback interface until the test ends. It
// needs root (CAP_NET_ADMIN); without it the test is skipped.
func hostAddrs(t *testing.T, ips ...string) {
	t.Helper()
	for _, ip := range ips {
		out, err := exec.Command("ip", "addr", "add", ip+"/32", "dev", "lo").CombinedOutput()
		if err != nil && !strings.Contains(string(out), "File exists") {
			t.Skipf("cannot add %s to the loopback interface (needs root and iproute2): %v: %s", ip, err, out)
		}
		t.Cleanup(func() { exec.Command("ip", "addr", "del", ip+"/32", "dev", "lo").Run() })
	}
}

func TestStrangersCannotJoin(t *testing.T) {
	hostAddrs(t, append(slices.Clone(honestIPs), strangerIPs...)...)
	cp := kubeapi.Shared(t)
	harness.CreateNamespace(t, cp.Client, trustNS, nil)
	harness.CreateNamespace(t, cp.Client, trustDataNS, nil)
	redis := harness.ClusterIPService(trustDataNS, "redis")
	redis.Spec.ClusterIP = honestRedis
	harness.CreateService(t, cp.Client, redis)
	peersService(t, cp, honestIPs)

	gossipPort := harness.FreePort(t) // the same on every address, as in a StatefulSet
	honest := make([]*harness.Replica, len(honestIPs))
	for i, ip := range honestIPs {
		honest[i] = startHonestReplica(t, cp, fmt.Sprintf("honest-%d", i), ip, gossipPort)
	}
	harness.Settled(t, honest, len(honest))
	secret, err := cp.Client.CoreV1().Secrets(trustNS).Get(ctx, "gossip", metav1.GetOptions{})
	if err != nil {
		t.Fatalf("the replicas made no gossip key: %v", err)
	}
	keys, err := membership.ParseSecretKeys(secret.Data["key"], "in the Secret")
	if err != nil || len(keys) != 1 || len(keys[0]) != 32 {
		t.Fatalf("generated key %q: %v", secret.Data["key"], err)
	}
	keyFile := filepath.Join(t.TempDir(), "gossip.key")
	if err := os.WriteFile(keyFile, secret.Data["key"], 0o600); err != nil {
		t.Fatal(err)
	}

	// Asked all along: the record is the API's, from both replicas.
	ask := startForgeryWatch(honest)
	seed := net.JoinHostPort(honestIPs[0], fmt.Sprint(gossipPort))
	// Gossip from an address that is not a peer is closed unread,
	// whatever its key or label; from a member's address (a process
	// beside a replica, sharing its pod's address) it is read, and the
	// key and the label refuse it.
	strangers := []struct {
		ip      string
		port    int
		cluster string
		reason  string
	}{
		{strangerIPs[0], gossipPort, fmt.Sprintf("join: [%q]\n  insecure: true", seed), trust.ReasonNotPeer},
		{strangerIPs[1], gossipPort, fmt.Sprintf("joinService: %s/peers\n  secretKeyFile: %s", trustNS, keyFile), trust.ReasonNotPeer},
		{strangerIPs[2], gossipPort, fmt.Sprintf("join: [%q]\n  secretKeyFile: %s\n  label: other", seed, keyFile), trust.ReasonNotPeer},
		{honestIPs[1], harness.FreePort(t), fmt.Sprintf("join: [%q]\n  insecure: true", seed), trust.ReasonKey},
		{honestIPs[1], harness.FreePort(t), fmt.Sprintf("join: [%q]\n  secretKeyFile: %s\n  label: other", seed, keyFile), trust.ReasonLabel},
	}
	for i, s := range strangers {
		startStranger(t, cp, fmt.Sprintf("stranger-%d", i), s.ip, s.port, s.cluster)
	}
	for _, s := range strangers {
		waitRejected(t, honest, s.ip, s.reason)
	}
	harness.Settled(t, honest, len(honest))
	// `shardns ring` shows an operator who was turned away.
	out, err := exec.Command(harness.Bin, "ring", "--http", honest[0].HTTP).CombinedOutput()
	if err != nil || !strings.Contains(string(out), "REJECTED") || !strings.Contains(string(out), strangerIPs[0]) {
		t.Errorf("shardns ring lists no rejection of %s: %v\n%s", strangerIPs[0], err, out)
	}
	for _, reason := range []string{trust.ReasonKey, trust.ReasonNotPeer, trust.ReasonLabel} {
		counted := 0.0
		for _, r := range honest {
			counted += harness.ScrapeLabelled(t, r.HTTP, "shardns_cluster_rejected_members_total", `reason="`+reason+`"`)
		}
		if counted == 0 {
			t.Errorf("no replica counted a %s rejection in shardns_cluster_rejected_members_total", reason)
		}
	}

	// The remote port: system messages from a stranger's address, then
	// with the key from a member's own address.
	remotes := honestRemotes(t, honest)
	sendSystemMessages(t, strangerIPs[3], nil, remotes[1])
	waitRejected(t, honest[1:], strangerIPs[3], trust.ReasonRemoteConnection)
	sendSystemMessages(t, honestIPs[0], keys, remotes[1])

	// Every dispatch actor still answers: names of zones created now (so
	// in no cache yet), owned by each replica in turn, through both.
	after := harness.WebNamespaces(t, cp, "trust-after-", 6)
	owners := map[string]bool{}
	testutil.Eventually(t, 20*time.Second, func() error {
		for _, r := range honest {
			for name, ip := range after {
				if err := harness.AnswerIs(r.Addr, name, ip); err != nil {
					return err
				}
			}
		}
		ring, err := honest[0].Ring(t)
		if err != nil {
			return err
		}
		for name := range after {
			zone := strings.SplitN(name, ".", 2)[1]
			if len(ring.Zones[zone]) == 0 {
				// The ring page is computed at most once a second: it
				// may not list the zones created a moment ago yet.
				return fmt.Errorf("%s not in the ring yet", zone)
			}
			for _, o := range ring.Zones[zone] {
				owners[o] = true
			}
		}
		return nil
	})
	if len(owners) != len(honest) {
		t.Errorf("the new zones are owned by %v only: the check did not cross both ways", owners)
	}
	waitRejected(t, honest[1:], honestIPs[0], trust.ReasonRemoteMessage)
	for _, reason := range []string{trust.ReasonRemoteConnection, trust.ReasonRemoteMessage} {
		if harness.ScrapeLabelled(t, honest[1].HTTP, "shardns_cluster_rejected_members_total", `reason="`+reason+`"`) == 0 {
			t.Errorf("%s did not count its %s rejection", honest[1].HTTP, reason)
		}
	}
	ask.finish(t)
	harness.Settled(t, honest, len(honest))
}

// peersService makes trustNS/peers, a headless Service without selector
// whose EndpointSlice lists ips, as the EndpointSlice controller does for
// a StatefulSet's pods.
func peersService(t *testing.T, cp *kubeapi.ControlPlane, ips []string) {
	t.Helper()
	svc := &corev1.Service{ObjectMeta: metav1.ObjectMeta{Namespace: trustNS, Name: "peers"},
		Spec: corev1.ServiceSpec{ClusterIP: corev1.ClusterIPNone,
			Ports: []corev1.ServicePort{{Name: "tcp-gossip", Port: 7946, Protocol: corev1.ProtocolTCP}}}}
	harness.CreateService(t, cp.Client, svc)
	sl := &discoveryv1.EndpointSlice{
		ObjectMeta: metav1.ObjectMeta{Namespace: trustNS, Name: "peers-1",
			Labels: map[string]string{discoveryv1.LabelServiceName: "peers"}},
		AddressType: discoveryv1.AddressTypeIPv4,
	}
	for _, ip := range ips {
		sl.Endpoints = append(sl.Endpoints, discoveryv1.Endpoint{Addresses: []string{ip}})
	}
	if _, err := cp.Client.DiscoveryV1().EndpointSlices(trustNS).Create(ctx, sl, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
}

func startHonestReplica(t *testing.T, cp *kubeapi.ControlPlane, name, ip string, gossipPort int) *harness.Replica {
	t.Helper()
	gossip := net.JoinHostPort(ip, fmt.Sprint(gossipPort))
	cfg := fmt.Sprintf(`
dns: {listen: ["%s:0"]}
http: {listen: "127.0.0.1:0", lameduck: 0s}
kubernetes: {enabled: true, kubeconfig: %q}
forward: {upstreams: []}
cluster:
  nodeName: %s
  joinService: %s/peers
  secret: %s/gossip
  bind: %q
  remote: "%s:%d"
  replicationFactor: 1
  gossip: fast
  handoffGrace: 5s
`, ip, cp.Kubeconfig, name, trustNS, trustNS, gossip, ip, harness.FreePort(t))
	p := harness.Start(t, harness.Options{Config: cfg})
	return &harness.Replica{Process: p, HTTP: p.HTTPAddr(t), Gossip: gossip}
}

// startStranger runs shardns from its own manifests, which put
// redis.trust-data at forgedRedis, with cluster settings clusterKeys.
func startStranger(t *testing.T, cp *kubeapi.ControlPlane, name, ip string, gossipPort int, clusterKeys string) {
	t.Helper()
	manifest := filepath.Join(t.TempDir(), "stranger.yaml")
	yaml := fmt.Sprintf(`apiVersion: v1
kind: Namespace
metadata: {name: %s}
---
apiVersion: v1
kind: Service
metadata: {name: redis, namespace: %s}
spec: {clusterIP: %s, ports: [{name: redis, port: 6379}]}
`, trustDataNS, trustDataNS, forgedRedis)
	if err := os.WriteFile(manifest, []byte(yaml), 0o644); err != nil {
		t.Fatal(err)
	}
	cfg := fmt.Sprintf(`
dns: {listen: ["%s:0"]}
http: {listen: "127.0.0.1:0", lameduck: 0s}
kubernetes: {enabled: false, kubeconfig: %q}
manifests: {files: [%q]}
forward: {upstreams: []}
cluster:
  nodeName: %s
  %s
  bind: "%s:%d"
  remote: "%s:%d"
  replicationFactor: 1
  gossip: fast
`, ip, cp.Kubeconfig, manifest, name, clusterKeys, ip, gossipPort, ip, harness.FreePort(t))
	harness.Start(t, harness.Options{Config: cfg})
}

// waitRejected waits until one of rs lists a rejection of ip for reason
// in /debug/ring, and fails if any of them lists a member that is not an
// honest replica.
func waitRejected(t *testing.T, rs []*harness.Replica, ip, reason string) {
	t.Helper()
	waitRejectedWith(t, rs, ip, reason, func(ring httpapi.Ring) {
		for _, m := range ring.Members {
			if !strings.HasPrefix(m.Name, "honest-") {
				t.Fatalf("%s lists %s as a member", ring.Self, m.Name)
			}
		}
	})
}

// waitRejectedWith waits until one of rs lists a rejection of ip for
// reason in /debug/ring, passing each ring it reads to check.
func waitRejectedWith(t *testing.T, rs []*harness.Replica, ip, reason string, check func(httpapi.Ring)) {
	t.Helper()
	testutil.Eventually(t, 20*time.Second, func() error {
		var seen []string
		for _, r := range rs {
			ring, err := r.Ring(t)
			if err != nil {
				return err
			}
			check(ring)
			for _, rej := range ring.Rejected {
				if rej.Addr == ip && rej.Reason == reason {
					return nil
				}
				seen = append(seen, rej.Addr+" "+rej.Reason)
			}
		}
		return fmt.Errorf("no %s rejection of %s yet (rejections: %v)", reason, ip, seen)
	})
}

// forgeryWatch asks every honest replica for redis.trust-data until
// finished and remembers any answer but the API's.
type forgeryWatch struct {
	stop  atomic.Bool
	wg    sync.WaitGroup
	asked atomic.Int64
	mu    sync.Mutex
	wrong []string
}

func startForgeryWatch(rs []*harness.Replica) *forgeryWatch {
	w := &forgeryWatch{}
	name := "redis." + trustDataNS + ".svc.cluster.local."
	w.wg.Go(func() {
		for !w.stop.Load() {
			for _, r := range rs {
				m, err := testutil.Exchange(r.Addr, "udp", name, dns.TypeA)
				w.asked.Add(1)
				if err != nil {
					continue // a lost packet is not a forgery; answers are what is checked
				}
				if got := harness.AnswerText(m); got != "NOERROR A "+honestRedis {
					w.mu.Lock()
					w.wrong = append(w.wrong, r.Addr+": "+got)
					w.mu.Unlock()
				}
			}
		}
	})
	return w
}

func (w *forgeryWatch) finish(t *testing.T) {
	t.Helper()
	w.stop.Store(true)
	w.wg.Wait()
	w.mu.Lock()
	defer w.mu.Unlock()
	if len(w.wrong) > 0 {
		t.Errorf("%d of %d answers were not the API's: %v", len(w.wrong), w.asked.Load(), w.wrong[:min(5, len(w.wrong))])
	}
	t.Logf("%d answers for redis.%s, all the API's", w.asked.Load(), trustDataNS)
}

// honestRemotes are the replicas' actor remote addresses.
func honestRemotes(t *testing.T, rs []*harness.Replica) []string {
	t.Helper()
	ring, err := rs[0].Ring(t)
	if err != nil {
		t.Fatal(err)
	}
	byName := map[string]string{}
	for _, m := range ring.Members {
		byName[m.Name] = m.Remote
	}
	var out []string
	for i := range rs {
		out = append(out, byName[fmt.Sprintf("honest-%d", i)])
	}
	return out
}

// sendSystemMessages sends Stop and PoisonPill to both dispatch actors of
// the replica at remoteAddr from a protoactor remote of its own on
// fromIP, speaking TLS with keys when given.
func sendSystemMessages(t *testing.T, fromIP string, keys [][]byte, remoteAddr string) {
	t.Helper()
	dialer := func(ctx context.Context, addr string) (net.Conn, error) {
		d := net.Dialer{LocalAddr: &net.TCPAddr{IP: net.ParseIP(fromIP)}}
		return d.DialContext(ctx, "tcp", addr)
	}
	dial := []grpc.DialOption{grpc.WithContextDialer(dialer)}
	if keys != nil {
		g, err := trust.NewGuard(trust.GuardConfig{Keys: keys, Admitted: func(netip.Addr) bool { return false }})
		if err != nil {
			t.Fatal(err)
		}
		dial = append(dial, g.DialOptions()...)
	} else {
		dial = append(dial, grpc.WithTransportCredentials(insecure.NewCredentials()))
	}
	system := actor.NewActorSystem()
	r := remote.NewRemote(system, remote.Configure(fromIP, harness.FreePort(t), remote.WithDialOptions(dial...)))
	r.Start()
	defer r.Shutdown(false)
	for _, name := range []string{"dispatch", "dispatch-replies"} {
		pid := actor.NewPID(remoteAddr, name)
		system.Root.Poison(pid)
		system.Root.Stop(pid)
	}
}
