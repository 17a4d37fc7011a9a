package corefile

import (
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"testing"
	"testing/fstest"

	"github.com/shardns/shardns/config"
)

// aksCorefile is AKS's default Corefile: coredns-custom's *.override
// files go into the root server block, its *.server files after it.
const aksCorefile = `.:53 {
    errors
    ready
    health
    kubernetes cluster.local in-addr.arpa ip6.arpa {
      pods insecure
      fallthrough in-addr.arpa ip6.arpa
      ttl 30
    }
    prometheus :9153
    forward . /etc/resolv.conf
    cache 30
    loop
    reload
    loadbalance
    import custom/*.override
}
import custom/*.server
`

// k3sCorefile is k3s's default Corefile, which imports from the
// coredns-custom ConfigMap by absolute paths.
const k3sCorefile = `.:53 {
    errors
    health
    ready
    kubernetes cluster.local in-addr.arpa ip6.arpa {
      pods insecure
      fallthrough in-addr.arpa ip6.arpa
    }
    hosts /etc/coredns/NodeHosts {
      ttl 60
      reload 15s
      fallthrough
    }
    prometheus :9153
    forward . /etc/resolv.conf
    cache 30
    loop
    reload
    loadbalance
    import /etc/coredns/custom/*.override
}
import /etc/coredns/custom/*.server
`

// convertWith parses and converts src as the Corefile in /etc/coredns
// of files, failing the test on an error.
func convertWith(t *testing.T, src string, files fstest.MapFS) (*Corefile, *Result) {
	t.Helper()
	cf, err := Parse("Corefile", []byte(src), Options{Files: files, Dir: "/etc/coredns"})
	if err != nil {
		t.Fatal(err)
	}
	res, err := Convert(cf)
	if err != nil {
		t.Fatal(err)
	}
	return cf, res
}

// The managed clusters' defaults import files that usually do not exist:
// they convert as if the imports were not there.
func TestConvertManagedDefaultsWithoutCustomFiles(t *testing.T) {
	cases := []struct{ name, src string }{
		{name: "AKS", src: aksCorefile},
		{name: "k3s", src: k3sCorefile},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			cf, res := convertWith(t, c.src, fstest.MapFS{})
			if !reflect.DeepEqual(cf.Sources, []string{"Corefile"}) {
				t.Errorf("sources %q", cf.Sources)
			}
			for _, f := range findings(res) {
				if strings.Contains(f, "import") {
					t.Errorf("finding about an import: %s", f)
				}
			}
			if n := res.Unmapped(); n > 0 {
				t.Errorf("%d settings not converted: %q", n, findings(res))
			}
			if k := res.Config.Kubernetes; !k.Enabled || !slices.Equal(res.Config.Forward.Upstreams, []string{"/etc/resolv.conf"}) {
				t.Errorf("kubernetes %+v, forward.upstreams %q", k, res.Config.Forward.Upstreams)
			}
		})
	}
}

// AKS's coredns-custom ConfigMap, mounted next to the Corefile, adds a
// rewrite to the root server block and a stub domain of its own.
func TestConvertAKSCustomFiles(t *testing.T) {
	dir := t.TempDir()
	corefile := filepath.Join(dir, "Corefile")
	write(t, corefile, aksCorefile)
	write(t, filepath.Join(dir, "custom", "x.override"), "rewrite name exact db.example.com db.prod.svc.cluster.local\n")
	write(t, filepath.Join(dir, "custom", "y.server"), "example.com:53 {\n  forward . 10.0.0.10\n}\n")
	var opts Options
	if err := opts.SetLocalFiles(corefile); err != nil {
		t.Fatal(err)
	}
	cf, err := Parse(corefile, []byte(aksCorefile), opts)
	if err != nil {
		t.Fatal(err)
	}
	custom := filepath.ToSlash(filepath.Join(dir, "custom"))
	if want := []string{corefile, custom + "/x.override", custom + "/y.server"}; !reflect.DeepEqual(cf.Sources, want) {
		t.Errorf("sources %q, want %q", cf.Sources, want)
	}
	res, err := Convert(cf)
	if err != nil {
		t.Fatal(err)
	}
	rule := config.RewriteRule{Field: "name", Match: "exact", From: "db.example.com", To: "db.prod.svc.cluster.local"}
	if !slices.ContainsFunc(res.Config.Rewrite, func(r config.RewriteRule) bool { return reflect.DeepEqual(r, rule) }) {
		t.Errorf("rewrite %+v lacks %+v", res.Config.Rewrite, rule)
	}
	// The .server block is a chain of its own (the override's rewrite
	// is the root block's), forwarding its zone.
	stub := config.StubConfig{Zones: []string{"example.com"}, Upstreams: []string{"10.0.0.10"}}
	servers := res.Config.Servers
	if len(servers) != 1 || servers[0].Chain == nil || servers[0].Chain.Rewrite == nil || len(servers[0].Chain.Rewrite) != 0 ||
		!slices.ContainsFunc(servers[0].Chain.Forward.Stubs, func(s config.StubConfig) bool { return reflect.DeepEqual(s, stub) }) {
		t.Errorf("servers %+v: want example.com's chain without rewrite rules, with the stub %+v", servers, stub)
	}
	for _, f := range res.Findings {
		if f.Unmapped || strings.Contains(f.Msg, "import") {
			t.Errorf("finding %s", f.Format(corefile))
		}
	}
}

// Findings on lines of an imported file name that file, after the
// Corefile's own.
func TestConvertFindingsNameTheImportedFile(t *testing.T) {
	files := files("etc/coredns/custom/x.override", "cache 60\ndnssec\n",
		"etc/coredns/custom/y.server", "example.org:53 {\n  whoami\n}\n")
	src := ".:53 {\n  cache 30\n  forward . 10.0.0.1\n  import custom/*.override\n  dnssec\n}\nimport custom/*.server\n"
	_, res := convertWith(t, src, files)
	want := []string{
		`Corefile:5: plugin "dnssec" has no shardns equivalent`,
		"/etc/coredns/custom/x.override:1: cache differs from Corefile:2: shardns has one response cache for every server block",
		`/etc/coredns/custom/x.override:2: plugin "dnssec" has no shardns equivalent`,
		"/etc/coredns/custom/y.server:2: whoami on dns.listen has no shardns equivalent; give its server block a port of its own",
	}
	var got []string
	for _, f := range res.Findings {
		if f.Unmapped {
			got = append(got, f.Format("Corefile"))
		}
	}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("unmapped findings:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
	out, err := res.YAML()
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(out), "#   /etc/coredns/custom/x.override:2: plugin \"dnssec\"") {
		t.Errorf("the YAML header does not name the imported file:\n%s", out)
	}
}
