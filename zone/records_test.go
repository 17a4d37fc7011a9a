package zone

import (
	"fmt"
	"net/netip"
	"runtime"
	"testing"

	"github.com/miekg/dns"

	"github.com/shardns/shardns/model"
)

// benchNamespace is one namespace of the memory bench's cluster: 100
// services of 10 endpoints, 30 of them headless.
func benchNamespace() (map[string]*model.Service, map[string]*model.EndpointSlice) {
	services, slices := map[string]*model.Service{}, map[string]*model.EndpointSlice{}
	http := model.Port{Name: "http", Protocol: "TCP", Port: 80}
	for i := range 100 {
		name := fmt.Sprintf("svc%d", i)
		svc := &model.Service{Namespace: "bench", Name: name, Ports: []model.Port{http},
			ClusterIPs: []netip.Addr{netip.AddrFrom4([4]byte{10, 96, byte(i), 1})}}
		if i%10 >= 7 {
			svc.Type, svc.ClusterIPs = model.ServiceHeadless, nil
		}
		services[name] = svc
		sl := &model.EndpointSlice{Namespace: "bench", Name: name + "-1", ServiceName: name, Ports: []model.Port{http}}
		for e := range 10 {
			sl.Endpoints = append(sl.Endpoints, model.Endpoint{Hostname: fmt.Sprintf("host-%d", e), Ready: true,
				Addresses: []netip.Addr{netip.AddrFrom4([4]byte{10, 200, byte(i), byte(e + 1)})}})
		}
		slices[sl.Name] = sl
	}
	return services, slices
}

// The additional records of an SRV answer are the A records of the names
// it points at, as those names answer them.
func TestSRVAdditionalRecordsAreTheTargetsAddresses(t *testing.T) {
	cfg := testConfig()
	services, slices := benchNamespace()
	key := ServiceZoneKey("bench", cl)
	s := BuildServiceZone(cfg, key, cl, 1, services, slices)
	srv, okSRV := s.lookup("_http._tcp.svc7." + key)
	host, okHost := s.lookup("host-3.svc7." + key)
	if !okSRV || !okHost {
		t.Fatal("the headless service svc7 has no SRV or host names")
	}
	a := host.addresses("host-3.svc7."+key, false)
	if len(a) != 1 || a[0].(*dns.A).A.String() != "10.200.7.4" {
		t.Fatalf("host-3 of svc7 answers %v, want 10.200.7.4", a)
	}
	answer, extra := srv.srv("_http._tcp.svc7." + key)
	if len(answer) != 10 || len(extra) != 10 {
		t.Fatalf("the SRV answer of svc7 has %d records and %d additional ones, want 10 and 10", len(answer), len(extra))
	}
	for _, rr := range extra {
		if rr.Header().Name == "host-3.svc7."+key {
			if rr.String() != a[0].String() {
				t.Fatalf("the additional record of host-3 is %v, want %v", rr, a[0])
			}
			return
		}
	}
	t.Fatal("no additional record for host-3")
}

// ReverseName writes what dns.ReverseAddr writes, without its detour
// through the address's text, and parseReverseName reads it back; any
// other spelling of the name is not the address's.
func TestReverseNameRoundTrip(t *testing.T) {
	for _, a := range []string{"10.200.7.4", "0.0.0.0", "255.255.255.255", "::ffff:10.1.2.3", "fd00::1", "2001:db8:abcd::ff01"} {
		addr := netip.MustParseAddr(a)
		want, err := dns.ReverseAddr(addr.Unmap().String())
		if err != nil {
			t.Fatal(err)
		}
		if got := ReverseName(addr); got != want {
			t.Errorf("ReverseName(%s) = %q, want %q", a, got, want)
		}
		if got, ok := parseReverseName(want); !ok || got != addr.Unmap() {
			t.Errorf("parseReverseName(%q) = %v, %v; want %s", want, got, ok, addr.Unmap())
		}
	}
	for _, name := range []string{
		"4.7.200.10.in-addr.arpa", "04.7.200.10.in-addr.arpa.", "+4.7.200.10.in-addr.arpa.", "256.7.200.10.in-addr.arpa.",
		"7.200.10.in-addr.arpa.", "1.4.7.200.10.in-addr.arpa.", "..7.200.10.in-addr.arpa.", "in-addr.arpa.",
		".in-addr.arpa.", "a.7.200.10.in-addr.arpa.",
		"1.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.d.F.ip6.arpa.",
		"1.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.d.ip6.arpa.",
		"10.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.d.f.ip6.arpa.",
		"1.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.d.g.ip6.arpa.",
		"www.example.com.",
	} {
		if a, ok := parseReverseName(name); ok {
			t.Errorf("parseReverseName(%q) = %v, want no address", name, a)
		}
	}
}

// BenchmarkBuildServiceZone builds one namespace of the memory bench:
// B/op is what a rebuild allocates, heap-B/record what the snapshot keeps.
func BenchmarkBuildServiceZone(b *testing.B) {
	cfg := testConfig()
	services, slices := benchNamespace()
	key := ServiceZoneKey("bench", cl)
	b.ReportAllocs()
	var s *Snapshot
	for b.Loop() {
		s = BuildServiceZone(cfg, key, cl, 1, services, slices)
	}
	b.ReportMetric(float64(s.Records()), "records")
}

// BenchmarkBuildReverseZone builds the reverse zones of the memory bench's
// namespace, one /24 for each EndpointSlice's ten endpoints and one for
// the cluster IPs: B/op is what a rebuild of all of them allocates,
// kept-B/PTR what their snapshots keep for each PTR, after a collection.
func BenchmarkBuildReverseZone(b *testing.B) {
	cfg := testConfig()
	services, slices := benchNamespace()
	byZone := map[string]map[model.Key]PTRList{}
	ptrs := 0
	for _, obj := range append(values(services), values(slices)...) {
		for key, list := range PTRs(cfg, obj) {
			if byZone[key] == nil {
				byZone[key] = map[model.Key]PTRList{}
			}
			byZone[key][obj.(interface{ Key() model.Key }).Key()] = PackPTRs(list)
			ptrs += len(list)
		}
	}
	build := func() []*Snapshot {
		var out []*Snapshot
		for key, sources := range byZone {
			out = append(out, BuildReverseZone(cfg, key, "in-addr.arpa.", 1, sources))
		}
		return out
	}
	var before, after runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)
	kept := build()
	runtime.GC()
	runtime.ReadMemStats(&after)
	runtime.KeepAlive(kept)
	b.ReportAllocs()
	for b.Loop() {
		build()
	}
	b.ReportMetric(float64(after.HeapAlloc-before.HeapAlloc)/float64(ptrs), "kept-B/PTR")
}

func values[V any](m map[string]V) []any {
	var out []any
	for _, v := range m {
		out = append(out, v)
	}
	return out
}
