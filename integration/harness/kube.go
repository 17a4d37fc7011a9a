package harness

import (
	"context"
	"testing"

	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
)

// CreateNamespace creates the namespace name with labels.
func CreateNamespace(t testing.TB, c kubernetes.Interface, name string, labels map[string]string) {
	t.Helper()
	_, err := c.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: name, Labels: labels}}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
}

// CreateService creates svc and returns it as the apiserver stored it
// (with its allocated cluster IPs).
func CreateService(t testing.TB, c kubernetes.Interface, svc *corev1.Service) *corev1.Service {
	t.Helper()
	out, err := c.CoreV1().Services(svc.Namespace).Create(ctx, svc, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// ClusterIPService is a Service ns/name of type ClusterIP with ports
// (http 80/TCP without any), for CreateService.
func ClusterIPService(ns, name string, ports ...corev1.ServicePort) *corev1.Service {
	if len(ports) == 0 {
		ports = []corev1.ServicePort{{Name: "http", Port: 80, Protocol: corev1.ProtocolTCP}}
	}
	return &corev1.Service{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name},
		Spec: corev1.ServiceSpec{Ports: ports}}
}

// HeadlessService is a Service ns/name without a cluster IP.
func HeadlessService(ns, name string) *corev1.Service {
	s := ClusterIPService(ns, name)
	s.Spec.ClusterIP = corev1.ClusterIPNone
	return s
}

// Endpoint is one address of an EndpointSlice: ready unless NotReady,
// with a hostname and a target pod when set.
type Endpoint struct {
	IP, Hostname, Pod string
	NotReady          bool
}

// CreateEndpointSlice creates the EndpointSlice ns/name of the Service
// svc, with port http 80/TCP and eps.
func CreateEndpointSlice(t testing.TB, c kubernetes.Interface, ns, svc, name string, family discoveryv1.AddressType, eps ...Endpoint) *discoveryv1.EndpointSlice {
	t.Helper()
	return CreateEndpointSliceLabelled(t, c, ns, name, map[string]string{discoveryv1.LabelServiceName: svc}, family, eps...)
}

// CreateEndpointSliceLabelled creates an EndpointSlice with labels, port http 80/TCP
// and eps.
func CreateEndpointSliceLabelled(t testing.TB, c kubernetes.Interface, ns, name string, labels map[string]string, family discoveryv1.AddressType, eps ...Endpoint) *discoveryv1.EndpointSlice {
	t.Helper()
	portName, port, proto := "http", int32(80), corev1.ProtocolTCP
	s := &discoveryv1.EndpointSlice{
		ObjectMeta:  metav1.ObjectMeta{Namespace: ns, Name: name, Labels: labels},
		AddressType: family,
		Ports:       []discoveryv1.EndpointPort{{Name: &portName, Port: &port, Protocol: &proto}},
	}
	for _, e := range eps {
		ready := !e.NotReady
		d := discoveryv1.Endpoint{Addresses: []string{e.IP}, Conditions: discoveryv1.EndpointConditions{Ready: &ready}}
		if e.Hostname != "" {
			d.Hostname = &e.Hostname
		}
		if e.Pod != "" {
			d.TargetRef = &corev1.ObjectReference{Kind: "Pod", Name: e.Pod, Namespace: ns}
		}
		s.Endpoints = append(s.Endpoints, d)
	}
	out, err := c.DiscoveryV1().EndpointSlices(ns).Create(ctx, s, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// ctx is the context of the API calls the builders make: a test stops
// them by failing, not by cancelling.
var ctx = context.Background()

// Ptr is a pointer to a copy of v, for the optional fields of API objects.
func Ptr[T any](v T) *T { return &v }
