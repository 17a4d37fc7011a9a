package functional

import (
	"context"
	"fmt"
	"net/http"
	"slices"
	"testing"
	"time"

	"github.com/miekg/dns"
	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/shardns/shardns/integration/harness"
	"github.com/shardns/shardns/integration/kubeapi"
	"github.com/shardns/shardns/internal/testutil"
	"github.com/shardns/shardns/sources/kubeclient"
)

var ctx = context.Background()

// Every record kind of the specification, from objects made through the
// API, over UDP and TCP.
func TestKubernetesRecordKinds(t *testing.T) {
	cp := kubeapi.Shared(t)
	c := cp.Client
	harness.CreateNamespace(t, c, "kinds", nil)
	n := harness.StartKubeNode(t, cp, "", true)

	web := harness.CreateService(t, c, harness.ClusterIPService("kinds", "web",
		corev1.ServicePort{Name: "http", Port: 80, Protocol: corev1.ProtocolTCP},
		corev1.ServicePort{Name: "dns", Port: 53, Protocol: corev1.ProtocolUDP}))
	dual := harness.ClusterIPService("kinds", "dual")
	policy := corev1.IPFamilyPolicyRequireDualStack
	dual.Spec.IPFamilyPolicy = &policy
	dual.Spec.IPFamilies = []corev1.IPFamily{corev1.IPv4Protocol, corev1.IPv6Protocol}
	dual = harness.CreateService(t, c, dual)
	v6 := harness.ClusterIPService("kinds", "v6only")
	single := corev1.IPFamilyPolicySingleStack
	v6.Spec.IPFamilyPolicy = &single
	v6.Spec.IPFamilies = []corev1.IPFamily{corev1.IPv6Protocol}
	v6 = harness.CreateService(t, c, v6)
	harness.CreateService(t, c, harness.HeadlessService("kinds", "db"))
	harness.CreateEndpointSlice(t, c, "kinds", "db", "db-v4", discoveryv1.AddressTypeIPv4,
		harness.Endpoint{IP: "10.244.1.1", Hostname: "db-0"}, harness.Endpoint{IP: "10.244.1.2"}, harness.Endpoint{IP: "10.244.1.3", Hostname: "db-2", NotReady: true})
	harness.CreateEndpointSlice(t, c, "kinds", "db", "db-v6", discoveryv1.AddressTypeIPv6, harness.Endpoint{IP: "fd00:244::1", Hostname: "db-0"})
	harness.CreateService(t, c, &corev1.Service{ObjectMeta: metav1.ObjectMeta{Namespace: "kinds", Name: "ext"},
		Spec: corev1.ServiceSpec{Type: corev1.ServiceTypeExternalName, ExternalName: "example.com"}})
	harness.CreateService(t, c, &corev1.Service{ObjectMeta: metav1.ObjectMeta{Namespace: "kinds", Name: "alias"},
		Spec: corev1.ServiceSpec{Type: corev1.ServiceTypeExternalName, ExternalName: "web.kinds.svc.cluster.local"}})

	webIP := web.Spec.ClusterIP
	n.Eventually(t, "web.kinds.svc.cluster.local", dns.TypeA, dns.RcodeSuccess, webIP)
	n.Eventually(t, "web.kinds.svc.cluster.local", dns.TypeAAAA, dns.RcodeSuccess)
	n.Eventually(t, "_http._tcp.web.kinds.svc.cluster.local", dns.TypeSRV, dns.RcodeSuccess, "0 100 80 web.kinds.svc.cluster.local.")
	n.Eventually(t, "_dns._udp.web.kinds.svc.cluster.local", dns.TypeSRV, dns.RcodeSuccess, "0 100 53 web.kinds.svc.cluster.local.")
	n.Eventually(t, "_dns._tcp.web.kinds.svc.cluster.local", dns.TypeSRV, dns.RcodeNameError)
	n.Eventually(t, "dual.kinds.svc.cluster.local", dns.TypeA, dns.RcodeSuccess, dual.Spec.ClusterIPs[0])
	n.Eventually(t, "dual.kinds.svc.cluster.local", dns.TypeAAAA, dns.RcodeSuccess, dual.Spec.ClusterIPs[1])
	n.Eventually(t, "v6only.kinds.svc.cluster.local", dns.TypeAAAA, dns.RcodeSuccess, v6.Spec.ClusterIP)
	n.Eventually(t, "v6only.kinds.svc.cluster.local", dns.TypeA, dns.RcodeSuccess)
	n.Eventually(t, "db.kinds.svc.cluster.local", dns.TypeA, dns.RcodeSuccess, "10.244.1.1", "10.244.1.2")
	n.Eventually(t, "db.kinds.svc.cluster.local", dns.TypeAAAA, dns.RcodeSuccess, "fd00:244::1")
	n.Eventually(t, "db-0.db.kinds.svc.cluster.local", dns.TypeA, dns.RcodeSuccess, "10.244.1.1")
	n.Eventually(t, "10-244-1-2.db.kinds.svc.cluster.local", dns.TypeA, dns.RcodeSuccess, "10.244.1.2")
	n.Eventually(t, "db-2.db.kinds.svc.cluster.local", dns.TypeA, dns.RcodeNameError)
	n.Eventually(t, "_http._tcp.db.kinds.svc.cluster.local", dns.TypeSRV, dns.RcodeSuccess,
		"0 33 80 db-0.db.kinds.svc.cluster.local.", "0 33 80 10-244-1-2.db.kinds.svc.cluster.local.")
	n.Eventually(t, "ext.kinds.svc.cluster.local", dns.TypeA, dns.RcodeSuccess, "example.com.")
	n.Eventually(t, "alias.kinds.svc.cluster.local", dns.TypeA, dns.RcodeSuccess, "web.kinds.svc.cluster.local.", webIP)
	n.Eventually(t, harness.ReverseName(webIP), dns.TypePTR, dns.RcodeSuccess, "web.kinds.svc.cluster.local.")
	n.Eventually(t, harness.ReverseName(dual.Spec.ClusterIPs[1]), dns.TypePTR, dns.RcodeSuccess, "dual.kinds.svc.cluster.local.")
	n.Eventually(t, harness.ReverseName("10.244.1.1"), dns.TypePTR, dns.RcodeSuccess, "db-0.db.kinds.svc.cluster.local.")
	n.Eventually(t, harness.ReverseName("fd00:244::1"), dns.TypePTR, dns.RcodeSuccess, "db-0.db.kinds.svc.cluster.local.")
	n.Eventually(t, "10-1-2-3.kinds.pod.cluster.local", dns.TypeA, dns.RcodeSuccess, "10.1.2.3")
	n.Eventually(t, "10-1-2-3.nonexistent.pod.cluster.local", dns.TypeA, dns.RcodeNameError)
	n.Eventually(t, "kinds.svc.cluster.local", dns.TypeA, dns.RcodeSuccess)
	n.Eventually(t, "nonexistent.svc.cluster.local", dns.TypeA, dns.RcodeNameError)
	n.Eventually(t, "missing.kinds.svc.cluster.local", dns.TypeA, dns.RcodeNameError)
	n.Eventually(t, "dns-version.cluster.local", dns.TypeTXT, dns.RcodeSuccess, `"1.1.0"`)
}

