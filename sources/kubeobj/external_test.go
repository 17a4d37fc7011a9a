package kubeobj

import (
	"net/netip"
	"slices"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/shardns/shardns/model"
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
			{Hostname: "first.example.net"}, {IP: "198.51.100.7"}, {Hostname: "lb.example.net"}, {IP: "fe80::1%eth0"},
			{Hostname: "bad..name"}}}},
	}
	svc, warnings, err := ServiceWarnings(s)
	if err != nil {
		t.Fatal(err)
	}
	want := []netip.Addr{netip.MustParseAddr("192.0.2.1"), netip.MustParseAddr("2001:db8::1"), netip.MustParseAddr("198.51.100.7")}
	if !slices.Equal(svc.ExternalIPs, want) {
		t.Errorf("external IPs %v, want %v", svc.ExternalIPs, want)
	}
	// Ingress hostnames keep their place among the addresses: the first
	// comes after the two spec.externalIPs, the second after the ingress
	// IP before it.
	wantHosts := []model.ExternalHost{{Name: "first.example.net.", After: 2}, {Name: "lb.example.net.", After: 3}}
	if !slices.Equal(svc.ExternalHosts, wantHosts) {
		t.Errorf("external hosts %v, want %v", svc.ExternalHosts, wantHosts)
	}
	if len(warnings) != 3 || !strings.Contains(warnings[0], "spec.externalIPs[1]") ||
		!strings.Contains(warnings[1], "status.loadBalancer.ingress[3].ip") ||
		!strings.Contains(warnings[2], "status.loadBalancer.ingress[4].hostname") {
		t.Errorf("warnings %q, want spec.externalIPs[1], status.loadBalancer.ingress[3].ip and [4].hostname", warnings)
	}
	if len(svc.ClusterIPs) != 1 || len(svc.Ports) != 1 {
		t.Errorf("cluster IPs %v and ports %v: the rest of the Service is not served", svc.ClusterIPs, svc.Ports)
	}
	plain, _ := Service(&corev1.Service{ObjectMeta: metav1.ObjectMeta{Name: "plain"}, Spec: corev1.ServiceSpec{ClusterIP: "None"}})
	if plain.ExternalIPs != nil || plain.ExternalHosts != nil {
		t.Errorf("a Service without external IPs holds %v", plain.ExternalIPs)
	}
}
