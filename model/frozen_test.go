package model

import (
	"fmt"
	"net/netip"
	"reflect"
	"strings"
	"testing"
)

func addrs(s ...string) []netip.Addr {
	var out []netip.Addr
	for _, a := range s {
		out = append(out, netip.MustParseAddr(a))
	}
	return out
}

// frozenSamples covers every field the encoding carries.
func frozenSamples() []any {
	id := func(name string) (string, string, string) { return "ns", name, "42" }
	svc := func(name string) *Service {
		ns, n, rv := id(name)
		return &Service{Namespace: ns, Name: n, ResourceVersion: rv}
	}
	dual := svc("dual")
	dual.ClusterIPs = addrs("10.96.0.10", "fd00::a")
	dual.Ports = []Port{{Name: "dns", Protocol: "UDP", Port: 53}, {Name: "dns-tcp", Protocol: "TCP", Port: 53},
		{Name: "", Protocol: "SCTP", Port: 65535}, {Name: "odd", Protocol: "QUIC", Port: 1}}
	headless := svc("headless")
	headless.Type = ServiceHeadless
	nearby := svc("close")
	nearby.Type, nearby.PreferClose = ServiceHeadless, true
	external := svc("external")
	external.Type, external.ExternalName = ServiceExternalName, "db.example.org."
	// k8s_external answers these: spec.externalIPs, then the load
	// balancer's ingress IPs, on a ClusterIP and a headless service.
	balanced := svc("balanced")
	balanced.ClusterIPs = addrs("10.96.0.11")
	balanced.Ports = []Port{{Name: "http", Protocol: "TCP", Port: 80}}
	balanced.ExternalIPs = addrs("192.0.2.1", "2001:db8::1", "198.51.100.7")
	// An AWS-style load balancer: its ingress hostnames around an IP.
	elb := svc("elb")
	elb.Ports = []Port{{Name: "http", Protocol: "TCP", Port: 80}}
	elb.ExternalIPs = addrs("203.0.113.9")
	elb.ExternalHosts = []ExternalHost{{Name: "a1.elb.example.net.", After: 0}, {Name: "a2.elb.example.net.", After: 1}}
	hostOnly := svc("host-only")
	hostOnly.ExternalHosts = []ExternalHost{{Name: "lb.example.net.", After: 0}}
	headlessExternal := svc("headless-external")
	headlessExternal.Type, headlessExternal.ExternalIPs = ServiceHeadless, addrs("192.0.2.2")
	slice := &EndpointSlice{Namespace: "ns", Name: "web-abcde", ResourceVersion: "7", ServiceName: "web",
		Ports: []Port{{Name: "http", Protocol: "TCP", Port: 8080}},
		Endpoints: []Endpoint{
			{Addresses: addrs("10.1.2.3"), Hostname: "web-0", TargetPodName: "web-0", Ready: true},
			{Addresses: addrs("fd00::1:2", "10.1.2.4"), TargetPodName: "web-7f9c-xk2p4"},
			{Addresses: addrs("10.1.2.5"), Ready: true},
			{Addresses: addrs("10.1.2.6"), Ready: true, Zone: "zone-a", ForZones: []string{"zone-a", "zone-b"}},
			{Addresses: addrs("10.1.2.7"), Ready: true, Zone: "zone-b"},
		}}
	empty := &EndpointSlice{Namespace: "ns", Name: "empty", ResourceVersion: "1", ServiceName: "idle",
		Endpoints: []Endpoint{}}
	pod := &Pod{Namespace: "ns", Name: "web-0", ResourceVersion: "9", IPs: addrs("10.1.2.3", "fd00::1:3")}
	// The Multi-Cluster Services API's: a ClusterSetIP import, a headless
	// one, and a slice imported from another cluster.
	imported := &ServiceImport{Namespace: "ns", Name: "web", ResourceVersion: "3", IPs: addrs("10.42.0.1", "fd00:42::1"),
		Ports: []Port{{Name: "http", Protocol: "TCP", Port: 80}}}
	importedHeadless := &ServiceImport{Namespace: "ns", Name: "db", ResourceVersion: "4", Headless: true}
	remote := &MultiClusterSlice{EndpointSlice: *slice, ClusterID: "east"}
	remote.Name = "web-east-abcde"
	return []any{dual, headless, nearby, external, balanced, elb, hostOnly, headlessExternal, slice, empty, pod, imported, importedHeadless, remote}
}

