package nodetier

import (
	"bytes"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"net"
	"net/http"
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

	"github.com/miekg/dns"

	"github.com/shardns/shardns/httpapi"
	"github.com/shardns/shardns/integration/harness"
	"github.com/shardns/shardns/internal/testutil"
)

// The image scripts/image.sh builds, run as three replicas on a Docker
// bridge network of their own: what the StatefulSet in deploy/ runs,
// without a cluster. The records come from the demo cluster's YAML, so
// no apiserver is needed; everything else is as in a pod: non-root, a
// read-only root file system, no capabilities, :53 bound through the
// ip_unprivileged_port_start sysctl, peers found by name.

// containerQuestions are asked of every replica. Each answer is written
// as its RCODE and sorted answer records without name and TTL (a cached
// answer's TTL counts down), so equal answers compare equal.
var containerQuestions = []struct {
	name  string
	qtype uint16
	want  string
}{
	{"frontend.shop.svc.cluster.local.", dns.TypeA, "NOERROR A 10.96.10.10"},
	{"redis.data.svc.cluster.local.", dns.TypeA, "NOERROR A 10.96.20.10"},
	{"postgres.data.svc.cluster.local.", dns.TypeA, "NOERROR A 10.244.3.20 A 10.244.3.21"},
	{"api.shop.svc.cluster.local.", dns.TypeAAAA, "NOERROR AAAA fd00:10:96::c"},
	{"_grpc._tcp.cart.shop.svc.cluster.local.", dns.TypeSRV, "NOERROR SRV 0 100 9090 cart.shop.svc.cluster.local."},
	{"10.10.96.10.in-addr.arpa.", dns.TypePTR, "NOERROR PTR frontend.shop.svc.cluster.local."},
	{"nope.shop.svc.cluster.local.", dns.TypeA, "NXDOMAIN"},
}

// Three containers, replicationFactor 2: every replica gives the same
// answers; a stopped replica costs no answer and leaves the ring; a
// restarted one and a partitioned one come back.
func TestContainerReplicas(t *testing.T) {
	requireDocker(t)
	prefix := fmt.Sprintf("shardns-it-%d", os.Getpid())
	image := buildImage(t, prefix)
	ips := createNetwork(t, prefix, 4)
	key := base64.StdEncoding.EncodeToString([]byte("shardns container test key, 32 b"))
	rs := make([]replicaContainer, 3)
	for i, ip := range ips[:3] {
		rs[i] = replicaContainer{name: fmt.Sprintf("%s-%d", prefix, i), ip: ip, network: prefix, key: key}
		seed := "" // the first replica starts the cluster; the others join it by name
		if i > 0 {
			seed = rs[0].name
		}
		rs[i].run(t, image, seed)
	}
	all := []string{rs[0].name, rs[1].name, rs[2].name}
	converge(t, rs, all, 60*time.Second)
	askAll(t, rs)
	ringCommand(t, rs[0], all)

	// docker stop: SIGTERM, the replica leaves the ring during its
	// lameduck, the others take its zones over while being asked.
	q := startAsking(rs[:2])
	mustDocker(t, "stop", rs[2].name)
	converge(t, rs[:2], all[:2], 20*time.Second)
	q.finish(t, "docker stop of one replica")
	askAll(t, rs[:2])

	// The same container started again rejoins under its name.
	mustDocker(t, "start", rs[2].name)
	converge(t, rs, all, 30*time.Second)

	// A partition of the replica the others joined through: the two see
	// it go, then find it again when the network comes back (they re-join
	// their seed), and so does it.
	mustDocker(t, "network", "disconnect", rs[0].network, rs[0].name)
	converge(t, rs[1:], all[1:], 20*time.Second)
	mustDocker(t, "network", "connect", "--ip", rs[0].ip, rs[0].network, rs[0].name)
	converge(t, rs, all, 30*time.Second)
	askAll(t, rs)

	// A stranger on the same network, the same image, its own records
	// (redis at another address) and no key, told to join the first
	// replica: refused and counted, never a member, never an answer.
	stranger := replicaContainer{name: prefix + "-stranger", ip: ips[3], network: prefix,
		demo: func(b []byte) []byte { return bytes.ReplaceAll(b, []byte("10.96.20.10"), []byte("10.96.20.99")) }}
	stranger.run(t, image, rs[0].name)
	testutil.Eventually(t, 30*time.Second, func() error {
		ring, err := rs[0].ring()
		if err != nil {
			return err
		}
		for _, r := range ring.Rejected {
			if r.Addr == stranger.ip && r.Reason == "key" {
				return nil
			}
		}
		return fmt.Errorf("%s lists rejections %+v, none of %s for its key", rs[0].name, ring.Rejected, stranger.ip)
	})
	converge(t, rs, all, 5*time.Second)
	askAll(t, rs)
}

