package kubernetes

import (
	"fmt"
	"net/netip"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/shardns/shardns/model"
)

// BenchmarkNewCached makes the cache entry of an EndpointSlice of ten
// endpoints, what every listed or changed slice costs the informer; its
// allocations are what the entry leaves among, besides the API object's.
func BenchmarkNewCached(b *testing.B) {
	slice := &model.EndpointSlice{Namespace: "bench", Name: "svc1-abcde", ServiceName: "svc1",
		Ports: []model.Port{{Name: "http", Protocol: "TCP", Port: 80}}}
	for e := range 10 {
		slice.Endpoints = append(slice.Endpoints, model.Endpoint{Ready: true, Hostname: fmt.Sprintf("host-%d", e),
			TargetPodName: fmt.Sprintf("svc1-%d", e), Addresses: []netip.Addr{netip.AddrFrom4([4]byte{10, 200, 0, byte(e + 1)})}})
	}
	meta := metav1.ObjectMeta{Namespace: "bench", Name: "svc1-abcde", ResourceVersion: "123456"}
	b.ReportAllocs()
	for b.Loop() {
		if c := newCached(meta, slice, nil); c.frozen == "" {
			b.Fatal("not frozen")
		}
	}
}
