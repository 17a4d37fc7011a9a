package integration

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/miekg/dns"
	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"

	"github.com/shardns/shardns/config"
	"github.com/shardns/shardns/integration/kubeapi"
	"github.com/shardns/shardns/internal/testutil"
	"github.com/shardns/shardns/node"
	"github.com/shardns/shardns/sources/kubeclient"
)

// kubeNode is a shardns node watching a real kube-apiserver.
type kubeNode struct {
	*node.Node
	addr string
}

// startKubeNode starts shardns in-process against cp, with extra keys in
// its kubernetes block, and waits until it is ready unless wait is false.
func startKubeNode(t *testing.T, cp *kubeapi.ControlPlane, kubeKeys string, wait bool) *kubeNode {
	t.Helper()
	if kubeKeys != "" {
		kubeKeys = ", " + kubeKeys
	}
	return startNodeYAML(t, fmt.Sprintf(`
dns: {listen: ["127.0.0.1:0"]}
http: {listen: "127.0.0.1:0"}
kubernetes: {enabled: true, kubeconfig: %q%s}
cluster: {replicationFactor: 0}
forward: {upstreams: []}
`, cp.Kubeconfig, kubeKeys), wait)
}

// startNodeYAML starts shardns in-process with the configuration text,
// and waits until it is ready unless wait is false.
func startNodeYAML(t *testing.T, text string, wait bool) *kubeNode {
	t.Helper()
	path := filepath.Join(t.TempDir(), "shardns.yaml")
	if err := os.WriteFile(path, []byte(text), 0o644); err != nil {
		t.Fatal(err)
	}
	cfg, err := config.Load(path)
	if err != nil {
		t.Fatal(err)
	}
	n, err := node.New(cfg, testLogger(t))
	if err != nil {
		t.Fatal(err)
	}
	if err := n.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { n.Stop(0) })
	if wait {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		if err := n.WaitReady(ctx); err != nil {
			t.Fatalf("node not ready: %v", err)
		}
	}
	return &kubeNode{Node: n, addr: n.DNSAddrs()[0]}
}

// testLogger logs warnings and errors into the test's log.
func testLogger(t *testing.T) *slog.Logger {
	return slog.New(slog.NewTextHandler(testWriter{t}, &slog.HandlerOptions{Level: slog.LevelWarn}))
}

// testWriter sends logs to the test's log, shown when it fails.
type testWriter struct{ t *testing.T }

func (w testWriter) Write(p []byte) (int, error) {
	w.t.Log(strings.TrimSpace(string(p)))
	return len(p), nil
}

// values renders the answer section as sorted rdata strings ("10.96.0.5",
// "0 100 80 web.ns.svc.cluster.local.", ...).
func values(rrs []dns.RR) []string {
	var out []string
	for _, rr := range rrs {
		s := rr.String()
		hdr := rr.Header().String()
		out = append(out, strings.TrimSpace(strings.TrimPrefix(s, hdr)))
	}
	slices.Sort(out)
	return out
}

// answers checks one question over UDP and TCP.
func (n *kubeNode) answers(name string, qtype uint16, rcode int, want ...string) error {
	slices.Sort(want)
	for _, proto := range []string{"udp", "tcp"} {
		r, err := testutil.Exchange(n.addr, proto, dns.Fqdn(name), qtype)
		if err != nil {
			return err
		}
		if r.Rcode != rcode {
			return fmt.Errorf("%s %s over %s: rcode %s, want %s", name, dns.TypeToString[qtype], proto,
				dns.RcodeToString[r.Rcode], dns.RcodeToString[rcode])
		}
		if got := values(r.Answer); !slices.Equal(got, want) && !(len(got) == 0 && len(want) == 0) {
			return fmt.Errorf("%s %s over %s: %q, want %q", name, dns.TypeToString[qtype], proto, got, want)
		}
		negative := rcode == dns.RcodeNameError || (rcode == dns.RcodeSuccess && len(want) == 0)
		if negative && (len(r.Ns) != 1 || r.Ns[0].Header().Rrtype != dns.TypeSOA) {
			return fmt.Errorf("%s %s over %s: negative answer without SOA: %v", name, dns.TypeToString[qtype], proto, r.Ns)
		}
	}
	return nil
}

