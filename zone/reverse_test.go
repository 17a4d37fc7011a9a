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
	v := &Static{dir: &Directory{AnyNamespace: true}}
	route := Route{Kind: RouteZone, Origin: "in-addr.arpa.", Key: "0." + key, Reverse: true}
	ptr := s.answerReverse(cfg, v, route, Question{Name: "1.0.16.172.in-addr.arpa.", Type: dns.TypePTR}).Answer
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
		"service":            {{Addr: v4, Target: "web.ns1.svc.cluster.local."}},
		"dual-stack service": {{Addr: v4, Target: "web.ns1.svc.cluster.local."}, {Addr: v6, Target: "web.ns1.svc.cluster.local."}},
		"endpoints named by address": {
			{Addr: v4, Target: "10-244-1-23.web.ns1.svc.cluster.local."}, {Addr: v6, Target: "fd00--1-17.web.ns1.svc.cluster.local."},
		},
		"endpoints by hostname and pod name": {
			{Addr: v4, Target: "web-0.hdls.ns1.svc.cluster.local."}, {Addr: mapped, Target: "pod-b.hdls.ns1.svc.cluster.local."},
		},
		"targets without a common suffix": {
			{Addr: v4, Target: "a.one.svc.cluster.local."}, {Addr: v6, Target: "other.zone."}, {Addr: mapped, Target: "a.one.svc.cluster.local."},
		},
		"a target that is its suffix and one that is not": {
			{Addr: v4, Target: "x.web.ns1.svc.cluster.local."}, {Addr: v6, Target: "web.ns1.svc.cluster.local."},
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
			if packed[:cut].each(func(netip.Addr, string, string, bool) { seen++ }) && seen == len(ptrs) {
				t.Errorf("%s: cut to %d of %d bytes, the list reads whole", name, cut, len(packed))
			}
		}
	}
	if PackPTRs(nil) != "" || len(PTRList("").PTRs()) != 0 {
		t.Error("no PTRs should pack to an empty list and read back as none")
	}
}

// A reverse snapshot answers each address from its sources' lists: a
// service's cluster IP alone, else every endpoint's target once, in the
// order of their sources, leaving out namespaces not exposed; a damaged
// list loses its own PTRs only.
func TestReverseZoneAnswersFromItsLists(t *testing.T) {
	cfg := testConfig()
	const zoneKey = "0.0.10.in-addr.arpa."
	a1, a2, a3, a4 := netip.MustParseAddr("10.0.0.1"), netip.MustParseAddr("10.0.0.2"),
		netip.MustParseAddr("10.0.0.3"), netip.MustParseAddr("10.0.0.4")
	svc := model.Key{Kind: model.KindService, Namespace: "ns1", Name: "web"}
	slice1 := model.Key{Kind: model.KindEndpointSlice, Namespace: "ns1", Name: "hdls-a"}
	slice2 := model.Key{Kind: model.KindEndpointSlice, Namespace: "ns1", Name: "hdls-b"}
	hidden := model.Key{Kind: model.KindEndpointSlice, Namespace: "ns2", Name: "db-a"}
	broken := model.Key{Kind: model.KindEndpointSlice, Namespace: "ns1", Name: "zz-broken"}
	from := map[model.Key]PTRList{
		svc:    PackPTRs([]PTR{{Addr: a1, Target: "web.ns1.svc.cluster.local."}}),
		slice1: PackPTRs([]PTR{{Addr: a1, Target: "x.hdls.ns1.svc.cluster.local."}, {Addr: a2, Target: "y.hdls.ns1.svc.cluster.local."}}),
		slice2: PackPTRs([]PTR{{Addr: a2, Target: "z.hdls.ns1.svc.cluster.local."}, {Addr: a2, Target: "y.hdls.ns1.svc.cluster.local."}}),
		hidden: PackPTRs([]PTR{{Addr: a2, Target: "db.ns2.svc.cluster.local."}, {Addr: a3, Target: "db.ns2.svc.cluster.local."}}),
		broken: PackPTRs([]PTR{{Addr: a4, Target: "w.hdls.ns1.svc.cluster.local."}})[:3],
	}
	s := BuildReverseZone(cfg, zoneKey, "in-addr.arpa.", 1, from)
	v := &Static{dir: &Directory{Namespaces: map[string]struct{}{"ns1": {}}}}
	route := Route{Kind: RouteZone, Origin: "in-addr.arpa.", Key: zoneKey, Reverse: true}
	ptrs := func(name string, qtype uint16) Response {
		return s.answerReverse(cfg, v, route, Question{Name: name, Type: qtype})
	}
	targets := func(r Response) []string {
		var out []string
		for _, rr := range r.Answer {
			out = append(out, rr.(*dns.PTR).Ptr)
		}
		return out
	}
	if got := targets(ptrs("1."+zoneKey, dns.TypePTR)); !reflect.DeepEqual(got, []string{"web.ns1.svc.cluster.local."}) {
		t.Errorf("10.0.0.1, a cluster IP and an endpoint: %v, want the service alone", got)
	}
	if got := targets(ptrs("2."+zoneKey, dns.TypePTR)); !reflect.DeepEqual(got,
		[]string{"y.hdls.ns1.svc.cluster.local.", "z.hdls.ns1.svc.cluster.local."}) {
		t.Errorf("10.0.0.2: %v, want y then z, once each, and not ns2's", got)
	}
	for _, name := range []string{"3." + zoneKey, "4." + zoneKey, "5." + zoneKey, "02." + zoneKey, zoneKey} {
		if r := ptrs(name, dns.TypePTR); r.Rcode != dns.RcodeNameError || len(r.Ns) != 1 {
			t.Errorf("%s: rcode %d, %v; want NXDOMAIN with the SOA", name, r.Rcode, r.Answer)
		}
	}
	if r := ptrs("1."+zoneKey, dns.TypeA); r.Rcode != dns.RcodeSuccess || len(r.Answer) != 0 || len(r.Ns) != 1 {
		t.Errorf("10.0.0.1 A: rcode %d, %v; want NODATA", r.Rcode, r.Answer)
	}
	// Records counts what the names answer, exposed or not: 1 + 3 + 1.
	if got := s.Records(); got != 5 {
		t.Errorf("Records() = %d, want 5", got)
	}
}
