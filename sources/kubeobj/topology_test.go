package kubeobj

import (
	"reflect"
	"testing"

	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// Zones and hints reach the model as written; hints naming no zone are
// malformed and dropped whole, never the endpoint or its addresses.
func TestEndpointTopology(t *testing.T) {
	hint := func(zones ...string) *discoveryv1.EndpointHints {
		h := &discoveryv1.EndpointHints{}
		for _, z := range zones {
			h.ForZones = append(h.ForZones, discoveryv1.ForZone{Name: z})
		}
		return h
	}
	cases := []struct {
		name     string
		ep       discoveryv1.Endpoint
		zone     string
		forZones []string
	}{
		{"none", discoveryv1.Endpoint{}, "", nil},
		{"zone only", discoveryv1.Endpoint{Zone: ptr("zone-a")}, "zone-a", nil},
		{"hinted", discoveryv1.Endpoint{Zone: ptr("zone-a"), Hints: hint("zone-a", "zone-b")}, "zone-a", []string{"zone-a", "zone-b"}},
		{"empty hints", discoveryv1.Endpoint{Zone: ptr("zone-a"), Hints: hint()}, "zone-a", nil},
		{"malformed hint", discoveryv1.Endpoint{Zone: ptr("zone-a"), Hints: hint("zone-a", "")}, "zone-a", nil},
		{"unknown zone", discoveryv1.Endpoint{Zone: ptr("mars-1"), Hints: hint("mars-1")}, "mars-1", []string{"mars-1"}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			c.ep.Addresses = []string{"10.1.0.1"}
			e := &discoveryv1.EndpointSlice{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "web-1",
				Labels: map[string]string{ServiceNameLabel: "web"}}, AddressType: discoveryv1.AddressTypeIPv4,
				Endpoints: []discoveryv1.Endpoint{c.ep}}
			out, err := EndpointSlice(e)
			if err != nil {
				t.Fatal(err)
			}
			got := out.Endpoints[0]
			if got.Zone != c.zone || !reflect.DeepEqual(got.ForZones, c.forZones) || len(got.Addresses) != 1 {
				t.Fatalf("endpoint %+v, want zone %q, forZones %q and its address", got, c.zone, c.forZones)
			}
		})
	}
}

// trafficDistribution values that ask for the client's zone set
// PreferClose; others, unknown ones included, do not.
func TestServicePreferClose(t *testing.T) {
	for td, want := range map[string]bool{"PreferClose": true, "PreferSameZone": true, "PreferSameNode": true,
		"": false, "Anywhere": false} {
		s := &corev1.Service{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "web"},
			Spec: corev1.ServiceSpec{ClusterIP: corev1.ClusterIPNone}}
		if td != "" {
			s.Spec.TrafficDistribution = ptr(td)
		}
		out, err := Service(s)
		if err != nil {
			t.Fatal(err)
		}
		if out.PreferClose != want {
			t.Errorf("trafficDistribution %q: PreferClose %v, want %v", td, out.PreferClose, want)
		}
	}
}
