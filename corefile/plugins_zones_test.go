package corefile

import (
	"slices"
	"testing"
	"testing/fstest"

	"github.com/shardns/shardns/config"
	"github.com/shardns/shardns/sources/zonefile"
)

// dbRoot is a root zone written as CoreDNS users write one: relative to
// the origin the file plugin gives it.
const dbRoot = "$TTL 60\n@ IN SOA ns.example. admin.example. 1 7200 3600 1209600 60\n@ IN NS ns.example.\nfoo IN A 10.1.1.1\n"

// The zone files of a converted Corefile load as `shardns check` loads
// them, named as CoreDNS names their records: the origin is the zones
// after the file name, else the block's, the root's too.
func TestConvertFileOrigin(t *testing.T) {
	cases := []struct {
		name, src, db string
		origins       []string
		want          string // a record's owner after loading
	}{
		{"root block", ". {\n  file db\n}\n", dbRoot, []string{"."}, "foo."},
		{"root zone given", "example.org {\n  file db .\n}\n", dbRoot, []string{"."}, "foo."},
		{"another zone given in a root block", ". {\n  file db example.org\n}\n",
			"$TTL 60\n@ IN SOA ns admin 1 7200 3600 1209600 60\nfoo IN A 10.1.1.1\n", []string{"example.org"}, "foo.example.org."},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			out, err := convert(t, c.src).YAML()
			if err != nil {
				t.Fatal(err)
			}
			cfg, err := config.Parse(out)
			if err != nil {
				t.Fatalf("converted configuration does not validate: %v\n%s", err, out)
			}
			var origins []string
			for _, z := range cfg.Files.Zones {
				origins = append(origins, z.Origin)
			}
			if !slices.Equal(origins, c.origins) {
				t.Fatalf("files.zones origins %q, want %q", origins, c.origins)
			}
			zs, reserved := zonefile.FromConfig(cfg)
			if _, err := zonefile.Load(fstest.MapFS{"db": {Data: []byte(c.db)}}, zs, reserved); err != nil {
				t.Fatalf("check: %v", err)
			}
			fz, err := zonefile.Parse("db", zs[0].Origin, []byte(c.db), nil)
			if err != nil {
				t.Fatal(err)
			}
			if last := fz.Records[len(fz.Records)-1]; last.Header().Name != c.want {
				t.Errorf("record %s, want its owner %s", last, c.want)
			}
		})
	}
}

// A root file zone holds every name, the kubernetes zones' too: shardns
// answers those from the cluster alone, so it is reported.
func TestConvertRootFileBesideKubernetes(t *testing.T) {
	res := convert(t, ". {\n  kubernetes cluster.local\n  file db\n}\n")
	if len(res.Config.Files.Zones) != 0 {
		t.Errorf("files.zones %+v, want the root zone left out", res.Config.Files.Zones)
	}
	want := "Corefile:3: file zone . shares names with the kubernetes zone cluster.local: shardns answers those from the cluster's records only"
	if !hasFinding(res, want) {
		t.Errorf("missing finding %s\ngot %q", want, findings(res))
	}
}
