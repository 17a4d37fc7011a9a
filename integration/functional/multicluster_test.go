package functional

import (
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/miekg/dns"
	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/dynamic"

	"github.com/shardns/shardns/integration/harness"
	"github.com/shardns/shardns/integration/kubeapi"
	"github.com/shardns/shardns/internal/testutil"
)

// The Multi-Cluster Services API against a real apiserver: no MCS
// implementation is needed, only the ServiceImport CRD (an open schema:
// shardns reads the fields it needs) and the EndpointSlices an
// implementation would import, which the tests write themselves.

var serviceImports = schema.GroupVersionResource{Group: "multicluster.x-k8s.io", Version: "v1alpha1", Resource: "serviceimports"}

// multiclusterCorefile is CoreDNS's multicluster README example with the
// reverse zones, on loopback ports.
const multiclusterCorefile = `.:{{dns}} {
    bind 127.0.0.1
    kubernetes cluster.local clusterset.local in-addr.arpa ip6.arpa {
        kubeconfig {{kubeconfig}} kubeapi
        pods insecure
        multicluster clusterset.local
    }
}
`

// installServiceImportCRD installs the ServiceImport CRD unless cp has
// it and returns a dynamic client.
func installServiceImportCRD(t *testing.T, cp *kubeapi.ControlPlane) dynamic.Interface {
	t.Helper()
	return installCRD(t, cp, openCRD(serviceImports.Group, "ServiceImport", serviceImports.Resource, []string{"svcim"},
		serviceImports.Version), serviceImports)
}

// mkServiceImport creates a ServiceImport of type typ with spec.ips ips
// and spec.ports ports.
func mkServiceImport(t *testing.T, dyn dynamic.Interface, ns, name, typ string, ips []string, ports ...map[string]any) {
	t.Helper()
	spec := map[string]any{"type": typ}
	if len(ips) > 0 {
		spec["ips"] = list(ips...)
	}
	if len(ports) > 0 {
		var ps []any
		for _, p := range ports {
			ps = append(ps, p)
		}
		spec["ports"] = ps
	}
	u := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": serviceImports.GroupVersion().String(), "kind": "ServiceImport",
		"metadata": map[string]any{"namespace": ns, "name": name}, "spec": spec,
	}}
	if _, err := dyn.Resource(serviceImports).Namespace(ns).Create(ctx, u, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
}

func importPort(name, protocol string, port int64) map[string]any {
	return map[string]any{"name": name, "protocol": protocol, "port": port}
}

// mkImportedSlice creates an EndpointSlice imported for service svc from
// cluster, labelled as MCS implementations label them.
func mkImportedSlice(t *testing.T, cp *kubeapi.ControlPlane, ns, svc, cluster, name string, family discoveryv1.AddressType, eps ...harness.Endpoint) {
	t.Helper()
	harness.CreateEndpointSliceLabelled(t, cp.Client, ns, name, map[string]string{
		"multicluster.kubernetes.io/service-name":   svc,
		"multicluster.kubernetes.io/source-cluster": cluster,
	}, family, eps...)
}

// mkMulticlusterServices writes, in namespace ns, what an MCS
// implementation imports: a ClusterSetIP service (web) on two ports, a
// headless one (db) with endpoints in clusters east and west, one without
// ports (bare), and the cluster's own Service web beside them.
func mkMulticlusterServices(t *testing.T, cp *kubeapi.ControlPlane, dyn dynamic.Interface, ns string) {
	t.Helper()
	harness.CreateNamespace(t, cp.Client, ns, nil)
	harness.CreateService(t, cp.Client, harness.ClusterIPService(ns, "web", corev1.ServicePort{Name: "http", Port: 80, Protocol: corev1.ProtocolTCP}))
	mkServiceImport(t, dyn, ns, "web", "ClusterSetIP", []string{"10.42.0.10", "fd00:42::10"},
		importPort("http", "TCP", 80), importPort("dns", "UDP", 53))
	mkServiceImport(t, dyn, ns, "db", "Headless", nil, importPort("http", "TCP", 80))
	mkServiceImport(t, dyn, ns, "bare", "ClusterSetIP", []string{"10.42.0.11"})
	mkImportedSlice(t, cp, ns, "db", "east", "db-east", discoveryv1.AddressTypeIPv4,
		harness.Endpoint{IP: "172.20.0.1", Hostname: "db-0"}, harness.Endpoint{IP: "172.20.0.2"}, harness.Endpoint{IP: "172.20.0.3", Hostname: "db-2", NotReady: true})
	mkImportedSlice(t, cp, ns, "db", "west", "db-west", discoveryv1.AddressTypeIPv6, harness.Endpoint{IP: "fd00:20::1", Hostname: "db-0"})
}

