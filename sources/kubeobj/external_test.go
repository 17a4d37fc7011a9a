package kubeobj

import (
	"net/netip"
	"slices"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// A Service's external IPs come first, then its load balancer's ingress
// IPs; a malformed one is skipped with a warning naming its field, and
// the rest of the Service is served.
func TestServiceExternalIPs(t *testing.T) {
	s := &corev1.Service{
		ObjectMeta: metav1.ObjectMeta{Namespace: "shop", Name: "front"},
		Spec: corev1.ServiceSpec{ClusterIP: "10.96.0.5", ExternalIPs: []string{"192.0.2.1", "not-an-ip", "2001:db8::1"},
			Ports: []corev1.ServicePort{{Name: "http", Port: 80}}},
		Status: corev1.ServiceStatus{LoadBalancer: corev1.LoadBalancerStatus{Ingress: []corev1.LoadBalancerIngress{
			{IP: "198.51.100.7"}, {Hostname: "lb.example.net"}, {IP: "fe80::1%eth0"}}}},
	}
	svc, warnings, err := ServiceWarnings(s)
	if err != nil {
		t.Fatal(err)
	}
	want := []netip.Addr{netip.MustParseAddr("192.0.2.1"), netip.MustParseAddr("2001:db8::1"), netip.MustParseAddr("198.51.100.7")}
	if !slices.Equal(svc.ExternalIPs, want) {
		t.Errorf("external IPs %v, want %v", svc.ExternalIPs, want)
	}
	if len(warnings) != 2 || !strings.Contains(warnings[0], "spec.externalIPs[1]") ||
		!strings.Contains(warnings[1], "status.loadBalancer.ingress[2].ip") {
		t.Errorf("warnings %q, want spec.externalIPs[1] and status.loadBalancer.ingress[2].ip", warnings)
	}
	if len(svc.ClusterIPs) != 1 || len(svc.Ports) != 1 {
		t.Errorf("cluster IPs %v and ports %v: the rest of the Service is not served", svc.ClusterIPs, svc.Ports)
	}
	plain, _ := Service(&corev1.Service{ObjectMeta: metav1.ObjectMeta{Name: "plain"}, Spec: corev1.ServiceSpec{ClusterIP: "None"}})
	if plain.ExternalIPs != nil {
		t.Errorf("a Service without external IPs holds %v", plain.ExternalIPs)
	}
}
