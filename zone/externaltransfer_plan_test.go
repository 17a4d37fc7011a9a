package zone

import (
	"strings"
	"testing"

	"github.com/miekg/dns"

	"github.com/shardns/shardns/model"
)

// elsewhereView hides the service zones in away: they are held by the
// replicas in owners.
type elsewhereView struct {
	Reader
	away   map[string]bool
	owners []string
}

func (v elsewhereView) Zone(key string) *Snapshot {
	if v.away[key] {
		return nil
	}
	return v.Reader.Zone(key)
}

func (v elsewhereView) Remote(key string) []string {
	if v.away[key] {
		return v.owners
	}
	return v.Reader.Remote(key)
}

// A transfer put together from parts held here and parts another replica
// gave is the transfer of one replica holding everything; a part no
// replica gave fails it, naming the namespace, rather than sending a
// zone with that namespace missing.
func TestAssembleExternalTransfer(t *testing.T) {
	cfg := externalConfig(false)
	whole := buildView(t, cfg, true, externalCluster())
	head, parts, ok := PlanExternalTransfer(cfg, whole, eo)
	if !ok {
		t.Fatal("example.org is not planned as an external zone")
	}
	want, err := AssembleExternalTransfer(head, parts)
	if err != nil {
		t.Fatal(err)
	}
	if want[0].Header().Rrtype != dns.TypeSOA || want[len(want)-1].String() != want[0].String() || len(want) < 5 {
		t.Fatalf("a transfer begins and ends with the SOA:\n%s", strings.Join(rrText(want), "\n"))
	}
	ns1 := ServiceZoneKey("ns1", "cluster.local.")
	split := elsewhereView{Reader: whole, away: map[string]bool{ns1: true}, owners: []string{"r2"}}
	tests := []struct {
		name    string
		fill    bool // r2 answers with ns1's part
		wantErr string
	}{
		{name: "the owner answered", fill: true},
		{name: "no owner answered", wantErr: "namespace ns1"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			head, parts, _ := PlanExternalTransfer(cfg, split, eo)
			for i, p := range parts {
				if p.Namespace != "ns1" {
					continue
				}
				if p.Done || len(p.Remote) != 1 || p.Remote[0] != "r2" {
					t.Fatalf("ns1's part: %+v, want it asked of r2", p)
				}
				if tt.fill {
					rrs, held := ExternalPartAt(cfg, whole, ExternalPartName("ns1", eo))
					if !held {
						t.Fatal("r2 does not give ns1's part")
					}
					parts[i].Records, parts[i].Done = rrs, true
				}
			}
			got, err := AssembleExternalTransfer(head, parts)
			if tt.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
					t.Fatalf("err %v, want one naming %q; records:\n%s", err, tt.wantErr, strings.Join(rrText(got), "\n"))
				}
				return
			}
			if err != nil || strings.Join(rrText(got), "\n") != strings.Join(rrText(want), "\n") {
				t.Fatalf("err %v; got\n%s\nwant\n%s", err, strings.Join(rrText(got), "\n"), strings.Join(rrText(want), "\n"))
			}
		})
	}
}

// Only a namespace's own name in an external zone asks for its part.
func TestExternalPartAt(t *testing.T) {
	cfg := externalConfig(false)
	v := buildView(t, cfg, true, externalCluster())
	for _, name := range []string{"lb.ns1." + eo, eo, "ns1.example.net.", "ns1.cluster.local.", "nosuchns." + eo} {
		if rrs, held := ExternalPartAt(cfg, v, name); held {
			t.Errorf("%s gives a part: %v", name, rrs)
		}
	}
	if rrs, held := ExternalPartAt(cfg, v, ExternalPartName("ns1", eo)); !held || len(rrs) == 0 {
		t.Errorf("ns1's part: %v held %v", rrs, held)
	}
	// A namespace without Services has an empty part where it is placed,
	// and none to give where another replica holds it.
	empty := buildView(t, cfg, true, append(externalCluster(), &model.Namespace{Name: "quiet"}))
	if rrs, held := ExternalPartAt(cfg, empty, ExternalPartName("quiet", eo)); !held || len(rrs) != 0 {
		t.Errorf("quiet's part: %v held %v, want an empty one", rrs, held)
	}
	away := elsewhereView{Reader: empty, away: map[string]bool{ServiceZoneKey("quiet", "cluster.local."): true}, owners: []string{"r2"}}
	if rrs, held := ExternalPartAt(cfg, away, ExternalPartName("quiet", eo)); held {
		t.Errorf("quiet's part held elsewhere given here: %v", rrs)
	}
}
