package zone

import (
	"net/netip"
	"reflect"
	"testing"
	"unsafe"

	"github.com/miekg/dns"

	"github.com/shardns/shardns/model"
)

// A reverse zone's snapshot keeps its sources' PTRs packed into memory of
// its own: the same lists, sharing no bytes with the lists it was built
// from, and its records point at targets of its own.
func TestBuildReverseZonePacksItsPTRs(t *testing.T) {
	cfg := testConfig()
	const key = "16.172.in-addr.arpa."
	given := map[model.Key][]PTR{}
	from := map[model.Key]PTRList{}
	for _, obj := range testCluster() {
		if p := PTRs(cfg, obj)["0."+key]; p != nil {
			k := obj.(interface{ Key() model.Key }).Key()
			given[k], from[k] = p, PackPTRs(p)
		}
	}
	if len(given) != 1 || len(given[model.Key{Kind: model.KindEndpointSlice, Namespace: "ns1", Name: "hdls-abc"}]) != 2 {
		t.Fatalf("the test cluster gives %v, want the two ready endpoints of hdls-abc", given)
	}
	s := BuildReverseZone(cfg, "0."+key, "in-addr.arpa.", 1, from)
	givenText := map[*byte]bool{}
	if len(s.PTRs) != len(given) {
		t.Fatalf("the snapshot keeps the PTRs of %d sources, want %d", len(s.PTRs), len(given))
	}
	for _, kept := range s.PTRs {
		src, list := kept.Source, given[kept.Source]
		if got := kept.PTRs.PTRs(); !reflect.DeepEqual(got, list) {
			t.Fatalf("the snapshot keeps %v for %v, want %v", got, src, list)
		}
		if unsafe.StringData(string(kept.PTRs)) == unsafe.StringData(string(from[src])) {
			t.Fatalf("the PTR list of %v is the one given, not a copy", src)
		}
		for _, p := range list {
			givenText[unsafe.StringData(p.Target)] = true
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
	if givenText[unsafe.StringData(ptr[0].(*dns.PTR).Ptr)] {
		t.Fatal("the PTR record points at the target given, not at the packed one")
	}
}

// Every form a PTR's target takes comes back from its packed list as it
// went in, and a damaged list is reported, never read past its end.
func TestPackedPTRsRoundTrip(t *testing.T) {
	v4 := netip.MustParseAddr("10.244.1.23")
	v6 := netip.MustParseAddr("fd00::1:17")
	mapped := netip.MustParseAddr("::ffff:10.0.0.9")
	lists := map[string][]PTR{
		"service":            {{v4, "web.ns1.svc.cluster.local."}},
		"dual-stack service": {{v4, "web.ns1.svc.cluster.local."}, {v6, "web.ns1.svc.cluster.local."}},
		"endpoints named by address": {
			{v4, "10-244-1-23.web.ns1.svc.cluster.local."}, {v6, "fd00--1-17.web.ns1.svc.cluster.local."},
		},
		"endpoints by hostname and pod name": {
			{v4, "web-0.hdls.ns1.svc.cluster.local."}, {mapped, "pod-b.hdls.ns1.svc.cluster.local."},
		},
		"targets without a common suffix": {
			{v4, "a.one.svc.cluster.local."}, {v6, "other.zone."}, {mapped, "a.one.svc.cluster.local."},
		},
		"a target that is its suffix and one that is not": {
			{v4, "x.web.ns1.svc.cluster.local."}, {v6, "web.ns1.svc.cluster.local."},
		},
	}
	for name, ptrs := range lists {
		packed := PackPTRs(ptrs)
		if got := packed.PTRs(); !reflect.DeepEqual(got, ptrs) {
			t.Errorf("%s: packed and read back %v, want %v", name, got, ptrs)
		}
		if len(ptrs) > 1 && len(packed) >= 40*len(ptrs) {
			t.Errorf("%s: %d bytes packed for %d PTRs, no fewer than as PTR values", name, len(packed), len(ptrs))
		}
		for cut := range len(packed) {
			seen := 0
			if packed[:cut].each(func(netip.Addr, string, string) { seen++ }) && seen == len(ptrs) {
				t.Errorf("%s: cut to %d of %d bytes, the list reads whole", name, cut, len(packed))
			}
		}
	}
	if PackPTRs(nil) != "" || len(PTRList("").PTRs()) != 0 {
		t.Error("no PTRs should pack to an empty list and read back as none")
	}
}