// eventually waits up to 10 s for an answer.
func (n *kubeNode) eventually(t *testing.T, name string, qtype uint16, rcode int, want ...string) {
	t.Helper()
	testutil.Eventually(t, 10*time.Second, func() error { return n.answers(name, qtype, rcode, want...) })
}

var ctx = context.Background()

func mkNamespace(t *testing.T, c kubernetes.Interface, name string, labels map[string]string) {
	t.Helper()
	_, err := c.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: name, Labels: labels}}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
}

func mkService(t *testing.T, c kubernetes.Interface, svc *corev1.Service) *corev1.Service {
	t.Helper()
	out, err := c.CoreV1().Services(svc.Namespace).Create(ctx, svc, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	return out
}

func clusterIPService(ns, name string, ports ...corev1.ServicePort) *corev1.Service {
	if len(ports) == 0 {
		ports = []corev1.ServicePort{{Name: "http", Port: 80, Protocol: corev1.ProtocolTCP}}
	}
	return &corev1.Service{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name},
		Spec: corev1.ServiceSpec{Ports: ports}}
}

func headlessService(ns, name string) *corev1.Service {
	s := clusterIPService(ns, name)
	s.Spec.ClusterIP = corev1.ClusterIPNone
	return s
}

type ep struct {
	ip, hostname, pod string
	notReady          bool
}

func mkSlice(t *testing.T, c kubernetes.Interface, ns, svc, name string, family discoveryv1.AddressType, eps ...ep) *discoveryv1.EndpointSlice {
	t.Helper()
	return mkSliceLabelled(t, c, ns, name, map[string]string{discoveryv1.LabelServiceName: svc}, family, eps...)
}