// clusterset.local names get, from `shardns serve --corefile`, the
// responses CoreDNS 1.15 gives from the same Corefile: rcode, flags and
// every section, TTLs included (SOA serials aside: each server counts
// its own).
func TestMulticlusterBesideCoreDNS(t *testing.T) {
	cp := kubeapi.Shared(t)
	dyn := installServiceImportCRD(t, cp)
	mkMulticlusterServices(t, cp, dyn, "mcs")
	vars := map[string]string{"kubeconfig": cp.Kubeconfig}
	shardns := serveCorefileText(t, harness.RenderCorefile(t, multiclusterCorefile, vars).Text)
	coreRun := harness.RenderCorefile(t, multiclusterCorefile, vars)
	coredns := harness.StartCoreDNS(t, harness.CoreDNSOptions{Corefile: coreRun.Text, Addr: coreRun.Addrs["dns"], Probe: "web.mcs.svc.clusterset.local."})

	// What a user sees first, then every other question asked of both
	// and compared whole.
	const db = "db.mcs.svc.clusterset.local."
	harness.AskBoth(t, shardns, coredns, []harness.Question{
		{Name: "web.mcs.svc.clusterset.local.", Qtype: dns.TypeA, Rcode: dns.RcodeSuccess, Answer: []string{"web.mcs.svc.clusterset.local.\t5\tIN\tA\t10.42.0.10"}},
		{Name: "web.mcs.svc.clusterset.local.", Qtype: dns.TypeAAAA, Rcode: dns.RcodeSuccess, Answer: []string{"web.mcs.svc.clusterset.local.\t5\tIN\tAAAA\tfd00:42::10"}},
		{Name: "_dns._udp.web.mcs.svc.clusterset.local.", Qtype: dns.TypeSRV, Rcode: dns.RcodeSuccess, Answer: []string{
			"_dns._udp.web.mcs.svc.clusterset.local.\t5\tIN\tSRV\t0 50 53 web.mcs.svc.clusterset.local."}},
		{Name: db, Qtype: dns.TypeA, Rcode: dns.RcodeSuccess, Answer: []string{db + "\t5\tIN\tA\t172.20.0.1", db + "\t5\tIN\tA\t172.20.0.2"}},
		{Name: db, Qtype: dns.TypeAAAA, Rcode: dns.RcodeSuccess, Answer: []string{db + "\t5\tIN\tAAAA\tfd00:20::1"}},
		{Name: "_http._tcp." + db, Qtype: dns.TypeSRV, Rcode: dns.RcodeSuccess, Answer: []string{
			"_http._tcp." + db + "\t5\tIN\tSRV\t0 33 80 db-0.east." + db,
			"_http._tcp." + db + "\t5\tIN\tSRV\t0 33 80 172-20-0-2.east." + db,
			"_http._tcp." + db + "\t5\tIN\tSRV\t0 33 80 db-0.west." + db}},
		{Name: "db-0.east." + db, Qtype: dns.TypeA, Rcode: dns.RcodeSuccess, Answer: []string{"db-0.east." + db + "\t5\tIN\tA\t172.20.0.1"}},
		{Name: "db-0.west." + db, Qtype: dns.TypeAAAA, Rcode: dns.RcodeSuccess, Answer: []string{"db-0.west." + db + "\t5\tIN\tAAAA\tfd00:20::1"}},
		{Name: "none.mcs.svc.clusterset.local.", Qtype: dns.TypeA, Rcode: dns.RcodeNameError, Answer: nil},
	})
	var qs []externalQuestion
	for _, n := range []string{"web", "db", "bare", "none", "db-0.east.db", "172-20-0-2.east.db", "db-0.west.db",
		"db-2.east.db", "db-0.north.db", "db-0.db", "x.east.web", "_http._tcp.web", "_dns._udp.web", "_ftp._tcp.web",
		"_http._tcp.db", "_http.tcp.db", "a.b.c.db"} {
		for _, qt := range []uint16{dns.TypeA, dns.TypeAAAA, dns.TypeSRV, dns.TypeTXT} {
			qs = append(qs, externalQuestion{n + ".mcs.svc.clusterset.local.", qt})
		}
	}
	for _, n := range []string{"mcs.svc.clusterset.local.", "nons.svc.clusterset.local.", "web.nons.svc.clusterset.local.",
		"clusterset.local.", "svc.clusterset.local.", "x.clusterset.local.", "10-1-2-3.mcs.pod.clusterset.local.",
		"web.mcs.svc.cluster.local.", "db.mcs.svc.cluster.local."} {
		qs = append(qs, externalQuestion{n, dns.TypeA}, externalQuestion{n, dns.TypeAAAA})
	}
	// SOA below the apex is one of the answers where shardns differs from
	// CoreDNS on purpose (docs/answers.md), in every cluster domain; and
	// ns.dns.<zone> (the apex NS's additional section) is left out: here
	// CoreDNS takes the API server's endpoint on its own address for its
	// Service, in cluster.local as in clusterset.local.
	qs = append(qs, externalQuestion{"clusterset.local.", dns.TypeSOA}, externalQuestion{"dns-version.clusterset.local.", dns.TypeTXT})
	for _, q := range qs {
		sameResponses(t, shardns, coredns, q)
	}
}