// replicaContainer is one shardns container, reached from the host at its
// bridge address.
type replicaContainer struct {
	name, ip, network string
	key               string              // gossip key, base64; empty: cluster.insecure
	demo              func([]byte) []byte // edits the demo cluster it serves; nil: as shipped
}

func (r replicaContainer) dnsAddr() string { return net.JoinHostPort(r.ip, "53") }

func (r replicaContainer) url(path string) string {
	return "http://" + net.JoinHostPort(r.ip, "8080") + path
}

// containerConfig is a replica's shardns.yaml: the first one starts the
// cluster, the others join seed. The advertised address is left out: a
// replica picks its first non-loopback IPv4, the bridge address.
func containerConfig(seed string, keyed bool) string {
	membership := "enabled: true"
	if seed != "" {
		membership = fmt.Sprintf("join: [%q]", net.JoinHostPort(seed, "7946"))
	}
	if keyed {
		membership += "\n  secretKeyFile: /etc/shardns/gossip.key"
	} else {
		membership += "\n  insecure: true"
	}
	return fmt.Sprintf(`
dns: {listen: ["0.0.0.0:53"]}
http: {listen: "0.0.0.0:8080", lameduck: 1s, debug: ["0.0.0.0/0"]} # the test reads /debug/ring from the host, through the network's gateway
kubernetes: {enabled: false}
manifests: {files: [demo-cluster.yaml]}
forward: {upstreams: []}
cluster:
  %s
  replicationFactor: 2
  gossip: fast
  handoffGrace: 3s
`, membership)
}

