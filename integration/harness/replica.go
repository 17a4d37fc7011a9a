package harness

import (
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"syscall"
	"testing"
	"time"

	"github.com/miekg/dns"
	"github.com/shardns/shardns/cluster"
	"github.com/shardns/shardns/httpapi"
	"github.com/shardns/shardns/integration/kubeapi"
	"github.com/shardns/shardns/internal/testutil"
)

// Replica is a shardns binary that is one replica of a cluster.
type Replica struct {
	*Process
	HTTP   string
	Gossip string
}

// FastGossip is the cluster keys of most replicas the tests start: the
// fast gossip profile and a short handoff grace, so that a cluster
// settles in seconds.
const FastGossip = "gossip: fast\n  handoffGrace: 5s"

// ReplicaOptions say how StartReplica runs one replica of a cluster that
// watches a real kube-apiserver.
type ReplicaOptions struct {
	Name  string   // cluster.nodeName
	Seeds []string // gossip addresses; it joins the first, or starts a cluster with none
	RF    int      // cluster.replicationFactor
	// Cluster ends the cluster section: keys indented by two spaces after
	// the first line (FastGossip, "handoffGrace: 5s", ...).
	Cluster string
	// Lameduck is http.lameduck: how long the replica answers after
	// SIGTERM.
	Lameduck time.Duration
	// Kube ends the kubernetes section: flow-style keys (e.g. `external:
	// {zones: [example.org]}`) for what a replica serves beside the
	// cluster names.
	Kube string
}

// StartReplica runs a replica Process watching cp's apiserver, its
// gossip and remote ports chosen free (see LaunchReplica), and stops it
// when the test ends.
func StartReplica(t testing.TB, cp *kubeapi.ControlPlane, o ReplicaOptions) *Replica {
	t.Helper()
	kube := o.Kube
	if kube != "" {
		kube = ", " + kube
	}
	return LaunchReplica(t, o.Name, o.Seeds, func(join, gossip string, remote int) (*Process, error) {
		return TryStart(t, Options{Config: fmt.Sprintf(`
dns: {listen: ["127.0.0.1:0"]}
http: {listen: "127.0.0.1:0", lameduck: %s, pprof: %t}
kubernetes: {enabled: true, kubeconfig: %q%s}
forward: {upstreams: []}
cluster:
  nodeName: %s
  %s
  bind: %q
  remote: "127.0.0.1:%d"
  replicationFactor: %d
  %s
`, o.Lameduck, Profiled(), cp.Kubeconfig, kube, o.Name, join, gossip, remote, o.RF, o.Cluster)})
	})
}

// LaunchReplica starts a replica Process through start, which is
// given its cluster.join line (`enabled: true`, or a join of the first of
// seeds), its gossip address and its remote port. The ports are chosen
// here, as the other replicas must know them; ones taken by another
// Process before the replica binds them are chosen again.
func LaunchReplica(t testing.TB, name string, seeds []string, start func(join, gossip string, remote int) (*Process, error)) *Replica {
	t.Helper()
	join := "enabled: true"
	if len(seeds) > 0 && seeds[0] != "" {
		join = fmt.Sprintf("join: [%q]", seeds[0])
	}
	for attempt := 1; ; attempt++ {
		gossip := fmt.Sprintf("127.0.0.1:%d", FreePort(t))
		p, err := start(join, gossip, FreePort(t))
		if errors.Is(err, ErrPortTaken) && attempt < 3 {
			t.Logf("%s: %v; choosing others", name, err)
			continue
		}
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		return &Replica{Process: p, HTTP: p.HTTPAddr(t), Gossip: gossip}
	}
}

// Profiled reports whether replicas serve profiles: with
// SHARDNS_PROFILE_DIR, which keeps them. Otherwise they run as deployed,
// without http.pprof, and so without sampling their heap (see
// node.sampleHeap), which the memory benches' RSS would count.
func Profiled() bool { return os.Getenv("SHARDNS_PROFILE_DIR") != "" }

// Ring is the ring the replica serves on /debug/ring.
func (r *Replica) Ring(t testing.TB) (httpapi.Ring, error) {
	resp, err := http.Get("http://" + r.HTTP + "/debug/ring")
	if err != nil {
		return httpapi.Ring{}, err
	}
	defer resp.Body.Close()
	var ring httpapi.Ring
	return ring, json.NewDecoder(resp.Body).Decode(&ring)
}

// Settled waits until every replica is ready and sees want members.
func Settled(t testing.TB, rs []*Replica, want int) {
	t.Helper()
	SettledWithin(t, rs, want, 30*time.Second)
}

