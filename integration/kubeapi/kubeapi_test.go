package kubeapi_test

import (
	"net/netip"
	"os"
	"slices"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/clientcmd"

	"github.com/shardns/shardns/integration/kubeapi"
)

func TestMain(m *testing.M) {
	code := m.Run()
	kubeapi.StopShared()
	os.Exit(code)
}

// TestControlPlane writes the objects shardns reads — a namespace, a
// dual-stack Service, an EndpointSlice — and checks that they survive an
// apiserver restart and that a stopped apiserver is seen as down.
func TestControlPlane(t *testing.T) {
	began := time.Now()
	cp := kubeapi.Start(t)
	t.Logf("control plane ready in %v at %s", time.Since(began).Round(time.Millisecond), cp.APIServerURL())
	ctx := t.Context()

	// The kubeconfig is what the binary under test gets: load it as
	// client-go's users do, and use that client from here on.
	cfg, err := clientcmd.BuildConfigFromFlags("", cp.Kubeconfig)
	if err != nil {
		t.Fatal(err)
	}
	client, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		t.Fatal(err)
	}
	for _, ns := range []string{"default", "kube-system"} {
		if _, err := client.CoreV1().Namespaces().Get(ctx, ns, metav1.GetOptions{}); err != nil {
			t.Fatalf("namespace %s, made by the apiserver itself: %v", ns, err)
		}
	}

	const ns = "kubeapi-test"
	if _, err := client.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	requireDual := corev1.IPFamilyPolicyRequireDualStack
	svc, err := client.CoreV1().Services(ns).Create(ctx, &corev1.Service{
		ObjectMeta: metav1.ObjectMeta{Name: "web"},
		Spec: corev1.ServiceSpec{
			Type:           corev1.ServiceTypeClusterIP,
			IPFamilyPolicy: &requireDual,
			IPFamilies:     []corev1.IPFamily{corev1.IPv4Protocol, corev1.IPv6Protocol},
			Selector:       map[string]string{"app": "web"},
			// Several ports: each must be named.
			Ports: []corev1.ServicePort{
				{Name: "http", Port: 80, TargetPort: intstr.FromInt32(8080), Protocol: corev1.ProtocolTCP},
				{Name: "dns", Port: 53, Protocol: corev1.ProtocolUDP},
			},
		},
	}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	checkDualStack(t, svc)

	port, proto, ready := int32(8080), corev1.ProtocolTCP, true
	name := "http"
	_, err = client.DiscoveryV1().EndpointSlices(ns).Create(ctx, &discoveryv1.EndpointSlice{
		ObjectMeta: metav1.ObjectMeta{
			Name:   "web-v4",
			Labels: map[string]string{discoveryv1.LabelServiceName: "web"},
		},
		AddressType: discoveryv1.AddressTypeIPv4,
		Endpoints: []discoveryv1.Endpoint{{
			Addresses:  []string{"10.244.0.5"},
			Conditions: discoveryv1.EndpointConditions{Ready: &ready},
		}},
		Ports: []discoveryv1.EndpointPort{{Name: &name, Port: &port, Protocol: &proto}},
	}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}

	began = time.Now()
	cp.RestartAPIServer(t)
	t.Logf("apiserver restarted in %v", time.Since(began).Round(time.Millisecond))

	// Through the same client as before the restart: it must reconnect.
	after, err := client.CoreV1().Services(ns).Get(ctx, "web", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if after.UID != svc.UID || !slices.Equal(after.Spec.ClusterIPs, svc.Spec.ClusterIPs) {
		t.Errorf("after restart: service %s %v, want %s %v", after.UID, after.Spec.ClusterIPs, svc.UID, svc.Spec.ClusterIPs)
	}
	eps, err := cp.Client.DiscoveryV1().EndpointSlices(ns).List(ctx, metav1.ListOptions{
		LabelSelector: discoveryv1.LabelServiceName + "=web",
	})
	if err != nil {
		t.Fatal(err)
	}
	if len(eps.Items) != 1 || eps.Items[0].Name != "web-v4" || eps.Items[0].Endpoints[0].Addresses[0] != "10.244.0.5" {
		t.Errorf("after restart: endpointslices %+v, want web-v4 with 10.244.0.5", eps.Items)
	}

	cp.StopAPIServer(t)
	if _, err := client.CoreV1().Services(ns).Get(ctx, "web", metav1.GetOptions{}); err == nil {
		t.Error("Get succeeded with the apiserver stopped")
	}
	cp.StopAPIServer(t) // idempotent
	cp.StartAPIServer(t)
	if _, err := client.CoreV1().Services(ns).Get(ctx, "web", metav1.GetOptions{}); err != nil {
		t.Errorf("Get after StartAPIServer: %v", err)
	}
}

// TestShared checks that Shared starts one control plane and hands the same
// one to every caller; TestMain stops it.
func TestShared(t *testing.T) {
	a := kubeapi.Shared(t)
	b := kubeapi.Shared(t)
	if a != b {
		t.Fatal("Shared returned two control planes")
	}
	if _, err := a.Client.CoreV1().Namespaces().Get(t.Context(), "default", metav1.GetOptions{}); err != nil {
		t.Fatal(err)
	}
}

// checkDualStack checks that svc got an IPv4 and an IPv6 cluster IP from
// kubeapi.ServiceCIDRs, in that order, the first also being ClusterIP.
func checkDualStack(t *testing.T, svc *corev1.Service) {
	t.Helper()
	ips := svc.Spec.ClusterIPs
	if len(ips) != 2 || svc.Spec.ClusterIP != ips[0] {
		t.Fatalf("clusterIP %q clusterIPs %q, want two, the first being clusterIP", svc.Spec.ClusterIP, ips)
	}
	for i, want := range kubeapi.ServiceCIDRs {
		ip, err := netip.ParseAddr(ips[i])
		if err != nil {
			t.Fatal(err)
		}
		if !netip.MustParsePrefix(want).Contains(ip) {
			t.Errorf("clusterIPs[%d] = %s, not in %s", i, ip, want)
		}
	}
}
