package zone

import (
	"net/netip"
	"slices"
	"testing"

	"github.com/miekg/dns"

	"github.com/shardns/shardns/model"
)

func meshConfig() *Config {
	cfg := testConfig()
	cfg.MeshTTL = 30
	cfg.MeshZones = []string{"."} // every name delegated: these tests are about answers (meshpolicy_test.go: which)
	return cfg
}

func serviceEntry(ns, name string, hosts []string, addrs ...string) *model.ServiceEntry {
	return &model.ServiceEntry{Namespace: ns, Name: name, Hosts: hosts, Addresses: ips(addrs...)}
}

// testMesh is a set of ServiceEntries covering every mesh answer kind,
// next to the Kubernetes objects of testCluster.
func testMesh() []any {
	allocated := &model.ServiceEntry{Namespace: "ns1", Name: "auto", Hosts: []string{"auto.example.org", "other.example.org"},
		StatusAddresses: map[string][]netip.Addr{"auto.example.org": ips("240.240.0.1", "2001:2::1")}}
	return append(testCluster(),
		serviceEntry("ns1", "global", []string{"*.test.global"}, "127.255.0.2"),
		serviceEntry("ns1", "exact", []string{"service1.test.global"}, "127.255.0.9"),
		serviceEntry("ns1", "deep", []string{"*.b.test.global"}, "127.255.1.1"),
		serviceEntry("ns1", "dual", []string{"db.example.com"}, "10.10.0.1", "fd00:10::1"),
		serviceEntry("ns2", "more", []string{"db.example.com", "v6.example.com"}, "10.10.0.2", "fd00:10::2"),
		serviceEntry("ns1", "nothing", []string{"noaddr.example.com"}),
		allocated,
		serviceEntry("ns1", "k8s", []string{"svc1.ns1.svc.cluster.local", "mesh.cluster.local", "*.svc.cluster.local"}, "10.99.0.1"),
		&model.ServiceEntry{Namespace: "ns1", Name: "private", Hosts: []string{"private.example.com"},
			Addresses: ips("10.20.0.1"), ExportTo: []string{"."}},
		&model.ServiceEntry{Namespace: "ns1", Name: "some", Hosts: []string{"some.example.com"},
			Addresses: ips("10.20.0.2"), ExportTo: []string{"ns1", "ns2"}},
		&model.ServiceEntry{Namespace: "ns1", Name: "public", Hosts: []string{"public.example.com"},
			Addresses: ips("10.20.0.3"), ExportTo: []string{".", "*"}},
	)
}