// run starts the container with its configuration and the demo cluster
// mounted read-only, and removes it at the end of the test.
func (r replicaContainer) run(t *testing.T, image, seed string) {
	t.Helper()
	dir := t.TempDir()
	demo, err := os.ReadFile("../../deploy/local/demo-cluster.yaml")
	if err != nil {
		t.Fatal(err)
	}
	// The image runs as uid 65532: the folder must be readable by others.
	if err := os.Chmod(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	if r.demo != nil {
		demo = r.demo(demo)
	}
	files := map[string][]byte{"shardns.yaml": []byte(containerConfig(seed, r.key != "")), "demo-cluster.yaml": demo}
	if r.key != "" {
		files["gossip.key"] = []byte(r.key + "\n")
	}
	for name, data := range files {
		if err := os.WriteFile(filepath.Join(dir, name), data, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	t.Cleanup(func() {
		if t.Failed() {
			logs, _ := exec.Command("docker", "logs", "--tail", "40", r.name).CombinedOutput()
			t.Logf("%s logs:\n%s", r.name, logs)
		}
		docker("rm", "-f", "-v", r.name)
	})
	mustDocker(t, "run", "-d", "--name", r.name, "--hostname", r.name,
		"--network", r.network, "--ip", r.ip,
		"--sysctl", "net.ipv4.ip_unprivileged_port_start=53",
		"--read-only", "--cap-drop", "ALL", "--security-opt", "no-new-privileges",
		"-v", dir+":/etc/shardns:ro", image)
}

var containerHTTP = &http.Client{Timeout: 2 * time.Second}

func (r replicaContainer) ring() (httpapi.Ring, error) {
	var ring httpapi.Ring
	resp, err := containerHTTP.Get(r.url("/debug/ring"))
	if err != nil {
		return ring, err
	}
	defer resp.Body.Close()
	return ring, json.NewDecoder(resp.Body).Decode(&ring)
}

func (r replicaContainer) ready() error {
	resp, err := containerHTTP.Get(r.url("/ready"))
	if err != nil {
		return err
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("%s /ready = %d", r.name, resp.StatusCode)
	}
	return nil
}

// ownerMembers returns the members of ring, sorted, or an error naming
// the first that owns no zone yet.
func ownerMembers(ring httpapi.Ring) ([]string, error) {
	var names []string
	for _, m := range ring.Members {
		if !m.Owner {
			return nil, fmt.Errorf("member %s owns no zone yet", m.Name)
		}
		names = append(names, m.Name)
	}
	slices.Sort(names)
	return names, nil
}

// converge waits until every replica of rs is ready and its /debug/ring
// lists exactly the members want, each of them an owner.
func converge(t *testing.T, rs []replicaContainer, want []string, timeout time.Duration) {
	t.Helper()
	start := time.Now()
	testutil.Eventually(t, timeout, func() error {
		for _, r := range rs {
			if err := r.ready(); err != nil {
				return err
			}
			ring, err := r.ring()
			if err != nil {
				return err
			}
			names, err := ownerMembers(ring)
			if err != nil {
				return fmt.Errorf("%s: %w", r.name, err)
			}
			if !slices.Equal(names, want) {
				return fmt.Errorf("%s sees members %v, want %v", r.name, names, want)
			}
		}
		return nil
	})
	t.Logf("%d replicas see %d members after %v", len(rs), len(want), time.Since(start).Round(time.Millisecond))
}

// ringCommand runs `shardns ring` inside the container, as `kubectl exec
// shardns-0 -- /shardns ring` does in a pod (the image has no shell).
func ringCommand(t *testing.T, r replicaContainer, members []string) {
	t.Helper()
	out := mustDocker(t, "exec", r.name, "/shardns", "ring")
	for _, m := range members {
		if !strings.Contains(out, m) {
			t.Errorf("shardns ring in %s does not list %s:\n%s", r.name, m, out)
		}
	}
	if !strings.Contains(out, r.name+" (this replica)") {
		t.Errorf("shardns ring in %s does not mark itself:\n%s", r.name, out)
	}
	t.Logf("shardns ring in %s:\n%s", r.name, out)
}

// askAll asks every question of every replica: all answer as expected,
// hence all the same.
func askAll(t *testing.T, rs []replicaContainer) {
	t.Helper()
	for _, r := range rs {
		for _, q := range containerQuestions {
			if err := askReplica(r.dnsAddr(), q.name, q.qtype, q.want); err != nil {
				t.Error(err)
			}
		}
	}
}

// askReplica asks one question over UDP. After a timeout or a SERVFAIL it asks
// once more, as resolvers do; a wrong answer fails at once.
func askReplica(addr, name string, qtype uint16, want string) error {
	var err error
	for range 2 {
		var r *dns.Msg
		if r, err = testutil.Exchange(addr, "udp", name, qtype); err != nil {
			continue
		}
		got := harness.AnswerText(r)
		if r.Rcode == dns.RcodeServerFailure {
			err = fmt.Errorf("%s from %s: %s", name, addr, got)
			continue
		}
		if got != want {
			return fmt.Errorf("%s %s from %s: %q, want %q", name, dns.TypeToString[qtype], addr, got, want)
		}
		return nil
	}
	return err
}

// asking asks the questions of the replicas in turn until finished.
type asking struct {
	stop  atomic.Bool
	wg    sync.WaitGroup
	asked atomic.Int64
	mu    sync.Mutex
	errs  []error
}

func startAsking(rs []replicaContainer) *asking {
	a := &asking{}
	a.wg.Go(func() {
		for i := 0; !a.stop.Load(); i++ {
			q := containerQuestions[i%len(containerQuestions)]
			a.asked.Add(1)
			if err := askReplica(rs[i%len(rs)].dnsAddr(), q.name, q.qtype, q.want); err != nil {
				a.mu.Lock()
				a.errs = append(a.errs, err)
				a.mu.Unlock()
			}
		}
	})
	return a
}

func (a *asking) finish(t *testing.T, what string) {
	t.Helper()
	a.stop.Store(true)
	a.wg.Wait()
	if len(a.errs) > 0 {
		t.Fatalf("%s: %d of %d questions failed after a retry, first: %v", what, len(a.errs), a.asked.Load(), a.errs[0])
	}
	t.Logf("%s: %d questions, every one answered", what, a.asked.Load())
}

// requireDocker skips the test when no Docker engine answers.
func requireDocker(t *testing.T) {
	t.Helper()
	if _, err := exec.LookPath("docker"); err != nil {
		t.Skip("skipping: no docker command, so no Docker engine to run the image in")
	}
	if _, err := docker("info", "--format", "{{.ServerVersion}}"); err != nil {
		t.Skipf("skipping: no Docker engine runs (%v)", err)
	}
}

// buildImage builds the image with scripts/image.sh under a name of this
// test's own, so that no image of the user's is retagged, and removes it
// at the end.
func buildImage(t *testing.T, name string) string {
	t.Helper()
	return buildImageVersion(t, name, buildVersion)
}

// buildVersion is the version buildImage's binary reports.
const buildVersion = "it-test"

// buildImageVersion builds the image as `make image VERSION=version` does,
// tagged name:version and name:latest, and returns name:version.
func buildImageVersion(t *testing.T, name, version string) string {
	t.Helper()
	t.Cleanup(func() { docker("rmi", name+":"+version, name+":latest") })
	cmd := exec.Command("../../scripts/image.sh")
	cmd.Env = append(os.Environ(), "IMAGE="+name, "VERSION="+version)
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("scripts/image.sh: %v\n%s", err, out)
	}
	return name + ":" + version
}

// createNetwork creates a bridge network and returns n addresses in it
// for the containers. A container keeps its address when it is connected
// again only if the network's subnet was given at creation (docker
// network connect --ip), so Docker picks a free subnet first and the
// network is created again with it.
func createNetwork(t *testing.T, name string, n int) []string {
	t.Helper()
	t.Cleanup(func() { docker("network", "rm", name) })
	mustDocker(t, "network", "create", name)
	subnet, err := docker("network", "inspect", "--format", "{{(index .IPAM.Config 0).Subnet}}", name)
	mustDocker(t, "network", "rm", name)
	if err != nil {
		t.Fatal(err)
	}
	prefix, err := netip.ParsePrefix(subnet)
	if err != nil || !prefix.Addr().Is4() || prefix.Bits() > 24 {
		t.Fatalf("subnet %q of a new network: want an IPv4 /24 or larger (%v)", subnet, err)
	}
	mustDocker(t, "network", "create", "--subnet", prefix.String(), name)
	addr := prefix.Masked().Addr()
	for range 10 { // past the gateway (.1)
		addr = addr.Next()
	}
	ips := make([]string, n)
	for i := range ips {
		ips[i], addr = addr.String(), addr.Next()
	}
	return ips
}

func docker(args ...string) (string, error) {
	out, err := exec.Command("docker", args...).CombinedOutput()
	if err != nil {
		return "", fmt.Errorf("docker %s: %v: %s", strings.Join(args, " "), err, bytes.TrimSpace(out))
	}
	return strings.TrimSpace(string(out)), nil
}

func mustDocker(t *testing.T, args ...string) string {
	t.Helper()
	out, err := docker(args...)
	if err != nil {
		t.Fatal(err)
	}
	return out
}
