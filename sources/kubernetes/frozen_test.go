package kubernetes

import (
	"fmt"
	"io"
	"log/slog"
	"net/netip"
	"reflect"
	"testing"

	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/shardns/shardns/actors/zones"
	"github.com/shardns/shardns/cluster"
	"github.com/shardns/shardns/model"
	"github.com/shardns/shardns/zone"
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
	svc := func(name string) *model.Service {
		ns, n, rv := id(name)
		return &model.Service{Namespace: ns, Name: n, ResourceVersion: rv}
	}
	dual := svc("dual")
	dual.ClusterIPs = addrs("10.96.0.10", "fd00::a")
	dual.Ports = []model.Port{{Name: "dns", Protocol: "UDP", Port: 53}, {Name: "dns-tcp", Protocol: "TCP", Port: 53},
		{Name: "", Protocol: "SCTP", Port: 65535}, {Name: "odd", Protocol: "QUIC", Port: 1}}
	headless := svc("headless")
	headless.Type = model.ServiceHeadless
	external := svc("external")
	external.Type, external.ExternalName = model.ServiceExternalName, "db.example.org."
	slice := &model.EndpointSlice{Namespace: "ns", Name: "web-abcde", ResourceVersion: "7", ServiceName: "web",
		Ports: []model.Port{{Name: "http", Protocol: "TCP", Port: 8080}},
		Endpoints: []model.Endpoint{
			{Addresses: addrs("10.1.2.3"), Hostname: "web-0", TargetPodName: "web-0", Ready: true},
			{Addresses: addrs("fd00::1:2", "10.1.2.4"), TargetPodName: "web-7f9c-xk2p4"},
			{Addresses: addrs("10.1.2.5"), Ready: true},
		}}
	empty := &model.EndpointSlice{Namespace: "ns", Name: "empty", ResourceVersion: "1", ServiceName: "idle",
		Endpoints: []model.Endpoint{}}
	pod := &model.Pod{Namespace: "ns", Name: "web-0", ResourceVersion: "9", IPs: addrs("10.1.2.3", "fd00::1:3")}
	return []any{dual, headless, external, slice, empty, pod}
}

// identity is the cache entry a model object would sit in.
func identity(obj any) *cached {
	switch o := obj.(type) {
	case *model.Service:
		return &cached{namespace: o.Namespace, name: o.Name, resourceVersion: o.ResourceVersion}
	case *model.EndpointSlice:
		return &cached{namespace: o.Namespace, name: o.Name, resourceVersion: o.ResourceVersion}
	case *model.Pod:
		return &cached{namespace: o.Namespace, name: o.Name, resourceVersion: o.ResourceVersion}
	}
	return &cached{}
}

// sameModel compares model objects, taking nil and empty lists as equal:
// the records built from them are the same.
func sameModel(a, b any) bool {
	return reflect.DeepEqual(normalized(a), normalized(b))
}

func normalized(obj any) any {
	nilIfEmpty := func(ports []model.Port) []model.Port {
		if len(ports) == 0 {
			return nil
		}
		return ports
	}
	switch o := obj.(type) {
	case *model.Service:
		c := *o
		c.Ports = nilIfEmpty(c.Ports)
		if len(c.ClusterIPs) == 0 {
			c.ClusterIPs = nil
		}
		return &c
	case *model.EndpointSlice:
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
	case *model.Pod:
		c := *o
		if len(c.IPs) == 0 {
			c.IPs = nil
		}
		return &c
	}
	return obj
}

// A frozen object thaws into what was frozen.
func TestFrozenRoundTrip(t *testing.T) {
	for _, obj := range frozenSamples() {
		t.Run(fmt.Sprintf("%T", obj), func(t *testing.T) {
			b := freeze(obj)
			got, err := thaw(identity(obj), b)
			if err != nil {
				t.Fatal(err)
			}
			if !sameModel(got, obj) {
				t.Fatalf("thawed %+v\nfroze   %+v", got, obj)
			}
			for cut := range len(b) {
				if _, err := thaw(identity(obj), b[:cut]); err == nil {
					t.Fatalf("a frozen object cut to %d of %d bytes thawed without error", cut, len(b))
				}
			}
		})
	}
	if freeze(&model.Namespace{Name: "ns"}) != nil {
		t.Fatal("a namespace froze; only Services, EndpointSlices and Pods are kept frozen")
	}
}

