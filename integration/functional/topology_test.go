package functional

import (
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/miekg/dns"
	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"

	"github.com/shardns/shardns/integration/harness"
	"github.com/shardns/shardns/integration/kubeapi"
	"github.com/shardns/shardns/internal/testutil"
)

// zonedEp is an endpoint in zone, hinted for forZones ("": no hints).
type zonedEp struct {
	ip, zone string
	forZones []string
}

// mkZonedSlice creates an IPv4 EndpointSlice of svc whose endpoints
// carry zones and hints, as the EndpointSlice controller writes them.
func mkZonedSlice(t *testing.T, c kubernetes.Interface, ns, svc, name string, eps ...zonedEp) {
	t.Helper()
	portName, port, proto, ready := "http", int32(80), corev1.ProtocolTCP, true
	s := &discoveryv1.EndpointSlice{
		ObjectMeta:  metav1.ObjectMeta{Namespace: ns, Name: name, Labels: map[string]string{discoveryv1.LabelServiceName: svc}},
		AddressType: discoveryv1.AddressTypeIPv4,
		Ports:       []discoveryv1.EndpointPort{{Name: &portName, Port: &port, Protocol: &proto}},
	}
	for _, e := range eps {
		d := discoveryv1.Endpoint{Addresses: []string{e.ip}, Conditions: discoveryv1.EndpointConditions{Ready: &ready}, Zone: &e.zone}
		if len(e.forZones) > 0 {
			d.Hints = &discoveryv1.EndpointHints{}
			for _, z := range e.forZones {
				d.Hints.ForZones = append(d.Hints.ForZones, discoveryv1.ForZone{Name: z})
			}
		}
		s.Endpoints = append(s.Endpoints, d)
	}
	if _, err := c.DiscoveryV1().EndpointSlices(ns).Create(ctx, s, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
}

func mkZoneNode(t *testing.T, c kubernetes.Interface, name, zone string) {
	t.Helper()
	node := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: name, Labels: map[string]string{"topology.kubernetes.io/zone": zone}}}
	if _, err := c.CoreV1().Nodes().Create(ctx, node, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.CoreV1().Nodes().Delete(ctx, name, metav1.DeleteOptions{}) })
}

// answersInRuns checks that addr answers name's A question with the
// addresses of runs, run after run, each run in any order: loadbalance
// (on by default) shuffles the addresses preferred for the asker's zone
// and the others apart. It asks several times, as each answer is one
// shuffle of them.
func answersInRuns(addr, name string, runs ...[]string) error {
	for range 20 {
		m, err := testutil.Exchange(addr, "udp", name, dns.TypeA)
		if err != nil {
			return err
		}
		var got []string
		for _, rr := range m.Answer {
			if a, ok := rr.(*dns.A); ok {
				got = append(got, a.A.String())
			}
		}
		if m.Rcode != dns.RcodeSuccess || !inRuns(got, runs) {
			return fmt.Errorf("%s from %s: %s %v, want the runs %v in that order", name, addr, dns.RcodeToString[m.Rcode], got, runs)
		}
	}
	return nil
}

// inRuns reports whether got is the addresses of runs, run after run,
// each in any order.
func inRuns(got []string, runs [][]string) bool {
	for _, run := range runs {
		if len(got) < len(run) || !slices.Equal(slices.Sorted(slices.Values(got[:len(run)])), slices.Sorted(slices.Values(run))) {
			return false
		}
		got = got[len(run):]
	}
	return len(got) == 0
}