// Changes made through the API are served within a second.
func TestKubernetesChangesWithinASecond(t *testing.T) {
	cp := kubeapi.Shared(t)
	c := cp.Client
	harness.CreateNamespace(t, c, "changes", nil)
	n := harness.StartKubeNode(t, cp, "", true)
	within := func(name string, qtype uint16, rcode int, want ...string) {
		t.Helper()
		testutil.Eventually(t, time.Second, func() error { return n.Answers(name, qtype, rcode, want...) })
	}

	svc := harness.CreateService(t, c, harness.ClusterIPService("changes", "fresh"))
	within("fresh.changes.svc.cluster.local", dns.TypeA, dns.RcodeSuccess, svc.Spec.ClusterIP)
	if err := c.CoreV1().Services("changes").Delete(ctx, "fresh", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	within("fresh.changes.svc.cluster.local", dns.TypeA, dns.RcodeNameError)
	within(harness.ReverseName(svc.Spec.ClusterIP), dns.TypePTR, dns.RcodeNameError)

	harness.CreateService(t, c, harness.HeadlessService("changes", "pool"))
	slice := harness.CreateEndpointSlice(t, c, "changes", "pool", "pool-1", discoveryv1.AddressTypeIPv4,
		harness.Endpoint{IP: "10.244.9.1", Hostname: "a"}, harness.Endpoint{IP: "10.244.9.2", Hostname: "b"})
	within("pool.changes.svc.cluster.local", dns.TypeA, dns.RcodeSuccess, "10.244.9.1", "10.244.9.2")
	notReady := false
	slice.Endpoints[1].Conditions.Ready = &notReady
	if _, err := c.DiscoveryV1().EndpointSlices("changes").Update(ctx, slice, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	within("pool.changes.svc.cluster.local", dns.TypeA, dns.RcodeSuccess, "10.244.9.1")
	within("b.pool.changes.svc.cluster.local", dns.TypeA, dns.RcodeNameError)
}

// Each option of the kubernetes block, on its own node.
func TestKubernetesOptions(t *testing.T) {
	cp := kubeapi.Shared(t)
	c := cp.Client
	harness.CreateNamespace(t, c, "opt-a", map[string]string{"dns": "on"})
	harness.CreateNamespace(t, c, "opt-b", nil)
	a := harness.CreateService(t, c, harness.ClusterIPService("opt-a", "web"))
	b := harness.CreateService(t, c, harness.ClusterIPService("opt-b", "web"))
	labelled := harness.ClusterIPService("opt-a", "labelled")
	labelled.Labels = map[string]string{"expose": "yes"}
	labelled = harness.CreateService(t, c, labelled)
	empty := harness.CreateService(t, c, harness.ClusterIPService("opt-a", "empty"))
	harness.CreateService(t, c, harness.HeadlessService("opt-a", "hl"))
	harness.CreateEndpointSlice(t, c, "opt-a", "hl", "hl-1", discoveryv1.AddressTypeIPv4, harness.Endpoint{IP: "10.244.7.1", Pod: "hl-pod-x"})
	harness.CreateEndpointSlice(t, c, "opt-a", "web", "web-1", discoveryv1.AddressTypeIPv4, harness.Endpoint{IP: "10.244.7.2"})
	pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "opt-a", Name: "p"},
		Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "c", Image: "none"}}}}
	pod, err := c.CoreV1().Pods("opt-a").Create(ctx, pod, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	pod.Status = corev1.PodStatus{Phase: corev1.PodRunning, PodIP: "10.244.7.9", PodIPs: []corev1.PodIP{{IP: "10.244.7.9"}}}
	if _, err := c.CoreV1().Pods("opt-a").UpdateStatus(ctx, pod, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}

	t.Run("namespaces", func(t *testing.T) {
		n := harness.StartKubeNode(t, cp, "namespaces: [opt-a]", true)
		n.Eventually(t, "web.opt-a.svc.cluster.local", dns.TypeA, dns.RcodeSuccess, a.Spec.ClusterIP)
		n.Eventually(t, "web.opt-b.svc.cluster.local", dns.TypeA, dns.RcodeNameError)
		n.Eventually(t, harness.ReverseName(b.Spec.ClusterIP), dns.TypePTR, dns.RcodeNameError)
	})
	t.Run("namespaceSelector", func(t *testing.T) {
		n := harness.StartKubeNode(t, cp, `namespaceSelector: "dns=on"`, true)
		n.Eventually(t, "web.opt-a.svc.cluster.local", dns.TypeA, dns.RcodeSuccess, a.Spec.ClusterIP)
		n.Eventually(t, "web.opt-b.svc.cluster.local", dns.TypeA, dns.RcodeNameError)
		n.Eventually(t, harness.ReverseName(b.Spec.ClusterIP), dns.TypePTR, dns.RcodeNameError)
	})
	t.Run("labelSelector", func(t *testing.T) {
		n := harness.StartKubeNode(t, cp, `labelSelector: "expose=yes"`, true)
		n.Eventually(t, "labelled.opt-a.svc.cluster.local", dns.TypeA, dns.RcodeSuccess, labelled.Spec.ClusterIP)
		n.Eventually(t, "web.opt-a.svc.cluster.local", dns.TypeA, dns.RcodeNameError)
	})
	t.Run("pods verified", func(t *testing.T) {
		n := harness.StartKubeNode(t, cp, "pods: verified", true)
		n.Eventually(t, "10-244-7-9.opt-a.pod.cluster.local", dns.TypeA, dns.RcodeSuccess, "10.244.7.9")
		n.Eventually(t, "10-244-7-8.opt-a.pod.cluster.local", dns.TypeA, dns.RcodeNameError)
		n.Eventually(t, "10-244-7-9.opt-b.pod.cluster.local", dns.TypeA, dns.RcodeNameError)
	})
	t.Run("pods disabled", func(t *testing.T) {
		n := harness.StartKubeNode(t, cp, "pods: disabled", true)
		n.Eventually(t, "10-244-7-9.opt-a.pod.cluster.local", dns.TypeA, dns.RcodeNameError)
	})
	t.Run("endpointPodNames", func(t *testing.T) {
		n := harness.StartKubeNode(t, cp, "endpointPodNames: true", true)
		n.Eventually(t, "hl-pod-x.hl.opt-a.svc.cluster.local", dns.TypeA, dns.RcodeSuccess, "10.244.7.1")
		n.Eventually(t, harness.ReverseName("10.244.7.1"), dns.TypePTR, dns.RcodeSuccess, "hl-pod-x.hl.opt-a.svc.cluster.local.")
	})
	t.Run("ttl", func(t *testing.T) {
		n := harness.StartKubeNode(t, cp, "ttl: 42", true)
		testutil.Eventually(t, 10*time.Second, func() error {
			r, err := testutil.Exchange(n.Addr, "udp", "web.opt-a.svc.cluster.local.", dns.TypeA)
			if err != nil {
				return err
			}
			if len(r.Answer) != 1 || r.Answer[0].Header().Ttl != 42 {
				return fmt.Errorf("answer %v, want TTL 42", r.Answer)
			}
			return nil
		})
	})
	t.Run("noEndpoints", func(t *testing.T) {
		n := harness.StartKubeNode(t, cp, "noEndpoints: true", true)
		n.Eventually(t, "web.opt-a.svc.cluster.local", dns.TypeA, dns.RcodeSuccess, a.Spec.ClusterIP)
		n.Eventually(t, "hl.opt-a.svc.cluster.local", dns.TypeA, dns.RcodeNameError)
		n.Eventually(t, "10-244-7-2.web.opt-a.svc.cluster.local", dns.TypeA, dns.RcodeNameError)
	})
	t.Run("ignoreEmptyService", func(t *testing.T) {
		n := harness.StartKubeNode(t, cp, "ignoreEmptyService: true", true)
		n.Eventually(t, "web.opt-a.svc.cluster.local", dns.TypeA, dns.RcodeSuccess, a.Spec.ClusterIP)
		n.Eventually(t, "empty.opt-a.svc.cluster.local", dns.TypeA, dns.RcodeNameError)
		_ = empty
	})
	t.Run("reverseZones", func(t *testing.T) {
		n := harness.StartKubeNode(t, cp, "reverseZones: [96.10.in-addr.arpa]", true)
		n.Eventually(t, harness.ReverseName(a.Spec.ClusterIP), dns.TypePTR, dns.RcodeSuccess, "web.opt-a.svc.cluster.local.")
		// Outside the reverse zones: not ours to answer.
		n.Eventually(t, harness.ReverseName("10.244.7.2"), dns.TypePTR, dns.RcodeRefused)
	})
	t.Run("zones", func(t *testing.T) {
		n := harness.StartKubeNode(t, cp, "zones: [cluster.local, corp.example]", true)
		n.Eventually(t, "web.opt-a.svc.corp.example", dns.TypeA, dns.RcodeSuccess, a.Spec.ClusterIP)
		n.Eventually(t, "web.opt-a.svc.cluster.local", dns.TypeA, dns.RcodeSuccess, a.Spec.ClusterIP)
	})
}

