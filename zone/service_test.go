package zone

import (
	"fmt"
	"maps"
	"math/rand/v2"
	"net/netip"
	"slices"
	"strings"
	"testing"

	"github.com/shardns/shardns/model"
)

// names lists every name s holds records for, sorted.
func (s *Snapshot) names() []string {
	out := slices.Collect(maps.Keys(s.nodes))
	for label, p := range s.parts {
		base := label + "." + s.Key
		for i := range p.nameCount() {
			if n := p.name(i); n.start == n.end {
				out = append(out, base)
			} else {
				out = append(out, p.text(n.start, n.end)+"."+base)
			}
		}
	}
	slices.Sort(out)
	return out
}

// dump is every record s answers with, name by name: what a client can
// ask of it.
func (s *Snapshot) dump(t *testing.T) []string {
	var out []string
	for _, name := range s.names() {
		r, ok := s.lookup(name)
		if !ok {
			t.Fatalf("%s is held but not found", name)
		}
		rrs := append(r.addresses(name, false), r.addresses(name, true)...)
		answer, extra := r.srv(name)
		rrs = append(append(rrs, answer...), extra...)
		if c := r.cname(name); c != nil {
			rrs = append(rrs, c)
		}
		for _, rr := range rrs {
			out = append(out, rr.String())
		}
	}
	return append(out, fmt.Sprintf("%d records", s.Records()))
}

// A service zone updated one service at a time answers exactly as the
// zone built whole from the same objects: every name, record, SRV weight
// and additional record, through services that appear, change, lose
// their endpoints, move slices between them, differ in case only, and go.
func TestUpdatedServiceZoneAnswersAsABuildOfItsSources(t *testing.T) {
	cfg := testConfig()
	key := ServiceZoneKey("bench", cl)
	services, endpointSlices := benchNamespace()
	snap := BuildServiceZone(cfg, key, cl, 1, services, endpointSlices)
	rng := rand.New(rand.NewPCG(7, 21))
	http := model.Port{Name: "http", Protocol: "TCP", Port: 80}
	for step := range 400 {
		changed := map[string]bool{}
		for range 1 + rng.IntN(3) {
			i := rng.IntN(120) // some names have no Service, or no slice, yet
			name := fmt.Sprintf("svc%d", i)
			switch rng.IntN(7) {
			case 0: // a new address, or the endpoint not ready
				sl := endpointSlices[name+"-1"]
				if sl == nil {
					continue
				}
				sl = cloneSlice(sl)
				e := &sl.Endpoints[rng.IntN(len(sl.Endpoints))]
				e.Addresses = []netip.Addr{netip.AddrFrom4([4]byte{10, 201, byte(step), byte(i)})}
				e.Ready = rng.IntN(4) > 0
				endpointSlices[sl.Name] = sl
				changed[strings.ToLower(sl.ServiceName)] = true
			case 1: // the slice moves to another service
				sl := endpointSlices[name+"-1"]
				if sl == nil {
					continue
				}
				changed[strings.ToLower(sl.ServiceName)] = true
				sl = cloneSlice(sl)
				sl.ServiceName = fmt.Sprintf("svc%d", rng.IntN(120))
				endpointSlices[sl.Name] = sl
				changed[strings.ToLower(sl.ServiceName)] = true
			case 2: // the service goes
				delete(services, name)
				changed[name] = true
			case 3: // a service of that name, of any type, with IPv6 too
				svc := &model.Service{Namespace: "bench", Name: name, Ports: []model.Port{http, {Name: "dns", Protocol: "UDP", Port: 53}},
					ClusterIPs: []netip.Addr{netip.AddrFrom4([4]byte{10, 97, byte(step), byte(i)}), netip.MustParseAddr("fd00::1")}}
				switch rng.IntN(3) {
				case 0:
					svc.Type, svc.ClusterIPs = model.ServiceHeadless, nil
				case 1:
					svc.Type, svc.ExternalName = model.ServiceExternalName, "svc1.bench.svc.cluster.local"
				}
				services[name] = svc
				changed[name] = true
			case 4: // a service whose name differs in case only
				upper := strings.ToUpper(name[:1]) + name[1:]
				if rng.IntN(2) == 0 {
					services[upper] = &model.Service{Namespace: "bench", Name: upper, ClusterIPs: []netip.Addr{netip.AddrFrom4([4]byte{10, 98, 0, byte(i)})}}
				} else {
					delete(services, upper)
				}
				changed[name] = true
			case 5: // a second slice, with endpoints of no ports
				sl := &model.EndpointSlice{Namespace: "bench", Name: name + "-2", ServiceName: name,
					Endpoints: []model.Endpoint{{Ready: true, Addresses: []netip.Addr{netip.MustParseAddr(fmt.Sprintf("fd00:2::%x", i+1))}}}}
				if old := endpointSlices[sl.Name]; old != nil {
					changed[strings.ToLower(old.ServiceName)] = true
				}
				endpointSlices[sl.Name] = sl
				changed[name] = true
			case 6: // the slice goes
				if sl := endpointSlices[name+"-1"]; sl != nil {
					delete(endpointSlices, sl.Name)
					changed[strings.ToLower(sl.ServiceName)] = true
				}
			}
		}
		snap = UpdateServiceZone(cfg, snap, uint32(step+2), sourcesOf(changed, services, endpointSlices))
		whole := BuildServiceZone(cfg, key, cl, uint32(step+2), services, endpointSlices)
		if got, want := snap.dump(t), whole.dump(t); !slices.Equal(got, want) {
			t.Fatalf("step %d: the updated zone holds\n%s\nthe zone built whole\n%s", step,
				strings.Join(got, "\n"), strings.Join(want, "\n"))
		}
	}
}

