package zone

import (
	"fmt"
	"slices"
	"strings"
	"testing"

	"github.com/miekg/dns"

	"github.com/shardns/shardns/model"
)

// Hosts exported to some namespaces are answered to questions of those
// namespaces only (the node tier's, which know the client's); a question
// without a namespace (a replica's listener) or of another namespace gets
// what it got before the entry existed.
func TestAnswerMeshPrivate(t *testing.T) {
	cfg := meshConfig()
	private := func(name, exportTo string, hosts []string, addr string) *model.ServiceEntry {
		return &model.ServiceEntry{Namespace: "tenant-a", Name: name, Hosts: hosts, Addresses: ips(addr), ExportTo: []string{exportTo, "tenant-c"}}
	}
	v := buildView(t, cfg, true, append(testCluster(),
		serviceEntry("default", "mesh", []string{"*.test.global"}, "127.255.0.2"),
		private("db", ".", []string{"db.test.global", "only.private.example"}, "6.6.6.8"),
		private("deep", "tenant-b", []string{"*.b.test.global"}, "6.6.6.9"),
		serviceEntry("default", "shared", []string{"shared.test.global"}, "127.255.0.3"),
		private("shared", ".", []string{"shared.test.global"}, "6.6.6.10"),
	))
	cases := []struct {
		ns, name string
		want     string // the A records' addresses; "forwarded" when external
		private  bool
	}{
		{"", "db.test.global.", "127.255.0.2", false},
		{"tenant-a", "db.test.global.", "6.6.6.8", true},
		{"tenant-c", "db.test.global.", "6.6.6.8", true},
		{"tenant-b", "db.test.global.", "127.255.0.2", false},
		{"tenant-b", "x.b.test.global.", "6.6.6.9", true},
		{"tenant-a", "x.b.test.global.", "127.255.0.2", false},
		{"", "x.b.test.global.", "127.255.0.2", false},
		{"", "only.private.example.", "forwarded", false},
		{"tenant-b", "only.private.example.", "forwarded", false},
		{"tenant-a", "only.private.example.", "6.6.6.8", true},
		// Entries declaring the same host add up, for the namespace that sees both.
		{"tenant-a", "shared.test.global.", "127.255.0.3 6.6.6.10", true},
		{"", "shared.test.global.", "127.255.0.3", false},
	}
	for _, c := range cases {
		t.Run(c.ns+" "+c.name, func(t *testing.T) {
			r := Answer(cfg, v, Question{Name: c.name, Type: dns.TypeA, Namespace: c.ns})
			if got := addresses(r); got != c.want || r.Private != c.private {
				t.Errorf("%s, private %v; want %s, private %v", got, r.Private, c.want, c.private)
			}
		})
	}
}

// addresses are the A records of r, sorted and joined; "forwarded" when
// r sends the name upstream.
func addresses(r Response) string {
	if r.External {
		return "forwarded"
	}
	var out []string
	for _, rr := range r.Answer {
		out = append(out, rr.(*dns.A).A.String())
	}
	slices.Sort(out)
	return strings.Join(out, " ")
}

// A mesh zone held elsewhere is asked of its owners with the namespace's
// zone key, marked private when the host is the namespace's.
func TestAnswerMeshPrivateRemote(t *testing.T) {
	cfg := meshConfig()
	sv := NewStatic(cfg, append(testCluster(),
		serviceEntry("default", "mesh", []string{"*.test.global"}, "127.255.0.2"),
		&model.ServiceEntry{Namespace: "tenant-a", Name: "deep", Hosts: []string{"*.b.test.global"},
			Addresses: ips("6.6.6.9"), ExportTo: []string{"."}},
	), true)
	v := &remoteView{Static: sv, remote: map[string][]string{"test.global.": {"b"}, "b.test.global.": {"c"}}}
	delete(sv.zones, "test.global.")
	delete(sv.zones, "b.test.global.")
	for _, c := range []struct {
		ns, zone string
		private  bool
	}{{"", "test.global.", false}, {"tenant-b", "test.global.", false}, {"tenant-a", "b.test.global.", true}} {
		r := Answer(cfg, v, Question{Name: "x.b.test.global.", Type: dns.TypeA, Namespace: c.ns})
		if r.Zone != c.zone || r.Private != c.private {
			t.Errorf("namespace %q: zone %q private %v, want %q %v", c.ns, r.Zone, r.Private, c.zone, c.private)
		}
		if got := KeyOfFor(cfg, v, "x.b.test.global.", c.ns); got != c.zone {
			t.Errorf("KeyOfFor(namespace %q) = %q, want %q", c.ns, got, c.zone)
		}
	}
}

// A namespace's records are its own hosts' (and the public hosts of the
// same names), not a copy of the zone: an entry exported to many
// namespaces costs its own size once per namespace, whatever the zone
// holds beside it.
func TestMeshPrivateRecordsAreTheNamespacesOwn(t *testing.T) {
	cfg := meshConfig()
	hosts := map[model.Key][]MeshHost{}
	for i := range 200 {
		k := model.Key{Kind: model.KindServiceEntry, Namespace: "default", Name: fmt.Sprint("e", i)}
		hosts[k] = []MeshHost{{Name: fmt.Sprintf("h%d.test.global.", i), Addrs: ips("127.255.0.2")}}
	}
	var namespaces []string
	for i := range 50 {
		namespaces = append(namespaces, fmt.Sprint("ns", i))
	}
	hosts[model.Key{Kind: model.KindServiceEntry, Namespace: "ns0", Name: "wide"}] = []MeshHost{
		{Name: "h7.test.global.", Addrs: ips("6.6.6.6"), Namespaces: namespaces}}
	s := BuildMeshZone(cfg, "test.global.", 1, hosts)
	if len(s.meshByNamespace) != 50 {
		t.Fatalf("%d namespaces' records, want 50", len(s.meshByNamespace))
	}
	for ns, sub := range s.meshByNamespace {
		if len(sub.nodes) != 1 || sub.hasWildcard {
			t.Fatalf("%s holds %d names (wildcard %v), want its one", ns, len(sub.nodes), sub.hasWildcard)
		}
	}
	if got := addresses(s.forNamespace("ns3", true).answerMesh(Question{Name: "h7.test.global.", Type: dns.TypeA}, false)); got != "127.255.0.2 6.6.6.6" {
		t.Errorf("h7.test.global. for ns3: %s, want both entries' addresses", got)
	}
}