// mkSliceLabelled creates an EndpointSlice with labels, port http 80/TCP
// and eps.
func mkSliceLabelled(t *testing.T, c kubernetes.Interface, ns, name string, labels map[string]string, family discoveryv1.AddressType, eps ...ep) *discoveryv1.EndpointSlice {
	t.Helper()
	portName, port, proto := "http", int32(80), corev1.ProtocolTCP
	s := &discoveryv1.EndpointSlice{
		ObjectMeta:  metav1.ObjectMeta{Namespace: ns, Name: name, Labels: labels},
		AddressType: family,
		Ports:       []discoveryv1.EndpointPort{{Name: &portName, Port: &port, Protocol: &proto}},
	}
	for _, e := range eps {
		ready := !e.notReady
		d := discoveryv1.Endpoint{Addresses: []string{e.ip}, Conditions: discoveryv1.EndpointConditions{Ready: &ready}}
		if e.hostname != "" {
			d.Hostname = &e.hostname
		}
		if e.pod != "" {
			d.TargetRef = &corev1.ObjectReference{Kind: "Pod", Name: e.pod, Namespace: ns}
		}
		s.Endpoints = append(s.Endpoints, d)
	}
	out, err := c.DiscoveryV1().EndpointSlices(ns).Create(ctx, s, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	return out
}

func reverse(ip string) string {
	r, err := dns.ReverseAddr(ip)
	if err != nil {
		panic(err)
	}
	return r
}

// Every record kind of the specification, from objects made through the
// API, over UDP and TCP.
func TestKubernetesRecordKinds(t *testing.T) {
	cp := kubeapi.Shared(t)
	c := cp.Client
	mkNamespace(t, c, "kinds", nil)
	n := startKubeNode(t, cp, "", true)

	web := mkService(t, c, clusterIPService("kinds", "web",
		corev1.ServicePort{Name: "http", Port: 80, Protocol: corev1.ProtocolTCP},
		corev1.ServicePort{Name: "dns", Port: 53, Protocol: corev1.ProtocolUDP}))
	dual := clusterIPService("kinds", "dual")
	policy := corev1.IPFamilyPolicyRequireDualStack
	dual.Spec.IPFamilyPolicy = &policy
	dual.Spec.IPFamilies = []corev1.IPFamily{corev1.IPv4Protocol, corev1.IPv6Protocol}
	dual = mkService(t, c, dual)
	v6 := clusterIPService("kinds", "v6only")
	single := corev1.IPFamilyPolicySingleStack
	v6.Spec.IPFamilyPolicy = &single
	v6.Spec.IPFamilies = []corev1.IPFamily{corev1.IPv6Protocol}
	v6 = mkService(t, c, v6)
	mkService(t, c, headlessService("kinds", "db"))
	mkSlice(t, c, "kinds", "db", "db-v4", discoveryv1.AddressTypeIPv4,
		ep{ip: "10.244.1.1", hostname: "db-0"}, ep{ip: "10.244.1.2"}, ep{ip: "10.244.1.3", hostname: "db-2", notReady: true})
	mkSlice(t, c, "kinds", "db", "db-v6", discoveryv1.AddressTypeIPv6, ep{ip: "fd00:244::1", hostname: "db-0"})
	mkService(t, c, &corev1.Service{ObjectMeta: metav1.ObjectMeta{Namespace: "kinds", Name: "ext"},
		Spec: corev1.ServiceSpec{Type: corev1.ServiceTypeExternalName, ExternalName: "example.com"}})
	mkService(t, c, &corev1.Service{ObjectMeta: metav1.ObjectMeta{Namespace: "kinds", Name: "alias"},
		Spec: corev1.ServiceSpec{Type: corev1.ServiceTypeExternalName, ExternalName: "web.kinds.svc.cluster.local"}})

	webIP := web.Spec.ClusterIP
	n.eventually(t, "web.kinds.svc.cluster.local", dns.TypeA, dns.RcodeSuccess, webIP)
	n.eventually(t, "web.kinds.svc.cluster.local", dns.TypeAAAA, dns.RcodeSuccess)
	n.eventually(t, "_http._tcp.web.kinds.svc.cluster.local", dns.TypeSRV, dns.RcodeSuccess, "0 100 80 web.kinds.svc.cluster.local.")
	n.eventually(t, "_dns._udp.web.kinds.svc.cluster.local", dns.TypeSRV, dns.RcodeSuccess, "0 100 53 web.kinds.svc.cluster.local.")
	n.eventually(t, "_dns._tcp.web.kinds.svc.cluster.local", dns.TypeSRV, dns.RcodeNameError)
	n.eventually(t, "dual.kinds.svc.cluster.local", dns.TypeA, dns.RcodeSuccess, dual.Spec.ClusterIPs[0])
	n.eventually(t, "dual.kinds.svc.cluster.local", dns.TypeAAAA, dns.RcodeSuccess, dual.Spec.ClusterIPs[1])
	n.eventually(t, "v6only.kinds.svc.cluster.local", dns.TypeAAAA, dns.RcodeSuccess, v6.Spec.ClusterIP)
	n.eventually(t, "v6only.kinds.svc.cluster.local", dns.TypeA, dns.RcodeSuccess)
	n.eventually(t, "db.kinds.svc.cluster.local", dns.TypeA, dns.RcodeSuccess, "10.244.1.1", "10.244.1.2")
	n.eventually(t, "db.kinds.svc.cluster.local", dns.TypeAAAA, dns.RcodeSuccess, "fd00:244::1")
	n.eventually(t, "db-0.db.kinds.svc.cluster.local", dns.TypeA, dns.RcodeSuccess, "10.244.1.1")
	n.eventually(t, "10-244-1-2.db.kinds.svc.cluster.local", dns.TypeA, dns.RcodeSuccess, "10.244.1.2")
	n.eventually(t, "db-2.db.kinds.svc.cluster.local", dns.TypeA, dns.RcodeNameError)
	n.eventually(t, "_http._tcp.db.kinds.svc.cluster.local", dns.TypeSRV, dns.RcodeSuccess,
		"0 33 80 db-0.db.kinds.svc.cluster.local.", "0 33 80 10-244-1-2.db.kinds.svc.cluster.local.")
	n.eventually(t, "ext.kinds.svc.cluster.local", dns.TypeA, dns.RcodeSuccess, "example.com.")
	n.eventually(t, "alias.kinds.svc.cluster.local", dns.TypeA, dns.RcodeSuccess, "web.kinds.svc.cluster.local.", webIP)
	n.eventually(t, reverse(webIP), dns.TypePTR, dns.RcodeSuccess, "web.kinds.svc.cluster.local.")
	n.eventually(t, reverse(dual.Spec.ClusterIPs[1]), dns.TypePTR, dns.RcodeSuccess, "dual.kinds.svc.cluster.local.")
	n.eventually(t, reverse("10.244.1.1"), dns.TypePTR, dns.RcodeSuccess, "db-0.db.kinds.svc.cluster.local.")
	n.eventually(t, reverse("fd00:244::1"), dns.TypePTR, dns.RcodeSuccess, "db-0.db.kinds.svc.cluster.local.")
	n.eventually(t, "10-1-2-3.kinds.pod.cluster.local", dns.TypeA, dns.RcodeSuccess, "10.1.2.3")
	n.eventually(t, "10-1-2-3.nonexistent.pod.cluster.local", dns.TypeA, dns.RcodeNameError)
	n.eventually(t, "kinds.svc.cluster.local", dns.TypeA, dns.RcodeSuccess)
	n.eventually(t, "nonexistent.svc.cluster.local", dns.TypeA, dns.RcodeNameError)
	n.eventually(t, "missing.kinds.svc.cluster.local", dns.TypeA, dns.RcodeNameError)
	n.eventually(t, "dns-version.cluster.local", dns.TypeTXT, dns.RcodeSuccess, `"1.1.0"`)
}

// Changes made through the API are served within a second.
func TestKubernetesChangesWithinASecond(t *testing.T) {
	cp := kubeapi.Shared(t)
	c := cp.Client
	mkNamespace(t, c, "changes", nil)
	n := startKubeNode(t, cp, "", true)
	within := func(name string, qtype uint16, rcode int, want ...string) {
		t.Helper()
		testutil.Eventually(t, time.Second, func() error { return n.answers(name, qtype, rcode, want...) })
	}

	svc := mkService(t, c, clusterIPService("changes", "fresh"))
	within("fresh.changes.svc.cluster.local", dns.TypeA, dns.RcodeSuccess, svc.Spec.ClusterIP)
	if err := c.CoreV1().Services("changes").Delete(ctx, "fresh", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	within("fresh.changes.svc.cluster.local", dns.TypeA, dns.RcodeNameError)
	within(reverse(svc.Spec.ClusterIP), dns.TypePTR, dns.RcodeNameError)

	mkService(t, c, headlessService("changes", "pool"))
	slice := mkSlice(t, c, "changes", "pool", "pool-1", discoveryv1.AddressTypeIPv4,
		ep{ip: "10.244.9.1", hostname: "a"}, ep{ip: "10.244.9.2", hostname: "b"})
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
	mkNamespace(t, c, "opt-a", map[string]string{"dns": "on"})
	mkNamespace(t, c, "opt-b", nil)
	a := mkService(t, c, clusterIPService("opt-a", "web"))
	b := mkService(t, c, clusterIPService("opt-b", "web"))
	labelled := clusterIPService("opt-a", "labelled")
	labelled.Labels = map[string]string{"expose": "yes"}
	labelled = mkService(t, c, labelled)
	empty := mkService(t, c, clusterIPService("opt-a", "empty"))
	mkService(t, c, headlessService("opt-a", "hl"))
	mkSlice(t, c, "opt-a", "hl", "hl-1", discoveryv1.AddressTypeIPv4, ep{ip: "10.244.7.1", pod: "hl-pod-x"})
	mkSlice(t, c, "opt-a", "web", "web-1", discoveryv1.AddressTypeIPv4, ep{ip: "10.244.7.2"})
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
		n := startKubeNode(t, cp, "namespaces: [opt-a]", true)
		n.eventually(t, "web.opt-a.svc.cluster.local", dns.TypeA, dns.RcodeSuccess, a.Spec.ClusterIP)
		n.eventually(t, "web.opt-b.svc.cluster.local", dns.TypeA, dns.RcodeNameError)
		n.eventually(t, reverse(b.Spec.ClusterIP), dns.TypePTR, dns.RcodeNameError)
	})
	t.Run("namespaceSelector", func(t *testing.T) {
		n := startKubeNode(t, cp, `namespaceSelector: "dns=on"`, true)
		n.eventually(t, "web.opt-a.svc.cluster.local", dns.TypeA, dns.RcodeSuccess, a.Spec.ClusterIP)
		n.eventually(t, "web.opt-b.svc.cluster.local", dns.TypeA, dns.RcodeNameError)
		n.eventually(t, reverse(b.Spec.ClusterIP), dns.TypePTR, dns.RcodeNameError)
	})
	t.Run("labelSelector", func(t *testing.T) {
		n := startKubeNode(t, cp, `labelSelector: "expose=yes"`, true)
		n.eventually(t, "labelled.opt-a.svc.cluster.local", dns.TypeA, dns.RcodeSuccess, labelled.Spec.ClusterIP)
		n.eventually(t, "web.opt-a.svc.cluster.local", dns.TypeA, dns.RcodeNameError)
	})
	t.Run("pods verified", func(t *testing.T) {
		n := startKubeNode(t, cp, "pods: verified", true)
		n.eventually(t, "10-244-7-9.opt-a.pod.cluster.local", dns.TypeA, dns.RcodeSuccess, "10.244.7.9")
		n.eventually(t, "10-244-7-8.opt-a.pod.cluster.local", dns.TypeA, dns.RcodeNameError)
		n.eventually(t, "10-244-7-9.opt-b.pod.cluster.local", dns.TypeA, dns.RcodeNameError)
	})
	t.Run("pods disabled", func(t *testing.T) {
		n := startKubeNode(t, cp, "pods: disabled", true)
		n.eventually(t, "10-244-7-9.opt-a.pod.cluster.local", dns.TypeA, dns.RcodeNameError)
	})
	t.Run("endpointPodNames", func(t *testing.T) {
		n := startKubeNode(t, cp, "endpointPodNames: true", true)
		n.eventually(t, "hl-pod-x.hl.opt-a.svc.cluster.local", dns.TypeA, dns.RcodeSuccess, "10.244.7.1")
		n.eventually(t, reverse("10.244.7.1"), dns.TypePTR, dns.RcodeSuccess, "hl-pod-x.hl.opt-a.svc.cluster.local.")
	})
	t.Run("ttl", func(t *testing.T) {
		n := startKubeNode(t, cp, "ttl: 42", true)
		testutil.Eventually(t, 10*time.Second, func() error {
			r, err := testutil.Exchange(n.addr, "udp", "web.opt-a.svc.cluster.local.", dns.TypeA)
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
		n := startKubeNode(t, cp, "noEndpoints: true", true)
		n.eventually(t, "web.opt-a.svc.cluster.local", dns.TypeA, dns.RcodeSuccess, a.Spec.ClusterIP)
		n.eventually(t, "hl.opt-a.svc.cluster.local", dns.TypeA, dns.RcodeNameError)
		n.eventually(t, "10-244-7-2.web.opt-a.svc.cluster.local", dns.TypeA, dns.RcodeNameError)
	})
	t.Run("ignoreEmptyService", func(t *testing.T) {
		n := startKubeNode(t, cp, "ignoreEmptyService: true", true)
		n.eventually(t, "web.opt-a.svc.cluster.local", dns.TypeA, dns.RcodeSuccess, a.Spec.ClusterIP)
		n.eventually(t, "empty.opt-a.svc.cluster.local", dns.TypeA, dns.RcodeNameError)
		_ = empty
	})
	t.Run("reverseZones", func(t *testing.T) {
		n := startKubeNode(t, cp, "reverseZones: [96.10.in-addr.arpa]", true)
		n.eventually(t, reverse(a.Spec.ClusterIP), dns.TypePTR, dns.RcodeSuccess, "web.opt-a.svc.cluster.local.")
		// Outside the reverse zones: not ours to answer.
		n.eventually(t, reverse("10.244.7.2"), dns.TypePTR, dns.RcodeRefused)
	})
	t.Run("zones", func(t *testing.T) {
		n := startKubeNode(t, cp, "zones: [cluster.local, corp.example]", true)
		n.eventually(t, "web.opt-a.svc.corp.example", dns.TypeA, dns.RcodeSuccess, a.Spec.ClusterIP)
		n.eventually(t, "web.opt-a.svc.cluster.local", dns.TypeA, dns.RcodeSuccess, a.Spec.ClusterIP)
	})
}

// Until the first sync, missing names are SERVFAIL, never a false
// NXDOMAIN; after the startup timeout what is known is served; when the
// API comes back, shardns catches up and turns ready.
func TestKubernetesAPIDownAtStart(t *testing.T) {
	cp := kubeapi.Start(t)
	mkNamespace(t, cp.Client, "late", nil)
	svc := mkService(t, cp.Client, clusterIPService("late", "web"))
	cp.StopAPIServer(t)

	n := startKubeNode(t, cp, "startupTimeout: 3s", false)
	if err := n.answers("web.late.svc.cluster.local", dns.TypeA, dns.RcodeServerFailure); err != nil {
		t.Fatal(err)
	}
	if code := httpStatus(t, "http://"+n.HTTPAddr()+"/ready"); code != http.StatusServiceUnavailable {
		t.Fatalf("/ready = %d before the sync, want 503", code)
	}
	n.eventually(t, "web.late.svc.cluster.local", dns.TypeA, dns.RcodeNameError)
	if code := httpStatus(t, "http://"+n.HTTPAddr()+"/ready"); code != http.StatusServiceUnavailable {
		t.Fatalf("/ready = %d after the startup timeout but before the sync, want 503", code)
	}
	cp.StartAPIServer(t)
	n.eventually(t, "web.late.svc.cluster.local", dns.TypeA, dns.RcodeSuccess, svc.Spec.ClusterIP)
	testutil.Eventually(t, 30*time.Second, func() error {
		if code := httpStatus(t, "http://"+n.HTTPAddr()+"/ready"); code != http.StatusOK {
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
	mkNamespace(t, c, "rs", nil)
	keep := mkService(t, c, clusterIPService("rs", "keep"))
	gone := mkService(t, c, clusterIPService("rs", "gone"))
	n := startKubeNode(t, cp, "", true)
	n.eventually(t, "keep.rs.svc.cluster.local", dns.TypeA, dns.RcodeSuccess, keep.Spec.ClusterIP)
	n.eventually(t, "gone.rs.svc.cluster.local", dns.TypeA, dns.RcodeSuccess, gone.Spec.ClusterIP)

	cp.StopAPIServer(t)
	// The API is down: the last known state keeps serving.
	if err := n.answers("keep.rs.svc.cluster.local", dns.TypeA, dns.RcodeSuccess, keep.Spec.ClusterIP); err != nil {
		t.Fatal(err)
	}
	cp.StartAPIServer(t)
	if err := c.CoreV1().Services("rs").Delete(ctx, "gone", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	added := mkService(t, c, clusterIPService("rs", "added"))
	n.eventually(t, "added.rs.svc.cluster.local", dns.TypeA, dns.RcodeSuccess, added.Spec.ClusterIP)
	n.eventually(t, "gone.rs.svc.cluster.local", dns.TypeA, dns.RcodeNameError)
	if err := n.answers("keep.rs.svc.cluster.local", dns.TypeA, dns.RcodeSuccess, keep.Spec.ClusterIP); err != nil {
		t.Fatal(err)
	}
}

func httpStatus(t *testing.T, url string) int {
	t.Helper()
	resp, err := http.Get(url)
	if err != nil {
		t.Fatal(err)
	}
	io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	return resp.StatusCode
}

// cluster.joinService: the gossip seeds are the addresses of every pod
// behind the headless Service, ready or not, read through the API.
func TestKubernetesJoinServiceSeeds(t *testing.T) {
	cp := kubeapi.Start(t)
	mkNamespace(t, cp.Client, "dns", nil)
	mkSlice(t, cp.Client, "dns", "shardns-peers", "peers-a", discoveryv1.AddressTypeIPv4,
		ep{ip: "10.1.0.1"}, ep{ip: "10.1.0.2", notReady: true})
	mkSlice(t, cp.Client, "dns", "shardns-peers", "peers-b", discoveryv1.AddressTypeIPv6, ep{ip: "fd00::3"})
	mkSlice(t, cp.Client, "dns", "other", "other-a", discoveryv1.AddressTypeIPv4, ep{ip: "10.9.0.9"})
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