// Topology-aware answers on the real apiserver: a replica on a node of
// zone-a (kubernetes.topology: only) and a node-local process on a node
// of zone-b (prefer) answer a headless Service's endpoints hinted for
// their zone alone / first, a PreferClose Service's by the endpoints'
// zones, and every endpoint when their zone has none or the slices name
// zones no node is in; ClusterIP answers are unchanged.
func TestTopologyAwareHeadless(t *testing.T) {
	cp := kubeapi.Shared(t)
	c := cp.Client
	mkZoneNode(t, c, "topo-node-a", "zone-a")
	mkZoneNode(t, c, "topo-node-b", "zone-b")
	harness.CreateNamespace(t, c, "topo", nil)
	harness.CreateService(t, c, harness.HeadlessService("topo", "db"))
	mkZonedSlice(t, c, "topo", "db", "db-a", zonedEp{"10.50.0.1", "zone-a", []string{"zone-a"}},
		zonedEp{"10.50.0.2", "zone-a", []string{"zone-a"}})
	mkZonedSlice(t, c, "topo", "db", "db-b", zonedEp{"10.50.1.1", "zone-b", []string{"zone-b"}})
	near := harness.HeadlessService("topo", "near")
	near.Spec.TrafficDistribution = harness.Ptr(corev1.ServiceTrafficDistributionPreferClose)
	harness.CreateService(t, c, near)
	mkZonedSlice(t, c, "topo", "near", "near-1", zonedEp{"10.51.0.1", "zone-a", nil}, zonedEp{"10.51.1.1", "zone-b", nil})
	harness.CreateService(t, c, harness.HeadlessService("topo", "only-a"))
	mkZonedSlice(t, c, "topo", "only-a", "only-a-1", zonedEp{"10.52.0.1", "zone-a", []string{"zone-a"}},
		zonedEp{"10.52.0.2", "zone-a", []string{"zone-a"}})
	harness.CreateService(t, c, harness.HeadlessService("topo", "mars"))
	mkZonedSlice(t, c, "topo", "mars", "mars-1", zonedEp{"10.53.0.1", "mars-1", []string{"mars-1"}},
		zonedEp{"10.53.0.2", "mars-2", []string{"mars-2"}})
	vip := harness.CreateService(t, c, harness.ClusterIPService("topo", "vip"))
	mkZonedSlice(t, c, "topo", "vip", "vip-1", zonedEp{"10.54.1.1", "zone-b", []string{"zone-b"}})

	r := harness.StartReplica(t, cp, harness.ReplicaOptions{Name: "topo-r0", RF: 1, Cluster: "", Kube: "topology: only, nodeName: topo-node-a"})
	harness.Settled(t, []*harness.Replica{r}, 1)
	nl := startTopologyNodeLocal(t, cp, "topo-nl", harness.RemoteOf(t, r))
	harness.Settled(t, []*harness.Replica{r, nl}, 1)

	type runs = [][]string
	cases := []struct {
		name             string
		replica, nodeLoc runs
	}{
		{"db", runs{{"10.50.0.1", "10.50.0.2"}}, runs{{"10.50.1.1"}, {"10.50.0.1", "10.50.0.2"}}},
		{"near", runs{{"10.51.0.1"}}, runs{{"10.51.1.1"}, {"10.51.0.1"}}},
		{"only-a", runs{{"10.52.0.1", "10.52.0.2"}}, runs{{"10.52.0.1", "10.52.0.2"}}}, // zone-b has none: all
		{"mars", runs{{"10.53.0.1", "10.53.0.2"}}, runs{{"10.53.0.1", "10.53.0.2"}}},
		{"vip", runs{{vip.Spec.ClusterIP}}, runs{{vip.Spec.ClusterIP}}},
	}
	for _, tc := range cases {
		name := tc.name + ".topo.svc.cluster.local."
		testutil.Eventually(t, 30*time.Second, func() error {
			if err := answersInRuns(r.Addr, name, tc.replica...); err != nil {
				return err
			}
			return answersInRuns(nl.Addr, name, tc.nodeLoc...)
		})
	}
}

// startTopologyNodeLocal starts a node-local process on topo-node-b
// (kubernetes.topology: prefer), asking the replica at seedRemote.
func startTopologyNodeLocal(t *testing.T, cp *kubeapi.ControlPlane, name, seedRemote string) *harness.Replica {
	t.Helper()
	cfg := fmt.Sprintf(`
mode: nodelocal
dns: {listen: ["127.0.0.1:0"]}
http: {listen: "127.0.0.1:0", lameduck: 0s}
forward: {upstreams: []}
kubernetes: {kubeconfig: %q, topology: prefer, nodeName: topo-node-b}
cluster:
  nodeName: %s
  replicas: [%q]
  remote: "127.0.0.1:%d"
  gossip: fast
`, cp.Kubeconfig, name, seedRemote, harness.FreePort(t))
	p := harness.Start(t, harness.Options{Config: cfg})
	return &harness.Replica{Process: p, HTTP: p.HTTPAddr(t)}
}