// Until the first sync, missing names are SERVFAIL, never a false
// NXDOMAIN; after the startup timeout what is known is served; when the
// API comes back, shardns catches up and turns ready.
func TestKubernetesAPIDownAtStart(t *testing.T) {
	cp := kubeapi.Start(t)
	harness.CreateNamespace(t, cp.Client, "late", nil)
	svc := harness.CreateService(t, cp.Client, harness.ClusterIPService("late", "web"))
	cp.StopAPIServer(t)

	n := harness.StartKubeNode(t, cp, "startupTimeout: 3s", false)
	if err := n.Answers("web.late.svc.cluster.local", dns.TypeA, dns.RcodeServerFailure); err != nil {
		t.Fatal(err)
	}
	if code := harness.HTTPStatus(t, "http://"+n.HTTPAddr()+"/ready"); code != http.StatusServiceUnavailable {
		t.Fatalf("/ready = %d before the sync, want 503", code)
	}
	n.Eventually(t, "web.late.svc.cluster.local", dns.TypeA, dns.RcodeNameError)
	if code := harness.HTTPStatus(t, "http://"+n.HTTPAddr()+"/ready"); code != http.StatusServiceUnavailable {
		t.Fatalf("/ready = %d after the startup timeout but before the sync, want 503", code)
	}
	cp.StartAPIServer(t)
	n.Eventually(t, "web.late.svc.cluster.local", dns.TypeA, dns.RcodeSuccess, svc.Spec.ClusterIP)
	testutil.Eventually(t, 30*time.Second, func() error {
		if code := harness.HTTPStatus(t, "http://"+n.HTTPAddr()+"/ready"); code != http.StatusOK {
			return fmt.Errorf("/ready = %d", code)
		}
		return nil
	})
}