// A ServiceImport whose spec.ips holds something that is not an address
// is served without it, and every other import still is.
func TestMulticlusterMalformedImport(t *testing.T) {
	cp := kubeapi.Shared(t)
	dyn := installServiceImportCRD(t, cp)
	harness.CreateNamespace(t, cp.Client, "mcsbad", nil)
	mkServiceImport(t, dyn, "mcsbad", "odd", "ClusterSetIP", []string{"10.42.1.300", "10.42.1.1"}, importPort("http", "TCP", 80))
	mkServiceImport(t, dyn, "mcsbad", "good", "ClusterSetIP", []string{"10.42.1.2"}, importPort("http", "TCP", 80))
	shardns := serveCorefileText(t, harness.RenderCorefile(t, multiclusterCorefile, map[string]string{"kubeconfig": cp.Kubeconfig}).Text)
	harness.AnswersAre(t, shardns,
		harness.Question{Name: "odd.mcsbad.svc.clusterset.local.", Qtype: dns.TypeA, Rcode: dns.RcodeSuccess, Answer: []string{"odd.mcsbad.svc.clusterset.local.\t5\tIN\tA\t10.42.1.1"}},
		harness.Question{Name: "good.mcsbad.svc.clusterset.local.", Qtype: dns.TypeA, Rcode: dns.RcodeSuccess, Answer: []string{"good.mcsbad.svc.clusterset.local.\t5\tIN\tA\t10.42.1.2"}})
}

// A cluster without the ServiceImport CRD: kubernetes.multicluster does
// not keep shardns from turning ready, cluster names are served, and
// clusterset.local names do not exist.
func TestMulticlusterWithoutServiceImportCRD(t *testing.T) {
	cp := kubeapi.Start(t)
	harness.CreateNamespace(t, cp.Client, "plain", nil)
	svc := harness.CreateService(t, cp.Client, harness.ClusterIPService("plain", "web"))
	n := harness.StartNodeYAML(t, fmt.Sprintf(`
dns: {listen: ["127.0.0.1:0"]}
http: {listen: "127.0.0.1:0"}
kubernetes: {enabled: true, kubeconfig: %q, multicluster: [clusterset.local]}
cluster: {replicationFactor: 0}
forward: {upstreams: []}
`, cp.Kubeconfig), true)
	n.Eventually(t, "web.plain.svc.cluster.local", dns.TypeA, dns.RcodeSuccess, svc.Spec.ClusterIP)
	n.Eventually(t, "web.plain.svc.clusterset.local", dns.TypeA, dns.RcodeNameError)
}

