package functional

import (
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/miekg/dns"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/dynamic"

	"github.com/shardns/shardns/integration/harness"
	"github.com/shardns/shardns/integration/kubeapi"
	"github.com/shardns/shardns/internal/testutil"
)

// The Istio source against a real apiserver: Istio itself is not needed,
// only its ServiceEntry CRD (an open schema is enough: shardns reads the
// fields it needs and reports the rest). The CRD stays installed in the
// shared control plane once a test installed it; nothing but the Istio
// tests reads networking.istio.io, and each test keeps to its own
// namespaces and hosts.

var serviceEntries = schema.GroupVersionResource{Group: "networking.istio.io", Version: "v1", Resource: "serviceentries"}

// installed records the CRDs each control plane serves.
var installed struct {
	mu   sync.Mutex
	crds map[installedCRD]bool
}

// installedCRD is one CRD of one control plane.
type installedCRD struct {
	cp   *kubeapi.ControlPlane
	name string
}

// installServiceEntryCRD installs a ServiceEntry CRD with Istio's three
// versions (v1 stored) and a status subresource, unless cp has it, waits
// until it is served, and returns a dynamic client.
func installServiceEntryCRD(t *testing.T, cp *kubeapi.ControlPlane) dynamic.Interface {
	t.Helper()
	return installCRD(t, cp, openCRD("networking.istio.io", "ServiceEntry", "serviceentries", []string{"se"},
		"v1", "v1beta1", "v1alpha3"), serviceEntries)
}

// openCRD is the manifest of a namespaced CRD whose spec and status take
// any fields, in versions (the first stored), each with a status
// subresource: shardns reads the fields it needs and reports the rest.
func openCRD(group, kind, plural string, shortNames []string, versions ...string) *unstructured.Unstructured {
	open := map[string]any{"type": "object", "x-kubernetes-preserve-unknown-fields": true}
	var vs []any
	for i, v := range versions {
		vs = append(vs, map[string]any{
			"name": v, "served": true, "storage": i == 0,
			"subresources": map[string]any{"status": map[string]any{}},
			"schema": map[string]any{"openAPIV3Schema": map[string]any{
				"type": "object", "properties": map[string]any{"spec": open, "status": open}}},
		})
	}
	names := map[string]any{"kind": kind, "listKind": kind + "List", "plural": plural, "singular": strings.ToLower(kind)}
	if len(shortNames) > 0 {
		names["shortNames"] = list(shortNames...)
	}
	return &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "apiextensions.k8s.io/v1",
		"kind":       "CustomResourceDefinition",
		"metadata":   map[string]any{"name": plural + "." + group},
		"spec": map[string]any{
			"group": group, "scope": "Namespaced", "names": names, "versions": vs,
		},
	}}
}

// installCRD creates crd in cp unless cp has it, waits until served (a
// resource of it) lists, and returns a dynamic client. A CRD stays
// installed in the shared control plane once a test installed it.
func installCRD(t *testing.T, cp *kubeapi.ControlPlane, crd *unstructured.Unstructured, served schema.GroupVersionResource) dynamic.Interface {
	t.Helper()
	dyn, err := dynamic.NewForConfig(cp.RESTConfig())
	if err != nil {
		t.Fatal(err)
	}
	installed.mu.Lock()
	defer installed.mu.Unlock()
	key := installedCRD{cp, crd.GetName()}
	if installed.crds[key] {
		return dyn
	}
	crds := dyn.Resource(schema.GroupVersionResource{Group: "apiextensions.k8s.io", Version: "v1", Resource: "customresourcedefinitions"})
	if _, err := crds.Create(ctx, crd, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
		t.Fatal(err)
	}
	testutil.Eventually(t, 30*time.Second, func() error {
		_, err := dyn.Resource(served).List(ctx, metav1.ListOptions{Limit: 1})
		return err
	})
	if installed.crds == nil {
		installed.crds = map[installedCRD]bool{}
	}
	installed.crds[key] = true
	return dyn
}

func list(s ...string) []any {
	out := make([]any, len(s))
	for i, v := range s {
		out[i] = v
	}
	return out
}

// mkServiceEntry creates a ServiceEntry through the given API version.
func mkServiceEntry(t *testing.T, dyn dynamic.Interface, version, ns, name string, spec map[string]any) {
	t.Helper()
	gvr := serviceEntries
	gvr.Version = version
	se := dyn.Resource(gvr)
	u := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "networking.istio.io/" + version, "kind": "ServiceEntry",
		"metadata": map[string]any{"namespace": ns, "name": name}, "spec": spec}}
	if _, err := se.Namespace(ns).Create(ctx, u, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
}