// sourcesOf gathers the sources of the changed labels, as the zone actor
// does.
func sourcesOf(changed map[string]bool, services map[string]*model.Service, endpointSlices map[string]*model.EndpointSlice) map[string]ServiceSources {
	out := map[string]ServiceSources{}
	for label := range changed {
		out[label] = ServiceSources{}
	}
	for _, name := range sortedKeys(services) {
		if src, ok := out[strings.ToLower(name)]; ok {
			src.Services = append(src.Services, services[name])
			out[strings.ToLower(name)] = src
		}
	}
	for _, name := range sortedKeys(endpointSlices) {
		label := strings.ToLower(endpointSlices[name].ServiceName)
		if src, ok := out[label]; ok {
			src.Slices = append(src.Slices, endpointSlices[name])
			out[label] = src
		}
	}
	return out
}

func cloneSlice(sl *model.EndpointSlice) *model.EndpointSlice {
	c := *sl
	c.Endpoints = slices.Clone(sl.Endpoints)
	return &c
}

// Names in a service zone are found through their service's part: the
// label before the zone key. Names that only look like a service's, the
// apex and names outside the zone are not found.
func TestServiceZoneFindsNamesByService(t *testing.T) {
	cfg := testConfig()
	v := NewStatic(cfg, testCluster(), true)
	s := v.Zone(ServiceZoneKey("ns1", cl))
	for _, name := range []string{"svc1.ns1.svc.cluster.local.", "_http._tcp.svc1.ns1.svc.cluster.local.",
		"b1.svc1.ns1.svc.cluster.local.", "web-0.hdls.ns1.svc.cluster.local."} {
		if _, ok := s.lookup(name); !ok {
			t.Errorf("%s is not found", name)
		}
	}
	for _, name := range []string{"ns1.svc.cluster.local.", "svc.cluster.local.", "svc1.ns2.svc.cluster.local.",
		"xsvc1.ns1.svc.cluster.local.", "b1.svc1ns1.svc.cluster.local.", "svc1.svc1.ns1.svc.cluster.local.",
		".svc1.ns1.svc.cluster.local.", "svc1.ns1.svc.cluster.local", "b1.svc1.ns1.svc.cluster.local.x."} {
		if _, ok := s.lookup(name); ok {
			t.Errorf("%s is found", name)
		}
	}
}

// BenchmarkUpdateServiceZone changes one endpoint of one service of the
// memory bench's namespace, as the churn does: what an EndpointSlice
// update costs the zone it falls in.
func BenchmarkUpdateServiceZone(b *testing.B) {
	cfg := testConfig()
	services, endpointSlices := benchNamespace()
	s := BuildServiceZone(cfg, ServiceZoneKey("bench", cl), cl, 1, services, endpointSlices)
	b.ReportAllocs()
	n := 0
	for b.Loop() {
		n++
		name := fmt.Sprintf("svc%d", n%100)
		sl := cloneSlice(endpointSlices[name+"-1"])
		sl.Endpoints[0].Addresses = []netip.Addr{netip.AddrFrom4([4]byte{10, 201, byte(n >> 8), byte(n)})}
		endpointSlices[sl.Name] = sl
		src := ServiceSources{Services: []*model.Service{services[name]}, Slices: []*model.EndpointSlice{sl}}
		s = UpdateServiceZone(cfg, s, uint32(n+1), map[string]ServiceSources{name: src})
	}
}

// A part holds its names and targets as their labels before the
// service's base, and a text ending in a dot as a whole name: relative
// keeps whole what is not below the base and what would read back as
// whole, so every name and target is written back as it was.
func TestPartNamesRelativeToTheirBase(t *testing.T) {
	const base = "db.ns1.svc.cluster.local."
	for _, c := range []struct{ name, want string }{
		{base, ""},
		{"web-0." + base, "web-0"},
		{"_http._tcp." + base, "_http._tcp"},
		{"a.b." + base, "a.b"},
		{"example.com.", "example.com."}, // an ExternalName's target
		{"xdb.ns1.svc.cluster.local.", "xdb.ns1.svc.cluster.local."}, // not below the base
		{"." + base, "." + base},                                     // an empty label before the base
		{"x.." + base, "x.." + base},                                 // a hostname "x."
	} {
		if got := relative(c.name, base); got != c.want {
			t.Errorf("relative(%q) = %q, want %q", c.name, got, c.want)
		}
		// A part whose base is a CNAME to c.name reads it back whole.
		b := newBuilder()
		b.part = append(b.part, builtName{base, b.begin(cnameNode)})
		b.ref(c.name)
		if back := b.finishPart(base).targets(base); len(back) != 1 || back[0] != c.name {
			t.Errorf("%q reads back as %q", c.name, back)
		}
	}
}