// With an apiserver that shards watches, three replicas (replication
// factor 1) each receive the ServiceImports and imported EndpointSlices
// of the namespaces they own only, as their Services: namespaces created
// once the ring has settled reach their owner's watches, and of the
// others at most the few whose hash falls inside its ranges. Every
// replica answers every clusterset.local name.
func TestShardedMulticlusterWatches(t *testing.T) {
	cp := kubeapi.Shared(t)
	dyn := installServiceImportCRD(t, cp)
	const mcs = "multicluster: [clusterset.local]"
	a := harness.StartReplica(t, cp, harness.ReplicaOptions{Name: "m0", RF: 1, Cluster: harness.FastGossip, Kube: mcs})
	b := harness.StartReplica(t, cp, harness.ReplicaOptions{Name: "m1", Seeds: []string{a.Gossip}, RF: 1, Cluster: harness.FastGossip, Kube: mcs})
	d := harness.StartReplica(t, cp, harness.ReplicaOptions{Name: "m2", Seeds: []string{a.Gossip}, RF: 1, Cluster: harness.FastGossip, Kube: mcs})
	rs := []*harness.Replica{a, b, d}
	harness.Settled(t, rs, 3)
	imports := func(r *harness.Replica) (float64, float64) {
		m := harness.MustMetrics(t, r.HTTP)
		if m.Sum("shardns_kubernetes_sharded_watch") != 1 {
			t.Fatalf("%s does not shard its watches", r.HTTP)
		}
		return m.SumWith("shardns_kubernetes_events_total", `kind="ServiceImport"`),
			m.SumWith("shardns_kubernetes_events_total", `kind="MultiClusterSlice"`)
	}
	before := map[*harness.Replica][2]float64{}
	for _, r := range rs {
		i, s := imports(r)
		before[r] = [2]float64{i, s}
	}

	const n = 18
	for i := range n {
		ns := fmt.Sprintf("mcsshard%d", i)
		harness.CreateNamespace(t, cp.Client, ns, nil)
		mkServiceImport(t, dyn, ns, "web", "ClusterSetIP", []string{fmt.Sprintf("10.43.%d.10", i)}, importPort("http", "TCP", 80))
		mkImportedSlice(t, cp, ns, "web", "east", "web-east", discoveryv1.AddressTypeIPv4, harness.Endpoint{IP: fmt.Sprintf("172.21.%d.1", i)})
	}
	testutil.Eventually(t, 30*time.Second, func() error {
		for _, r := range rs {
			for i := range n {
				if err := harness.AnswerIs(r.Addr, fmt.Sprintf("web.mcsshard%d.svc.clusterset.local.", i), fmt.Sprintf("10.43.%d.10", i)); err != nil {
					return err
				}
			}
		}
		return nil
	})
	owns := harness.NamespacesOwned([]string{"m0", "m1", "m2"}, "mcsshard", n)
	// The answers above come from the ServiceImports; an imported slice
	// may be counted a moment after them, so the counts are awaited.
	var shares []string
	testutil.Eventually(t, 10*time.Second, func() error {
		shares = shares[:0]
		var wrong []string
		for i, r := range rs {
			owned := owns[i]
			imps, slices := imports(r)
			imps, slices = imps-before[r][0], slices-before[r][1]
			shares = append(shares, fmt.Sprintf("m%d owns %d: %.0f/%.0f", i, owned, imps, slices))
			for _, got := range []float64{imps, slices} {
				if got < float64(owned) || got > float64(owned)+n/4 {
					wrong = append(wrong, fmt.Sprintf("m%d received %.0f ServiceImports and %.0f imported slices of the %d new namespaces, owning %d", i, imps, slices, n, owned))
				}
			}
		}
		if len(wrong) > 0 {
			return errors.New(strings.Join(wrong, "; "))
		}
		return nil
	})
	t.Logf("ServiceImports/imported slices of %d new namespaces received by each of 3 replicas: %s", n, strings.Join(shares, ", "))
}