// identity is what the holder of a frozen object keeps beside it.
func identity(obj any) (namespace, name, resourceVersion string) {
	switch o := obj.(type) {
	case *Service:
		return o.Namespace, o.Name, o.ResourceVersion
	case *EndpointSlice:
		return o.Namespace, o.Name, o.ResourceVersion
	case *Pod:
		return o.Namespace, o.Name, o.ResourceVersion
	case *ServiceImport:
		return o.Namespace, o.Name, o.ResourceVersion
	case *MultiClusterSlice:
		return o.Namespace, o.Name, o.ResourceVersion
	}
	return "", "", ""
}

// sameModel compares model objects, taking nil and empty lists as equal:
// the records built from them are the same.
func sameModel(a, b any) bool {
	return reflect.DeepEqual(normalized(a), normalized(b))
}

func normalized(obj any) any {
	nilIfEmpty := func(ports []Port) []Port {
		if len(ports) == 0 {
			return nil
		}
		return ports
	}
	switch o := obj.(type) {
	case *Service:
		c := *o
		c.Ports = nilIfEmpty(c.Ports)
		if len(c.ClusterIPs) == 0 {
			c.ClusterIPs = nil
		}
		return &c
	case *EndpointSlice:
		c := *o
		c.Ports = nilIfEmpty(c.Ports)
		c.Endpoints = nil
		for _, e := range o.Endpoints {
			if len(e.Addresses) == 0 {
				e.Addresses = nil
			}
			c.Endpoints = append(c.Endpoints, e)
		}
		return &c
	case *Pod:
		c := *o
		if len(c.IPs) == 0 {
			c.IPs = nil
		}
		return &c
	case *ServiceImport:
		c := *o
		c.Ports = nilIfEmpty(c.Ports)
		if len(c.IPs) == 0 {
			c.IPs = nil
		}
		return &c
	case *MultiClusterSlice:
		c := *o
		c.EndpointSlice = *normalized(&o.EndpointSlice).(*EndpointSlice)
		return &c
	}
	return obj
}

// A frozen object thaws into what was frozen, and a cut one never does.
func TestFrozenRoundTrip(t *testing.T) {
	for _, obj := range frozenSamples() {
		t.Run(fmt.Sprintf("%T", obj), func(t *testing.T) {
			f, ok := Freeze(obj)
			if !ok || f.Kind() == 0 {
				t.Fatalf("%T did not freeze", obj)
			}
			got, err := f.Thaw(identity(obj))
			if err != nil {
				t.Fatal(err)
			}
			if !sameModel(got, obj) {
				t.Fatalf("thawed %+v\nfroze   %+v", got, obj)
			}
			want := ""
			switch sl := obj.(type) {
			case *EndpointSlice:
				want = sl.ServiceName
			case *MultiClusterSlice:
				want = sl.ServiceName
			}
			if f.ServiceName() != want {
				t.Fatalf("ServiceName() = %q, want %q", f.ServiceName(), want)
			}
			// A service's external IPs are written last and only when it
			// has some, its ingress hostnames after them, so the encodings
			// without either are whole.
			whole := map[int]bool{}
			if svc, ok := obj.(*Service); ok && (len(svc.ExternalIPs) > 0 || len(svc.ExternalHosts) > 0) {
				plain := *svc
				plain.ExternalIPs, plain.ExternalHosts = nil, nil
				p, _ := Freeze(&plain)
				whole[len(p)] = true
				if len(svc.ExternalHosts) > 0 {
					whole[len(p)+len(appendAddrs(nil, svc.ExternalIPs))] = true
				}
			}
			for cut := range len(f) {
				if _, err := f[:cut].Thaw(identity(obj)); err == nil && !whole[cut] {
					t.Fatalf("a frozen object cut to %d of %d bytes thawed without error", cut, len(f))
				}
			}
		})
	}
	if _, ok := Freeze(&Namespace{Name: "ns"}); ok {
		t.Fatal("a namespace froze; only Services, EndpointSlices, Pods and the MCS objects are kept frozen")
	}
}