// An apiserver restart mid-test: answers continue from the last known
// state, and changes made meanwhile converge.
func TestKubernetesAPIRestart(t *testing.T) {
	cp := kubeapi.Start(t)
	c := cp.Client
	harness.CreateNamespace(t, c, "rs", nil)
	keep := harness.CreateService(t, c, harness.ClusterIPService("rs", "keep"))
	gone := harness.CreateService(t, c, harness.ClusterIPService("rs", "gone"))
	n := harness.StartKubeNode(t, cp, "", true)
	n.Eventually(t, "keep.rs.svc.cluster.local", dns.TypeA, dns.RcodeSuccess, keep.Spec.ClusterIP)
	n.Eventually(t, "gone.rs.svc.cluster.local", dns.TypeA, dns.RcodeSuccess, gone.Spec.ClusterIP)

	cp.StopAPIServer(t)
	// The API is down: the last known state keeps serving.
	if err := n.Answers("keep.rs.svc.cluster.local", dns.TypeA, dns.RcodeSuccess, keep.Spec.ClusterIP); err != nil {
		t.Fatal(err)
	}
	cp.StartAPIServer(t)
	if err := c.CoreV1().Services("rs").Delete(ctx, "gone", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	added := harness.CreateService(t, c, harness.ClusterIPService("rs", "added"))
	n.Eventually(t, "added.rs.svc.cluster.local", dns.TypeA, dns.RcodeSuccess, added.Spec.ClusterIP)
	n.Eventually(t, "gone.rs.svc.cluster.local", dns.TypeA, dns.RcodeNameError)
	if err := n.Answers("keep.rs.svc.cluster.local", dns.TypeA, dns.RcodeSuccess, keep.Spec.ClusterIP); err != nil {
		t.Fatal(err)
	}
}

// cluster.joinService: the gossip seeds are the addresses of every pod
// behind the headless Service, ready or not, read through the API.
func TestKubernetesJoinServiceSeeds(t *testing.T) {
	cp := kubeapi.Start(t)
	harness.CreateNamespace(t, cp.Client, "dns", nil)
	harness.CreateEndpointSlice(t, cp.Client, "dns", "shardns-peers", "peers-a", discoveryv1.AddressTypeIPv4,
		harness.Endpoint{IP: "10.1.0.1"}, harness.Endpoint{IP: "10.1.0.2", NotReady: true})
	harness.CreateEndpointSlice(t, cp.Client, "dns", "shardns-peers", "peers-b", discoveryv1.AddressTypeIPv6, harness.Endpoint{IP: "fd00::3"})
	harness.CreateEndpointSlice(t, cp.Client, "dns", "other", "other-a", discoveryv1.AddressTypeIPv4, harness.Endpoint{IP: "10.9.0.9"})
	client, err := kubeclient.NewClientForConfig(cp.RESTConfig())
	if err != nil {
		t.Fatal(err)
	}
	seeds, err := kubeclient.PeerSeeds(client, "dns/shardns-peers", 7946)(ctx)
	if err != nil {
		t.Fatal(err)
	}
	slices.Sort(seeds)
	want := []string{"10.1.0.1:7946", "10.1.0.2:7946", "[fd00::3]:7946"}
	if !slices.Equal(seeds, want) {
		t.Fatalf("seeds %v, want %v", seeds, want)
	}
	if _, err := kubeclient.PeerSeeds(client, "nope/shardns-peers", 7946)(ctx); err != nil {
		t.Fatalf("a namespace with no slices: %v, want no seeds and no error", err)
	}
}
