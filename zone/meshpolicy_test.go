package zone

import (
	"slices"
	"testing"

	"github.com/shardns/shardns/model"
)

// Which hosts of a tenant's ServiceEntry are answered, by the zones the
// admin delegates to the mesh: the attack (*.com and
// api.github.com from tenant-a) answers nothing under the default.
func TestMeshHostsInDelegatedZonesOnly(t *testing.T) {
	cases := []struct {
		name     string
		zones    []string
		hosts    []string
		answered []string // host names, fully qualified
		skipped  []string // "host why"
	}{
		{"default: global only", []string{"global."},
			[]string{"*.com", "api.github.com", "*.test.global", "service1.test.global", "global"},
			[]string{"*.test.global.", "service1.test.global.", "global."},
			[]string{"*.com outside_zones", "api.github.com outside_zones"}},
		{"zone boundary is a label", []string{"global."}, []string{"x.notglobal", "x.global"},
			[]string{"x.global."}, []string{"x.notglobal outside_zones"}},
		{"several zones", []string{"global.", "mesh.internal."}, []string{"a.mesh.internal", "a.internal", "b.global"},
			[]string{"a.mesh.internal.", "b.global."}, []string{"a.internal outside_zones"}},
		{"every name delegated", []string{"."}, []string{"api.github.com", "*.example.com", "*.svc"},
			[]string{"api.github.com.", "*.example.com.", "*.svc."}, nil},
		{"public suffixes stay refused under .", []string{"."},
			[]string{"*.com", "*.co.uk", "*.github.io", "*.foo.ck", "*.global", "co.uk", "*.a.co.uk"},
			[]string{"co.uk.", "*.a.co.uk."},
			[]string{"*.com public_suffix", "*.co.uk public_suffix", "*.github.io public_suffix",
				"*.foo.ck public_suffix", "*.global public_suffix"}},
		{"nothing delegated", nil, []string{"x.global"}, nil, []string{"x.global outside_zones"}},
		{"cluster zone before zones", []string{"."}, []string{"x.cluster.local"}, nil, []string{"x.cluster.local cluster_zone"}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			cfg := meshConfig()
			cfg.MeshZones = c.zones
			got, skipped := MeshHosts(cfg, serviceEntry("tenant-a", "e", c.hosts, "6.6.6.6"))
			var answered []string
			for _, hs := range got {
				for _, h := range hs {
					answered = append(answered, h.Name)
				}
			}
			slices.Sort(answered)
			want := slices.Sorted(slices.Values(c.answered))
			if !slices.Equal(answered, want) {
				t.Errorf("answered %v, want %v", answered, want)
			}
			if sk := skippedWhy(skipped); !slices.Equal(sk, c.skipped) {
				t.Errorf("skipped %v, want %v", sk, c.skipped)
			}
		})
	}
}

func skippedWhy(skipped []SkippedHost) []string {
	var out []string
	for _, s := range skipped {
		out = append(out, s.Host+" "+s.Why)
	}
	return out
}

// The Public Suffix List's ICANN and private rules are public suffixes;
// the implicit rule's guess for a TLD the list does not know is not.
func TestPublicSuffix(t *testing.T) {
	for domain, want := range map[string]bool{
		"com": true, "com.": true, "COM": true, "co.uk": true, "github.io": true, "foo.ck": true, "global": true,
		"example.com": false, "test.global": false, "a.co.uk": false, "svc": false, "mesh": false,
		"internal.": false, "local": false, "a.unknowntld": false, "": false, ".": false,
	} {
		if got := PublicSuffix(domain); got != want {
			t.Errorf("PublicSuffix(%q) = %v, want %v", domain, got, want)
		}
	}
}

// An entry's exportTo, else istio.defaultExportTo, decides which
// namespaces see its hosts: every one (nil), a list, or none (skipped).
func TestMeshHostsExportTo(t *testing.T) {
	cases := []struct {
		name     string
		defaults []string
		exportTo []string
		want     []string // the hosts' Namespaces
		skipped  bool
	}{
		{"Istio's default", nil, nil, nil, false},
		{"default every namespace", []string{"*"}, nil, nil, false},
		{"default own namespace", []string{"."}, nil, []string{"tenant-a"}, false},
		{"default nobody", []string{"~"}, nil, nil, true},
		{"entry overrides a private default", []string{"."}, []string{"*"}, nil, false},
		{"entry overrides a public default", []string{"*"}, []string{"."}, []string{"tenant-a"}, false},
		{"named namespaces, sorted and once", nil, []string{"b", ".", "a", "b"}, []string{"a", "b", "tenant-a"}, false},
		{"named and every", nil, []string{"a", "*"}, nil, false},
		{"nobody", nil, []string{"~"}, nil, true},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			cfg := meshConfig()
			cfg.MeshExportTo = c.defaults
			e := &model.ServiceEntry{Namespace: "tenant-a", Name: "e", Hosts: []string{"x.test.global"},
				Addresses: ips("10.0.0.1"), ExportTo: c.exportTo}
			got, skipped := MeshHosts(cfg, e)
			if c.skipped {
				if len(got) != 0 || !slices.Equal(skippedWhy(skipped), []string{"x.test.global export_to"}) {
					t.Fatalf("hosts %v, skipped %v; want x.test.global skipped for export_to", got, skippedWhy(skipped))
				}
				return
			}
			hosts := got["test.global."]
			if len(hosts) != 1 || len(skipped) != 0 || !slices.Equal(hosts[0].Namespaces, c.want) {
				t.Fatalf("hosts %+v, skipped %v; want x.test.global. for namespaces %v", hosts, skippedWhy(skipped), c.want)
			}
		})
	}
}

// What a client sees: a tenant's *.com and api.github.com, and a host
// outside the delegated zones, go upstream; the entry's delegated host
// is still answered.
func TestAnswerMeshDelegatedZones(t *testing.T) {
	cfg := meshConfig()
	cfg.MeshZones = []string{"global."}
	v := buildView(t, cfg, true, append(testCluster(),
		serviceEntry("tenant-a", "attack", []string{"*.com", "api.github.com", "*.global"}, "6.6.6.6"),
		serviceEntry("default", "mesh", []string{"*.test.global", "api.example.org"}, "127.255.0.2"),
	))
	for _, name := range []string{"example.com.", "www.example.com.", "api.github.com.", "x.global.", "api.example.org."} {
		if r := Answer(cfg, v, Question{Name: name, Type: A}); !r.External {
			t.Errorf("%s: answered %+v, want it forwarded", name, r)
		}
	}
	runCases(t, v, cfg, []tc{
		{qname: "service1.test.global.", qtype: A, answer: []string{"service1.test.global. 30 IN A 127.255.0.2"}},
	})
}