func TestAnswerMesh(t *testing.T) {
	cfg := meshConfig()
	v := buildView(t, cfg, true, testMesh())
	runCases(t, v, cfg, []tc{
		// The Istio example: *.test.global with address 127.255.0.2.
		{qname: "service2.test.global.", qtype: A, answer: []string{"service2.test.global. 30 IN A 127.255.0.2"}},
		// Wildcards cover every depth below their domain, not the domain.
		{qname: "x.y.z.test.global.", qtype: A, answer: []string{"x.y.z.test.global. 30 IN A 127.255.0.2"}},
		// An exact host wins over a wildcard, and covers nothing below it.
		{qname: "service1.test.global.", qtype: A, answer: []string{"service1.test.global. 30 IN A 127.255.0.9"}},
		{qname: "a.service1.test.global.", qtype: A, answer: []string{"a.service1.test.global. 30 IN A 127.255.0.2"}},
		// The nearest wildcard wins.
		{qname: "a.b.test.global.", qtype: A, answer: []string{"a.b.test.global. 30 IN A 127.255.1.1"}},
		{qname: "b.test.global.", qtype: A, answer: []string{"b.test.global. 30 IN A 127.255.0.2"}},
		// Both families; entries declaring the same host add up.
		{qname: "db.example.com.", qtype: A, answer: []string{
			"db.example.com. 30 IN A 10.10.0.1", "db.example.com. 30 IN A 10.10.0.2"}},
		{qname: "db.example.com.", qtype: AAAA, answer: []string{
			"db.example.com. 30 IN AAAA fd00:10::1", "db.example.com. 30 IN AAAA fd00:10::2"}},
		// Wrong family and other types: NOERROR, empty, no SOA (as Istio's proxy).
		{qname: "service1.test.global.", qtype: AAAA},
		{qname: "service2.test.global.", qtype: AAAA},
		{qname: "db.example.com.", qtype: MX},
		{qname: "db.example.com.", qtype: TXT},
		// Allocated addresses (status.addresses) of the host asked.
		{qname: "auto.example.org.", qtype: A, answer: []string{"auto.example.org. 30 IN A 240.240.0.1"}},
		{qname: "auto.example.org.", qtype: AAAA, answer: []string{"auto.example.org. 30 IN AAAA 2001:2::1"}},
		// Kubernetes names keep their Kubernetes answers.
		{qname: "svc1.ns1.svc.cluster.local.", qtype: A, answer: []string{"svc1.ns1.svc.cluster.local. 5 IN A 10.0.0.1"}},
		{qname: "mesh.cluster.local.", qtype: A, rcode: NX, soa: cl},
		{qname: "nope.ns1.svc.cluster.local.", qtype: A, rcode: NX, soa: cl},
		{qname: "public.example.com.", qtype: A, answer: []string{"public.example.com. 30 IN A 10.20.0.3"}},
		{qname: "db.example.com.", qtype: dns.TypeAXFR, rcode: dns.RcodeRefused},
	})
}

// Names under a mesh zone that match no host are not answered here: they
// go to the forwarder, as from Istio's proxy.
func TestAnswerMeshExternal(t *testing.T) {
	cfg := meshConfig()
	v := buildView(t, cfg, true, testMesh())
	for _, name := range []string{
		"test.global.",           // the wildcard's own domain
		"global.",                //
		"x.db.example.com.",      // below an exact host
		"example.com.",           // a zone key, not a host
		"unknown.example.com.",   // a sibling of hosts
		"noaddr.example.com.",    // a host without addresses
		"other.example.org.",     // allocated addresses are per host
		"private.example.com.",   // exportTo "."
		"some.example.com.",      // exportTo namespaces
		"elsewhere.example.net.", //
	} {
		for _, qt := range []uint16{A, AAAA, MX} {
			if r := Answer(cfg, v, Question{Name: name, Type: qt}); !r.External {
				t.Errorf("%s %s: answered %+v, want external", name, dns.TypeToString[qt], r)
			}
		}
	}
}

// A mesh zone held by other replicas is asked there; a replica that
// knows the name but holds no zone for it yet forwards it.
func TestAnswerMeshRemote(t *testing.T) {
	cfg := meshConfig()
	sv := NewStatic(cfg, testMesh(), true)
	v := &remoteView{Static: sv, remote: map[string][]string{"test.global.": {"b", "c"}, "example.com.": {}}}
	delete(sv.zones, "test.global.")
	delete(sv.zones, "example.com.")
	r := Answer(cfg, v, Question{Name: "x.test.global.", Type: A})
	if !slices.Equal(r.Remote, []string{"b", "c"}) || r.Zone != "test.global." {
		t.Errorf("x.test.global.: %+v, want remote b, c for zone test.global.", r)
	}
	if r := Answer(cfg, v, Question{Name: "db.example.com.", Type: A}); r.Rcode != dns.RcodeServerFailure {
		t.Errorf("db.example.com. with no owner reachable: %+v, want SERVFAIL", r)
	}
	delete(v.remote, "example.com.")
	if r := Answer(cfg, v, Question{Name: "db.example.com.", Type: A}); !r.External {
		t.Errorf("db.example.com. before its zone exists: %+v, want external", r)
	}
	if got := KeyOf(cfg, v, "x.test.global."); got != "test.global." {
		t.Errorf("KeyOf(x.test.global.) = %q", got)
	}
	if got := KeyOf(cfg, v, "svc1.ns1.svc.cluster.local."); got != "ns1.svc.cluster.local." {
		t.Errorf("KeyOf(svc1.ns1.svc.cluster.local.) = %q", got)
	}
	if got := KeyOf(cfg, v, "example.net."); got != "" {
		t.Errorf("KeyOf(example.net.) = %q", got)
	}
}

