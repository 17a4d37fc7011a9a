package zone

import (
	"reflect"
	"testing"
	"unsafe"

	"github.com/miekg/dns"

	"github.com/shardns/shardns/model"
)

// A reverse zone's snapshot keeps its sources' PTRs packed into memory of
// its own: the same lists, sharing no array or string with the lists it
// was built from, and its records point at the packed targets.
func TestBuildReverseZonePacksItsPTRs(t *testing.T) {
	cfg := testConfig()
	const key = "16.172.in-addr.arpa."
	from := map[model.Key][]PTR{}
	for _, obj := range testCluster() {
		if p := PTRs(cfg, obj)["0."+key]; p != nil {
			from[obj.(interface{ Key() model.Key }).Key()] = p
		}
	}
	if len(from) != 1 || len(from[model.Key{Kind: model.KindEndpointSlice, Namespace: "ns1", Name: "hdls-abc"}]) != 2 {
		t.Fatalf("the test cluster gives %v, want the two ready endpoints of hdls-abc", from)
	}
	s := BuildReverseZone(cfg, "0."+key, "in-addr.arpa.", 1, from)
	if !reflect.DeepEqual(s.PTRs, from) {
		t.Fatalf("the snapshot keeps %v, want %v", s.PTRs, from)
	}
	given := map[*byte]bool{}
	for src, list := range from {
		given[(*byte)(unsafe.Pointer(unsafe.SliceData(list)))] = true
		for _, p := range list {
			given[unsafe.StringData(p.Target)] = true
		}
		if packed := s.PTRs[src]; given[(*byte)(unsafe.Pointer(unsafe.SliceData(packed)))] {
			t.Fatalf("the PTR list of %v is the one given, not a copy", src)
		}
	}
	for _, list := range s.PTRs {
		for _, p := range list {
			if given[unsafe.StringData(p.Target)] {
				t.Fatalf("target %q is the string given, not a copy", p.Target)
			}
		}
	}
	n, ok := s.lookup("1.0.16.172.in-addr.arpa.")
	dir := &Directory{AnyNamespace: true}
	var ptr []dns.RR
	if ok {
		ptr = n.ptr("1.0.16.172.in-addr.arpa.", dir)
	}
	if len(ptr) != 1 || ptr[0].(*dns.PTR).Ptr != "web-0.hdls.ns1.svc.cluster.local." {
		t.Fatalf("1.0.16.172.in-addr.arpa. answers %v, want one PTR to web-0.hdls.ns1.svc.cluster.local.", ptr)
	}
	if given[unsafe.StringData(ptr[0].(*dns.PTR).Ptr)] {
		t.Fatal("the PTR record points at the target given, not at the packed one")
	}
}
