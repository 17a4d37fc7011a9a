package dispatch

import (
	"fmt"
	"net/netip"
	"slices"
	"testing"

	"github.com/miekg/dns"
	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"

	"github.com/shardns/shardns/cluster/wire"
	"github.com/shardns/shardns/model"
	"github.com/shardns/shardns/zone"
)

// meshSource holds the mesh zone test.global.: *.test.global for every
// namespace, db.test.global for tenant-a alone.
func meshSource() (Source, *zone.Static) {
	cfg := &zone.Config{Domains: zone.Domains{Cluster: []string{"cluster.local."}}, TTL: 5, MeshTTL: 30,
		MeshZones: []string{"global."}}
	cfg.Prepare()
	addr := func(s string) []netip.Addr { return []netip.Addr{netip.MustParseAddr(s)} }
	view := zone.NewStatic(cfg, []any{
		&model.ServiceEntry{Namespace: "default", Name: "mesh", Hosts: []string{"*.test.global"}, Addresses: addr("127.255.0.2")},
		&model.ServiceEntry{Namespace: "tenant-a", Name: "db", Hosts: []string{"db.test.global"}, Addresses: addr("6.6.6.8"),
			ExportTo: []string{"."}},
	}, true)
	return func() (*zone.Config, zone.Reader) { return cfg, view }, view
}

// An owner answers a question with a namespace from what that namespace
// sees; without one, or for another namespace, from what every one sees.
func TestAnswerForNamespace(t *testing.T) {
	source, _ := meshSource()
	for _, c := range []struct{ ns, want string }{
		{"", "127.255.0.2"}, {"tenant-b", "127.255.0.2"}, {"tenant-a", "6.6.6.8"},
	} {
		r := Answer(source, &wire.ZoneQuery{Id: 1, Zone: "test.global.", Name: "db.test.global.", Qtype: uint32(dns.TypeA), Namespace: c.ns})
		m := new(dns.Msg)
		if !r.Served || m.Unpack(r.Msg) != nil || len(m.Answer) != 1 || m.Answer[0].(*dns.A).A.String() != c.want {
			t.Errorf("namespace %q: served %v, %v; want %s", c.ns, r.Served, m.Answer, c.want)
		}
	}
}

// The ring server tells the mesh names of its directory, once per
// version: a node-local process that holds them is told only the version.
func TestRingServerTellsMeshNames(t *testing.T) {
	_, view := meshSource()
	s := &meshServer{}
	if s.view() != nil {
		t.Fatal("a server without a source tells names")
	}
	var source MeshSource = view.Directory
	s.source.Store(&source)
	v := s.view()
	want := []string{"*.test.global.", "tenant-a/db.test.global."}
	if v == nil || !slices.Equal(v.names, want) || v.version == 0 {
		t.Fatalf("told %+v, want names %v and a version", v, want)
	}
	c := &RingClient{}
	c.takeMesh(0, v.version, v.names)
	if m := c.Mesh(); m == nil || m.Version != v.version || !slices.Equal(m.Names, want) {
		t.Fatalf("the client keeps %+v", m)
	}
	c.takeMesh(v.version, v.version, nil) // same version: no names sent, the kept ones stay
	if m := c.Mesh(); !slices.Equal(m.Names, want) {
		t.Fatalf("after a reply for the same version the client keeps %v", m.Names)
	}
}

// A directory of more mesh names than one reply should carry is told as
// none (node-local processes then forward mesh names), and counted once.
func TestRingServerWithholdsTooManyMeshNames(t *testing.T) {
	cfg := &zone.Config{Domains: zone.Domains{Cluster: []string{"cluster.local."}}, TTL: 5}
	cfg.Prepare()
	names := map[string]struct{}{}
	for i := 0; len(names)*len("service-00000.a-long-mesh-domain.global.") <= maxMeshBytes; i++ {
		names[fmt.Sprintf("service-%05d.a-long-mesh-domain.global.", i)] = struct{}{}
	}
	dir := zone.NewDirectory(cfg, map[string]struct{}{}, true, 1).WithMesh(names)
	withheld := prometheus.NewCounter(prometheus.CounterOpts{Name: "withheld"})
	c := &RingClient{server: &ringServer{}}
	c.SetMeshSource(func() *zone.Directory { return dir }, withheld.Inc)
	for range 3 {
		if v := c.server.mesh.view(); v == nil || v.version == 0 || len(v.names) != 0 {
			t.Fatalf("told %d names of %d, want none and a version", len(v.names), len(names))
		}
	}
	var m dto.Metric
	if err := withheld.Write(&m); err != nil || m.GetCounter().GetValue() != 1 {
		got := m.GetCounter().GetValue()
		t.Fatalf("withheld counted %v times (%v), want once for the one directory", got, err)
	}
}