// Whatever the bytes, thawing returns an object or an error; an object
// that thaws freezes and thaws again to itself.
func FuzzThaw(f *testing.F) {
	for _, obj := range frozenSamples() {
		frozen, _ := Freeze(obj)
		f.Add([]byte(frozen))
	}
	f.Add([]byte{byte(KindEndpointSlice), 0, 0, 0xff, 0xff, 0xff, 0xff, 0x0f})
	f.Add([]byte{byte(KindPod), 1, 4, 10, 0, 0, 1, 0xff})
	f.Fuzz(func(t *testing.T, b []byte) {
		obj, err := Frozen(b).Thaw("ns", "n", "1")
		if sl, ok := obj.(*EndpointSlice); ok && err == nil && Frozen(b).ServiceName() != sl.ServiceName {
			t.Fatalf("ServiceName() = %q, the thawed slice's %q", Frozen(b).ServiceName(), sl.ServiceName)
		}
		if err != nil {
			return
		}
		frozen, ok := Freeze(obj)
		if !ok {
			t.Fatalf("thawed %+v, which does not freeze", obj)
		}
		again, err := frozen.Thaw("ns", "n", "1")
		if err != nil || !sameModel(again, obj) {
			t.Fatalf("thawed %+v; frozen again it thawed to %+v (%v)", obj, again, err)
		}
	})
}

// BenchmarkThaw thaws an EndpointSlice of ten endpoints and its Service,
// what a zone build pays per service for keeping them frozen (compare
// zone.BenchmarkBuildServiceZone, per service of the same shape).
func BenchmarkThaw(b *testing.B) {
	slice := &EndpointSlice{Namespace: "bench", Name: "svc1-1", ServiceName: "svc1",
		Ports: []Port{{Name: "http", Protocol: "TCP", Port: 80}}}
	for e := range 10 {
		slice.Endpoints = append(slice.Endpoints, Endpoint{Ready: true, Hostname: fmt.Sprintf("host-%d", e),
			TargetPodName: fmt.Sprintf("svc1-%d", e), Addresses: []netip.Addr{netip.AddrFrom4([4]byte{10, 200, 0, byte(e + 1)})}})
	}
	svc := &Service{Namespace: "bench", Name: "svc1", ClusterIPs: []netip.Addr{netip.MustParseAddr("10.96.0.1")},
		Ports: []Port{{Name: "http", Protocol: "TCP", Port: 80}}}
	frozenSlice, _ := Freeze(slice)
	frozenService, _ := Freeze(svc)
	b.ReportAllocs()
	for b.Loop() {
		if _, err := frozenSlice.Thaw("bench", "svc1-1", ""); err != nil {
			b.Fatal(err)
		}
		if _, err := frozenService.Thaw("bench", "svc1", ""); err != nil {
			b.Fatal(err)
		}
	}
}

// A service without external IPs freezes to the bytes it did before
// they were kept: the thousands of services that have none pay nothing.
func TestFrozenServiceWithoutExternalIPsCostsNothing(t *testing.T) {
	plain := &Service{Name: "web", ClusterIPs: addrs("10.96.0.1"), Ports: []Port{{Name: "http", Protocol: "TCP", Port: 80}}}
	with := *plain
	with.ExternalIPs = addrs("192.0.2.1")
	a, _ := Freeze(plain)
	b, _ := Freeze(&with)
	if len(b) != len(a)+1+1+4 { // count, length, four bytes
		t.Errorf("frozen sizes %d and %d: want the external IP to add 6 bytes, nothing else", len(a), len(b))
	}
	if !strings.HasPrefix(string(b), string(a)) {
		t.Error("a service with external IPs does not extend the encoding of one without")
	}
}
