package kubeobj

import (
	"net/netip"
	"reflect"
	"strings"
	"testing"

	discoveryv1 "k8s.io/api/discovery/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/shardns/shardns/model"
)

func serviceImport(spec map[string]any) *unstructured.Unstructured {
	return &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "multicluster.x-k8s.io/v1alpha1", "kind": "ServiceImport",
		"metadata": map[string]any{"namespace": "shop", "name": "web", "resourceVersion": "5"},
		"spec":     spec,
	}}
}

// A ClusterSetIP import answers its IPs on its ports; a bad IP or port is
// skipped and reported, and the rest of the import is still served.
func TestServiceImport(t *testing.T) {
	got, warnings, err := ServiceImport(serviceImport(map[string]any{
		"type": "ClusterSetIP",
		"ips":  []any{"10.42.0.1", "not-an-ip", "fd00:42::1"},
		"ports": []any{
			map[string]any{"name": "http", "protocol": "TCP", "port": int64(80)},
			map[string]any{"name": "dns", "protocol": "UDP", "port": float64(53)},
			map[string]any{"name": "huge", "port": int64(70000)},
			map[string]any{"name": "plain", "port": int64(8080)},
		},
	}))
	if err != nil {
		t.Fatal(err)
	}
	want := &model.ServiceImport{Namespace: "shop", Name: "web", ResourceVersion: "5",
		IPs: []netip.Addr{netip.MustParseAddr("10.42.0.1"), netip.MustParseAddr("fd00:42::1")},
		Ports: []model.Port{{Name: "http", Protocol: "TCP", Port: 80}, {Name: "dns", Protocol: "UDP", Port: 53},
			{Name: "plain", Protocol: "TCP", Port: 8080}}}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("got %+v\nwant %+v", got, want)
	}
	if len(warnings) != 2 || !strings.Contains(warnings[0], `spec.ips[1]: "not-an-ip"`) || !strings.Contains(warnings[1], "spec.ports[2]") {
		t.Fatalf("warnings %q: want spec.ips[1] and spec.ports[2] named", warnings)
	}
	headless, _, err := ServiceImport(serviceImport(map[string]any{"type": "Headless"}))
	if err != nil || !headless.Headless {
		t.Fatalf("Headless import: %+v, %v", headless, err)
	}
	if _, _, err := ServiceImport(serviceImport(map[string]any{"ips": "10.0.0.1"})); err == nil || !strings.Contains(err.Error(), "shop/web: spec.ips") {
		t.Fatalf("spec.ips a string: err %v, want one naming the object and the field", err)
	}
}

// An imported slice keeps its service and source cluster from the MCS
// labels; a slice without the MCS service label is not one.
func TestMultiClusterSlice(t *testing.T) {
	ready := true
	e := &discoveryv1.EndpointSlice{
		ObjectMeta: metav1.ObjectMeta{Namespace: "shop", Name: "db-east", Labels: map[string]string{
			MultiClusterServiceLabel: "db", SourceClusterLabel: "east"}},
		AddressType: discoveryv1.AddressTypeIPv4,
		Endpoints:   []discoveryv1.Endpoint{{Addresses: []string{"10.1.0.5"}, Conditions: discoveryv1.EndpointConditions{Ready: &ready}}},
	}
	got, err := MultiClusterSlice(e)
	if err != nil || got == nil || got.ServiceName != "db" || got.ClusterID != "east" || len(got.Endpoints) != 1 {
		t.Fatalf("got %+v, %v", got, err)
	}
	e.Labels = map[string]string{ServiceNameLabel: "db"}
	if got, err := MultiClusterSlice(e); got != nil || err != nil {
		t.Fatalf("a cluster's own slice converted as imported: %+v, %v", got, err)
	}
}
