package functional

import (
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/miekg/dns"

	"github.com/shardns/shardns/integration/harness"
	"github.com/shardns/shardns/integration/kubeapi"
	"github.com/shardns/shardns/internal/testutil"
)

// A ServiceEntry exported to its own namespace (exportTo ["."]) is
// answered through the node tier to the pods of that namespace only: the
// node-local process knows its pods, asks the owner with the pod's
// namespace and caches nothing of it by name. Pods of other namespaces,
// clients it does not know and the replicas' own listeners get what they
// got without the entry: the public wildcard's answer, or the upstream's.
func TestNodeLocalMeshExportTo(t *testing.T) {
	cp := kubeapi.Shared(t)
	se := installServiceEntryCRD(t, cp)
	for _, ns := range []string{"nlm-a", "nlm-b"} {
		ensureNamespace(t, cp, ns)
	}
	const node = "nlm-node"
	mkNodePod(t, cp.Client, "nlm-a", "client", node, false, "127.0.0.61")
	mkNodePod(t, cp.Client, "nlm-b", "client", node, false, "127.0.0.62")
	mkOwnServiceEntry(t, se, "nlm-b", "public", map[string]any{
		"hosts": list("*.nlm.global"), "addresses": list("127.255.0.7")})
	mkOwnServiceEntry(t, se, "nlm-a", "private", map[string]any{
		"hosts": list("db.nlm.global", "only.nlmprivate.global"), "addresses": list("10.77.0.1"), "exportTo": list(".")})
	u := harness.StartUnbound(t, "only.nlmprivate.global. 300 IN A 192.0.2.90", "db.nlm.global. 300 IN A 192.0.2.91")

	r := harness.StartReplica(t, cp, harness.ReplicaOptions{Name: "r0", RF: 2, Cluster: "gossip: fast\nistio: {enabled: true}", Kube: "pods: disabled"})
	harness.Settled(t, []*harness.Replica{r}, 1)
	p := harness.Start(t, harness.Options{Config: fmt.Sprintf(`
mode: nodelocal
dns: {listen: ["127.0.0.1:0"]}
http: {listen: "127.0.0.1:0", lameduck: 0s}
kubernetes: {kubeconfig: %q, pods: disabled}
nodeLocal: {nodeName: %s, meshNamespaces: true}
forward: {upstreams: [%q]}
cluster:
  nodeName: nl-a
  replicas: [%q]
  remote: "127.0.0.1:%d"
  gossip: fast
`, cp.Kubeconfig, node, u.Addr, harness.RemoteOf(t, r), harness.FreePort(t))})

	nl := &harness.Replica{Process: p, HTTP: p.HTTPAddr(t)}
	testutil.Eventually(t, 20*time.Second, func() error {
		if got := harness.Scrape(t, nl.HTTP, "shardns_client_pods_held"); got != 2 {
			return fmt.Errorf("the node-local process holds %v pods, want 2", got)
		}
		return nil
	})
	a := func(name, addr string) []string { return []string{name + "\tA\t" + addr} }
	const own, other, unknown = "127.0.0.61", "127.0.0.62", "127.0.0.63"
	// The names reach the node-local process with the ring: until then its
	// answers are the upstream's.
	testutil.Eventually(t, 20*time.Second, func() error {
		return answersFrom(nl.Addr, own, "db.nlm.global.", dns.TypeA, dns.RcodeSuccess, a("db.nlm.global.", "10.77.0.1"))
	})
	// Each question twice, others' in between: nothing one namespace was
	// answered reaches another through a cache.
	for range 2 {
		for _, c := range []struct {
			from, name string
			want       []string
		}{
			{other, "db.nlm.global.", a("db.nlm.global.", "127.255.0.7")},
			{own, "db.nlm.global.", a("db.nlm.global.", "10.77.0.1")},
			{unknown, "db.nlm.global.", a("db.nlm.global.", "127.255.0.7")},
			{other, "only.nlmprivate.global.", a("only.nlmprivate.global.", "192.0.2.90")},
			{own, "only.nlmprivate.global.", a("only.nlmprivate.global.", "10.77.0.1")},
			{unknown, "only.nlmprivate.global.", a("only.nlmprivate.global.", "192.0.2.90")},
			{own, "x.nlm.global.", a("x.nlm.global.", "127.255.0.7")},
		} {
			if err := answersFromRetried(nl.Addr, c.from, c.name, dns.TypeA, dns.RcodeSuccess, c.want); err != nil {
				t.Error(err)
			}
		}
	}
	// The replica's own listener answers the public wildcard only, and
	// has no upstream for the rest.
	if err := answersFrom(r.Addr, own, "db.nlm.global.", dns.TypeA, dns.RcodeSuccess, a("db.nlm.global.", "127.255.0.7")); err != nil {
		t.Error(err)
	}
	if err := answersFrom(r.Addr, own, "only.nlmprivate.global.", dns.TypeA, dns.RcodeRefused, nil); err != nil {
		t.Error(err)
	}
}

// answersFromRetried is answersFrom, asked again while it is SERVFAIL (a
// connection to the owner still being made), for at most 10 s.
func answersFromRetried(addr, from, name string, qtype uint16, rcode int, want []string) error {
	deadline := time.Now().Add(10 * time.Second)
	for {
		err := answersFrom(addr, from, name, qtype, rcode, want)
		if err == nil || !errors.Is(err, errServfail) || time.Now().After(deadline) {
			return err
		}
	}
}