type remoteView struct {
	*Static
	remote map[string][]string
}

func (v *remoteView) Remote(key string) []string { return v.remote[key] }

func TestMeshHosts(t *testing.T) {
	cfg := meshConfig()
	cases := []struct {
		name    string
		entry   *model.ServiceEntry
		want    map[string][]string // zone key → host names
		skipped []string
	}{
		{"wildcard and exact share a zone", serviceEntry("a", "e", []string{"*.x.y", "A.x.y"}, "10.0.0.1"),
			map[string][]string{"x.y.": {"*.x.y.", "a.x.y."}}, nil},
		{"single label", serviceEntry("a", "e", []string{"short"}, "10.0.0.1"), map[string][]string{".": {"short."}}, nil},
		{"cluster domain", serviceEntry("a", "e", []string{"x.cluster.local", "*.cluster.local", "ok.example"}, "10.0.0.1"),
			map[string][]string{"example.": {"ok.example."}}, []string{"x.cluster.local", "*.cluster.local"}},
		{"reverse zone", serviceEntry("a", "e", []string{"1.0.0.10.in-addr.arpa"}, "10.0.0.1"), map[string][]string{},
			[]string{"1.0.0.10.in-addr.arpa"}},
		{"bare wildcard", serviceEntry("a", "e", []string{"*", "a.*.b"}, "10.0.0.1"), map[string][]string{}, []string{"*", "a.*.b"}},
		{"no address", serviceEntry("a", "e", []string{"x.y"}), map[string][]string{}, nil},
		{"exported to a namespace", &model.ServiceEntry{Hosts: []string{"x.y"}, Addresses: ips("10.0.0.1"), ExportTo: []string{"a"}},
			map[string][]string{"y.": {"x.y."}}, nil},
		{"exported to nobody", &model.ServiceEntry{Hosts: []string{"x.y"}, Addresses: ips("10.0.0.1"), ExportTo: []string{"~"}},
			nil, []string{"x.y"}},
		{"exported to all", &model.ServiceEntry{Hosts: []string{"x.y"}, Addresses: ips("10.0.0.1"), ExportTo: []string{"*"}},
			map[string][]string{"y.": {"x.y."}}, nil},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			got, skipped := MeshHosts(cfg, c.entry)
			names := map[string][]string{}
			for k, hs := range got {
				for _, h := range hs {
					names[k] = append(names[k], h.Name)
				}
			}
			if c.want != nil && len(names) != len(c.want) {
				t.Errorf("zones = %v, want %v", names, c.want)
			}
			for k, want := range c.want {
				if !slices.Equal(names[k], want) {
					t.Errorf("zone %s: %v, want %v", k, names[k], want)
				}
			}
			var sk []string
			for _, s := range skipped {
				sk = append(sk, s.Host)
			}
			if !slices.Equal(sk, c.skipped) {
				t.Errorf("skipped = %v, want %v", skipped, c.skipped)
			}
		})
	}
}

// A mesh name's exact host is answered without allocating, like cluster
// names; a wildcard copies its records under the name asked.
func BenchmarkAnswerMesh(b *testing.B) {
	cfg := meshConfig()
	v := NewStatic(cfg, testMesh(), true)
	for _, q := range []Question{{Name: "db.example.com.", Type: A}, {Name: "x.test.global.", Type: A}, {Name: "www.example.net.", Type: A}} {
		b.Run(q.Name, func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				Answer(cfg, v, q)
			}
		})
	}
}