// SettledWithin is Settled with its bound: replicas that list a large
// cluster all at once take longer to be ready.
func SettledWithin(t testing.TB, rs []*Replica, want int, timeout time.Duration) {
	t.Helper()
	testutil.Eventually(t, timeout, func() error {
		for _, r := range rs {
			if code := HTTPStatus(t, "http://"+r.HTTP+"/ready"); code != 200 {
				return fmt.Errorf("%s /ready = %d", r.HTTP, code)
			}
			ring, err := r.Ring(t)
			if err != nil {
				return err
			}
			if len(ring.Members) != want {
				return fmt.Errorf("%s sees %d members, want %d", ring.Self, len(ring.Members), want)
			}
		}
		return nil
	})
}

// ExternalOwners waits until every replica places the service zone of
// each namespace, where its external names are routed, on one and the
// same replica, and only that one serves it, and returns the owners by
// namespace: the other replicas hold nothing of the namespace, so they
// can answer its names only by asking the owner.
func ExternalOwners(t testing.TB, rs []*Replica, nss []string) map[string]string {
	t.Helper()
	owners := map[string]string{}
	testutil.Eventually(t, 30*time.Second, func() error {
		clear(owners)
		served := map[string][]string{} // zone key → the replicas serving it
		for _, r := range rs {
			ring, err := r.Ring(t)
			if err != nil {
				return err
			}
			for _, key := range ring.Served {
				served[key] = append(served[key], ring.Self)
			}
			for _, ns := range nss {
				key := ns + ".svc.cluster.local."
				o := ring.Zones[key]
				if len(o) != 1 {
					return fmt.Errorf("%s places %s on %v, want one owner", ring.Self, key, o)
				}
				if prev, ok := owners[ns]; ok && prev != o[0] {
					return fmt.Errorf("%s places %s on %s, another replica on %s", ring.Self, key, o[0], prev)
				}
				owners[ns] = o[0]
			}
		}
		for _, ns := range nss {
			key := ns + ".svc.cluster.local."
			if got := served[key]; len(got) != 1 || got[0] != owners[ns] {
				return fmt.Errorf("%s is served by %v, want its owner %s alone", key, got, owners[ns])
			}
		}
		return nil
	})
	return owners
}

// ServedBy waits until every replica answers name.
func ServedBy(t testing.TB, rs []*Replica, name string) {
	t.Helper()
	testutil.Eventually(t, 5*time.Minute, func() error {
		for _, addr := range Addrs(rs) {
			r, err := testutil.Exchange(addr, "udp", name, dns.TypeA)
			if err != nil {
				return err
			}
			if r.Rcode != dns.RcodeSuccess || len(r.Answer) == 0 {
				return fmt.Errorf("%s from %s: %s", name, addr, dns.RcodeToString[r.Rcode])
			}
		}
		return nil
	})
}

// Addrs is the DNS address of each of rs.
func Addrs(rs []*Replica) []string {
	var out []string
	for _, r := range rs {
		out = append(out, r.Addr)
	}
	return out
}

// StartCorefileReplica starts `shardns serve --corefile` on corefile, a
// template RenderCorefile fills ({{kubeconfig}} with cp's, {{upstream}}
// with a loopback port where nothing listens, each other name with a free
// port), beside a base that makes it member name of a cluster with
// replicationFactor 1, joining seed unless "". It is killed, not
// stopped, when the test ends: a Corefile's health lameduck would hold
// each replica for seconds.
func StartCorefileReplica(t testing.TB, cp *kubeapi.ControlPlane, name, seed, corefile string) *Replica {
	t.Helper()
	return LaunchReplica(t, name, []string{seed}, func(join, gossip string, remote int) (*Process, error) {
		dir := t.TempDir()
		run := RenderCorefile(t, corefile, map[string]string{
			"kubeconfig": cp.Kubeconfig, "upstream": fmt.Sprintf("127.0.0.1:%d", FreePort(t))})
		WriteFiles(t, dir, map[string]string{"Corefile": run.Text, "base.yaml": fmt.Sprintf(`cluster:
  nodeName: %s
  %s
  bind: %q
  remote: "127.0.0.1:%d"
  replicationFactor: 1
  gossip: fast
`, name, join, gossip, remote)})
		p, err := TryStart(t, Options{Args: []string{"--corefile", filepath.Join(dir, "Corefile"), "--config", filepath.Join(dir, "base.yaml")}})
		if err == nil {
			t.Cleanup(func() { p.Cmd.Process.Signal(syscall.SIGKILL) })
		}
		return p, err
	})
}

// NamespacesOwned counts, for each of members, the namespaces
// prefix0 … prefix(n-1) whose service zone it owns in a ring of those
// members with replication factor 1: what each replica of a test's ring
// should watch of n namespaces it creates.
func NamespacesOwned(members []string, prefix string, n int) []int {
	ms := make([]cluster.Member, len(members))
	for i, m := range members {
		ms[i] = cluster.Member{Name: m, Owner: true}
	}
	ring := cluster.NewRing("", ms, 1)
	owned := make([]int, len(members))
	for i, m := range members {
		for j := range n {
			if ring.Owns(m, fmt.Sprintf("%s%d.svc.cluster.local.", prefix, j)) {
				owned[i]++
			}
		}
	}
	return owned
}