// setSpec replaces the spec of a ServiceEntry.
func setSpec(t *testing.T, dyn dynamic.Interface, ns, name string, spec map[string]any) {
	t.Helper()
	se := dyn.Resource(serviceEntries)
	u, err := se.Namespace(ns).Get(ctx, name, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	u.Object["spec"] = spec
	if _, err := se.Namespace(ns).Update(ctx, u, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
}

// allocate writes status.addresses as Istio's allocator does (host, value
// pairs), through the status subresource.
func allocate(t *testing.T, dyn dynamic.Interface, ns, name string, hostValue ...string) {
	t.Helper()
	se := dyn.Resource(serviceEntries)
	u, err := se.Namespace(ns).Get(ctx, name, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	var addrs []any
	for i := 0; i+1 < len(hostValue); i += 2 {
		addrs = append(addrs, map[string]any{"host": hostValue[i], "value": hostValue[i+1]})
	}
	u.Object["status"] = map[string]any{"addresses": addrs}
	if _, err := se.Namespace(ns).UpdateStatus(ctx, u, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
}

// meshAnswers checks a NOERROR answer to one question over UDP and TCP:
// its rdata, and whether shardns answered it from the mesh (authoritative,
// no SOA when empty) or forwarded it (the upstream's data).
func meshAnswers(addr, name string, qtype uint16, fromMesh bool, want ...string) error {
	slices.Sort(want)
	for _, proto := range []string{"udp", "tcp"} {
		r, err := testutil.Exchange(addr, proto, dns.Fqdn(name), qtype)
		if err != nil {
			return err
		}
		q := fmt.Sprintf("%s %s over %s", name, dns.TypeToString[qtype], proto)
		if r.Rcode != dns.RcodeSuccess {
			return fmt.Errorf("%s: rcode %s", q, dns.RcodeToString[r.Rcode])
		}
		if got := harness.RDataValues(r.Answer); !slices.Equal(got, want) && !(len(got) == 0 && len(want) == 0) {
			return fmt.Errorf("%s: %q, want %q", q, got, want)
		}
		// A forwarded answer has the upstream's AA bit (Unbound's local
		// data sets it): only the data tell it from a mesh answer.
		if fromMesh && !r.Authoritative {
			return fmt.Errorf("%s: not authoritative, want AA set on an answer from the mesh", q)
		}
		if fromMesh && len(r.Ns) != 0 {
			return fmt.Errorf("%s: authority %v, want none", q, r.Ns)
		}
	}
	return nil
}

func startMeshNode(t *testing.T, cp *kubeapi.ControlPlane, upstream string) *harness.KubeNode {
	t.Helper()
	return harness.StartNodeYAML(t, fmt.Sprintf(`
dns: {listen: ["127.0.0.1:0"]}
http: {listen: "127.0.0.1:0"}
kubernetes: {enabled: true, kubeconfig: %q}
istio: {enabled: true, ttl: 17, zones: [global, mesh.example]}
cluster: {replicationFactor: 0}
forward: {upstreams: [%q]}
`, cp.Kubeconfig, upstream), true)
}

// ServiceEntry hosts made through the API, answered over UDP and TCP, with
// the names around them forwarded to a real upstream.
func TestIstioServiceEntries(t *testing.T) {
	cp := kubeapi.Shared(t)
	se := installServiceEntryCRD(t, cp)
	harness.CreateNamespace(t, cp.Client, "mesh-se", nil)
	web := harness.CreateService(t, cp.Client, harness.ClusterIPService("mesh-se", "web"))
	// What the upstream answers for names shardns must not answer itself.
	up := harness.StartUnbound(t,
		"test.global. 300 IN A 192.0.2.70",
		"other.mesh.example. 300 IN A 192.0.2.71",
		"x.db.mesh.example. 300 IN A 192.0.2.72",
		"auto.mesh.example. 300 IN A 192.0.2.73",
		"private.mesh.example. 300 IN A 192.0.2.74",
		"gone.test.global. 300 IN A 192.0.2.75",
	)

	mkServiceEntry(t, se, "v1", "mesh-se", "global", map[string]any{
		"hosts": list("*.test.global"), "addresses": list("127.255.0.2"), "resolution": "STATIC",
		"ports": []any{map[string]any{"number": int64(80), "name": "http", "protocol": "HTTP"}}})
	mkServiceEntry(t, se, "v1", "mesh-se", "exact", map[string]any{
		"hosts": list("service1.test.global"), "addresses": list("127.255.0.9")})
	mkServiceEntry(t, se, "v1beta1", "mesh-se", "dual", map[string]any{
		"hosts": list("db.mesh.example"), "addresses": list("10.200.0.1", "fd00:200::1")})
	mkServiceEntry(t, se, "v1alpha3", "mesh-se", "ranges", map[string]any{
		"hosts": list("v4.mesh.example"), "addresses": list("10.200.0.2/32", "10.201.0.0/24")})
	mkServiceEntry(t, se, "v1", "mesh-se", "auto", map[string]any{
		"hosts": list("auto.mesh.example"), "resolution": "DNS"})
	mkServiceEntry(t, se, "v1", "mesh-se", "kube", map[string]any{
		"hosts": list("web.mesh-se.svc.cluster.local", "Web.Mesh.Example"), "addresses": list("10.250.0.1")})
	mkServiceEntry(t, se, "v1", "mesh-se", "private", map[string]any{
		"hosts": list("private.mesh.example"), "addresses": list("10.200.0.9"), "exportTo": list(".")})
	n := startMeshNode(t, cp, up.Addr)
	eventually := func(name string, qtype uint16, fromMesh bool, want ...string) {
		t.Helper()
		testutil.Eventually(t, 10*time.Second, func() error { return meshAnswers(n.Addr, name, qtype, fromMesh, want...) })
	}

	// Istio's example, wildcards at any depth, exact over wildcard.
	eventually("service2.test.global", dns.TypeA, true, "127.255.0.2")
	eventually("a.b.c.test.global", dns.TypeA, true, "127.255.0.2")
	eventually("service1.test.global", dns.TypeA, true, "127.255.0.9")
	eventually("Service1.Test.Global", dns.TypeA, true, "127.255.0.9")
	eventually("test.global", dns.TypeA, false, "192.0.2.70") // the wildcard's own domain
	// Families, ranges, other types.
	eventually("db.mesh.example", dns.TypeA, true, "10.200.0.1")
	eventually("db.mesh.example", dns.TypeAAAA, true, "fd00:200::1")
	eventually("v4.mesh.example", dns.TypeA, true, "10.200.0.2")
	eventually("v4.mesh.example", dns.TypeAAAA, true)
	eventually("service2.test.global", dns.TypeAAAA, true)
	eventually("db.mesh.example", dns.TypeTXT, true)
	// Names of a mesh zone that match no host go upstream.
	eventually("other.mesh.example", dns.TypeA, false, "192.0.2.71")
	eventually("x.db.mesh.example", dns.TypeA, false, "192.0.2.72")
	// Not exported to every namespace: not answered.
	eventually("private.mesh.example", dns.TypeA, false, "192.0.2.74")
	// Kubernetes names keep their Kubernetes answers.
	n.Eventually(t, "web.mesh-se.svc.cluster.local", dns.TypeA, dns.RcodeSuccess, web.Spec.ClusterIP)
	eventually("web.mesh.example", dns.TypeA, true, "10.250.0.1")
	// istio.ttl.
	r, err := testutil.Exchange(n.Addr, "udp", "service1.test.global.", dns.TypeA)
	if err != nil || len(r.Answer) != 1 || r.Answer[0].Header().Ttl != 17 {
		t.Fatalf("service1.test.global.: %v, %v; want one record with TTL 17", r, err)
	}

	// No address: upstream's answer, until Istio allocates one.
	eventually("auto.mesh.example", dns.TypeA, false, "192.0.2.73")
	allocate(t, se, "mesh-se", "auto", "auto.mesh.example", "240.240.0.5", "auto.mesh.example", "2001:2::5", "elsewhere.example", "240.240.0.6")
	eventually("auto.mesh.example", dns.TypeA, true, "240.240.0.5")
	eventually("auto.mesh.example", dns.TypeAAAA, true, "2001:2::5")

	// Updates and deletes are served within seconds.
	within := func(name string, qtype uint16, fromMesh bool, want ...string) {
		t.Helper()
		testutil.Eventually(t, 3*time.Second, func() error { return meshAnswers(n.Addr, name, qtype, fromMesh, want...) })
	}
	setSpec(t, se, "mesh-se", "exact", map[string]any{"hosts": list("service1.test.global"), "addresses": list("127.255.0.10")})
	within("service1.test.global", dns.TypeA, true, "127.255.0.10")
	if err := se.Resource(serviceEntries).Namespace("mesh-se").Delete(ctx, "exact", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	within("service1.test.global", dns.TypeA, true, "127.255.0.2")
	if err := se.Resource(serviceEntries).Namespace("mesh-se").Delete(ctx, "global", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	within("gone.test.global", dns.TypeA, false, "192.0.2.75")
	// A broken update keeps the last good version.
	setSpec(t, se, "mesh-se", "dual", map[string]any{"hosts": list("db.mesh.example"), "addresses": list("not an address")})
	setSpec(t, se, "mesh-se", "ranges", map[string]any{"hosts": list("v4.mesh.example"), "addresses": list("10.200.0.3")})
	within("v4.mesh.example", dns.TypeA, true, "10.200.0.3")
	if err := meshAnswers(n.Addr, "db.mesh.example", dns.TypeA, true, "10.200.0.1"); err != nil {
		t.Fatal(err)
	}
}

// A cluster without Istio's CRDs: istio.enabled does not keep shardns
// from turning ready, and Kubernetes names are served.
func TestIstioWithoutServiceEntryCRD(t *testing.T) {
	cp := kubeapi.Start(t)
	harness.CreateNamespace(t, cp.Client, "plain", nil)
	svc := harness.CreateService(t, cp.Client, harness.ClusterIPService("plain", "web"))
	n := harness.StartNodeYAML(t, fmt.Sprintf(`
dns: {listen: ["127.0.0.1:0"]}
http: {listen: "127.0.0.1:0"}
kubernetes: {enabled: true, kubeconfig: %q}
istio: {enabled: true}
cluster: {replicationFactor: 0}
forward: {upstreams: []}
`, cp.Kubeconfig), true)
	n.Eventually(t, "web.plain.svc.cluster.local", dns.TypeA, dns.RcodeSuccess, svc.Spec.ClusterIP)
}

// startMeshReplica starts one replica of a sharded cluster watching the
// Kubernetes API and ServiceEntries.
func startMeshReplica(t *testing.T, cp *kubeapi.ControlPlane, name string, seeds []string) *harness.KubeNode {
	t.Helper()
	quoted := make([]string, len(seeds))
	for i, s := range seeds {
		quoted[i] = fmt.Sprintf("%q", s)
	}
	return harness.StartNodeYAML(t, fmt.Sprintf(`
dns: {listen: ["127.0.0.1:0"]}
http: {listen: "127.0.0.1:0"}
kubernetes: {enabled: true, kubeconfig: %q}
istio: {enabled: true, zones: [shard.example]}
forward: {upstreams: []}
cluster:
  enabled: true
  nodeName: %s
  bind: "127.0.0.1:0"
  remote: "127.0.0.1:%d"
  join: [%s]
  replicationFactor: 1
  gossip: fast
  handoffGrace: 3s
`, cp.Kubeconfig, name, harness.FreePort(t), strings.Join(quoted, ", ")), false)
}

// Mesh zones shard like the others: each lives on one replica, and every
// replica answers every mesh name, asking the owner when it is not one.
func TestIstioShardedMeshZones(t *testing.T) {
	cp := kubeapi.Shared(t)
	se := installServiceEntryCRD(t, cp)
	harness.CreateNamespace(t, cp.Client, "mesh-shard", nil)
	want := map[string]string{}
	for i := range 6 {
		host := fmt.Sprintf("svc.zone%d.shard.example", i)
		addr := fmt.Sprintf("10.210.0.%d", i+1)
		want[host] = addr
		mkServiceEntry(t, se, "v1", "mesh-shard", fmt.Sprintf("e%d", i), map[string]any{
			"hosts": list(host), "addresses": list(addr)})
	}
	mkServiceEntry(t, se, "v1", "mesh-shard", "wild", map[string]any{
		"hosts": list("*.wild.shard.example"), "addresses": list("10.210.1.1")})
	want["a.b.wild.shard.example"] = "10.210.1.1"

	a := startMeshReplica(t, cp, "mesh-a", nil)
	b := startMeshReplica(t, cp, "mesh-b", []string{a.GossipAddr()})
	c := startMeshReplica(t, cp, "mesh-c", []string{a.GossipAddr()})
	nodes := []*harness.KubeNode{a, b, c}
	testutil.Eventually(t, 30*time.Second, func() error {
		for _, n := range nodes {
			if !n.Ready() {
				return fmt.Errorf("%s not ready", n.Addr)
			}
			if r := harness.DebugRing(t, n.Node); len(r.Members) != 3 {
				return fmt.Errorf("%s sees %d members", r.Self, len(r.Members))
			}
		}
		return nil
	})
	// Each mesh zone is served by exactly one replica.
	testutil.Eventually(t, 15*time.Second, func() error {
		servedBy := map[string]int{}
		for _, n := range nodes {
			for _, z := range harness.DebugRing(t, n.Node).Served {
				servedBy[z]++
			}
		}
		for i := range 6 {
			if z := fmt.Sprintf("zone%d.shard.example.", i); servedBy[z] != 1 {
				return fmt.Errorf("zone %s served by %d replicas, want 1", z, servedBy[z])
			}
		}
		return nil
	})
	for _, n := range nodes {
		for host, addr := range want {
			testutil.Eventually(t, 10*time.Second, func() error { return meshAnswers(n.Addr, host, dns.TypeA, true, addr) })
		}
	}
}