// Whatever the bytes, thawing returns an object or an error; an object
// that thaws freezes and thaws again to itself.
func FuzzThaw(f *testing.F) {
	for _, obj := range frozenSamples() {
		f.Add(freeze(obj))
	}
	f.Add([]byte{byte(model.KindEndpointSlice), 0, 0, 0xff, 0xff, 0xff, 0xff, 0x0f})
	f.Fuzz(func(t *testing.T, b []byte) {
		c := &cached{namespace: "ns", name: "n", resourceVersion: "1"}
		obj, err := thaw(c, b)
		if err != nil {
			return
		}
		again, err := thaw(c, freeze(obj))
		if err != nil || !sameModel(again, obj) {
			t.Fatalf("thawed %+v; frozen again it thawed to %+v (%v)", obj, again, err)
		}
	})
}

// Objects of namespaces whose zones another replica owns are kept frozen,
// reach the zones as the same model objects, and thaw when the ring gives
// this replica their zone.
func TestSourceFreezesOtherReplicasObjects(t *testing.T) {
	cfg := &zone.Config{TTL: 5}
	cfg.Domains.Cluster = []string{"cluster.local."}
	cfg.Prepare()
	ring := cluster.NewRing("a", []cluster.Member{{Name: "a", Owner: true}, {Name: "b", Owner: true}}, 1)
	var mine, theirs string
	for i := 0; mine == "" || theirs == ""; i++ {
		ns := fmt.Sprintf("ns%d", i)
		if ring.Owns("a", zone.ServiceZoneKey(ns, "cluster.local.")) {
			mine = ns
		} else {
			theirs = ns
		}
	}
	interest := &zones.Interest{}
	interest.Set(ring, "a", cfg)
	objs := &objects{interest: interest}
	transform := transformFor(func(string) bool { return true }, objs)
	apiSlice := func(ns, rv, ip string) *discoveryv1.EndpointSlice {
		port, name := int32(80), "http"
		return &discoveryv1.EndpointSlice{
			ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "web-x", ResourceVersion: rv,
				Labels: map[string]string{discoveryv1.LabelServiceName: "web"}},
			AddressType: discoveryv1.AddressTypeIPv4,
			Ports:       []discoveryv1.EndpointPort{{Name: &name, Port: &port}},
			Endpoints: []discoveryv1.Endpoint{{Addresses: []string{ip},
				TargetRef: &corev1.ObjectReference{Kind: "Pod", Name: "web-0"}}},
		}
	}
	entry := func(obj any) *cached {
		out, err := transform(obj)
		if err != nil {
			t.Fatal(err)
		}
		return out.(*cached)
	}
	own, other := entry(apiSlice(mine, "1", "10.1.0.1")), entry(apiSlice(theirs, "1", "10.1.0.2"))
	if own.object == nil || own.frozen != nil {
		t.Fatalf("the slice of %s, whose zone this replica owns, is kept as %+v, want its model object", mine, own)
	}
	if other.object != nil || other.frozen == nil {
		t.Fatalf("the slice of %s, whose zone the other replica owns, is kept as %+v, want it frozen", theirs, other)
	}

	var sent []model.Change
	h := &handler{kind: model.KindEndpointSlice, exposed: func(string) bool { return true }, objects: objs,
		send: func(c model.Change) { sent = append(sent, c) }, log: slog.New(slog.NewTextHandler(io.Discard, nil))}
	h.OnAdd(other, true)
	want := &model.EndpointSlice{Namespace: theirs, Name: "web-x", ResourceVersion: "1", ServiceName: "web",
		Ports:     []model.Port{{Name: "http", Protocol: "TCP", Port: 80}},
		Endpoints: []model.Endpoint{{Addresses: addrs("10.1.0.2"), TargetPodName: "web-0", Ready: true}}}
	if len(sent) != 1 || !sameModel(sent[0].Object, want) {
		t.Fatalf("adding a frozen slice sent %+v, want %+v", sent, want)
	}
	sent = nil
	h.OnUpdate(other, entry(apiSlice(theirs, "2", "10.1.0.2")))
	if len(sent) != 0 {
		t.Fatalf("an update of a frozen slice that changes no record sent %+v", sent)
	}
	h.OnUpdate(other, entry(apiSlice(theirs, "3", "10.1.0.9")))
	if len(sent) != 1 || sent[0].Object.(*model.EndpointSlice).Endpoints[0].Addresses[0] != netip.MustParseAddr("10.1.0.9") {
		t.Fatalf("an update of a frozen slice to a new address sent %+v, want the new address", sent)
	}

	// The ring now gives the other namespace to this replica (it is "b").
	interest.Set(ring, "b", cfg)
	objs.resort(own)
	objs.resort(other)
	if own.object != nil || other.object == nil || !sameModel(other.object, want) {
		t.Fatalf("after the ring change: %s kept as %+v, %s as %+v; want the first frozen, the second thawed",
			mine, own, theirs, other)
	}
	// Without a ring, everything is served here.
	interest.Set(nil, "b", cfg)
	objs.resort(own)
	if own.object == nil {
		t.Fatal("with no ring, an object stays frozen")
	}
}
