package corefile

import (
	"os"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/shardns/shardns/config"
)

// kubeDNSConvert translates a kube-dns ConfigMap and converts the
// Corefile as `shardns convert` would.
func kubeDNSConvert(t *testing.T, data string, opts KubeDNSOptions) (*Result, error) {
	t.Helper()
	src, err := KubeDNSCorefile([]byte(data), opts)
	if err != nil {
		return nil, err
	}
	cf, err := Parse("Corefile", src, Options{})
	if err != nil {
		t.Fatalf("the Corefile does not parse: %v\n%s", err, src)
	}
	res, err := Convert(cf)
	if err != nil {
		t.Fatalf("the Corefile does not convert: %v\n%s", err, src)
	}
	if _, err := res.YAML(); err != nil {
		t.Fatalf("the configuration does not validate: %v\n%s", err, src)
	}
	return res, nil
}

func readKubeDNSFile(t *testing.T, path string) string {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

func wantKubeDNSStubs(want ...config.StubConfig) func(t *testing.T, res *Result) {
	return func(t *testing.T, res *Result) {
		t.Helper()
		if got := res.Config.Forward.Stubs; !reflect.DeepEqual(got, want) {
			t.Errorf("forward.stubs %+v, want %+v", got, want)
		}
	}
}

func wantKubeDNSUpstreams(want ...string) func(t *testing.T, res *Result) {
	return func(t *testing.T, res *Result) {
		t.Helper()
		if got := res.Config.Forward.Upstreams; !reflect.DeepEqual(got, want) {
			t.Errorf("forward.upstreams %q, want %q", got, want)
		}
	}
}

func TestKubeDNSCorefile(t *testing.T) {
	acme := config.StubConfig{Zones: []string{"acme.local"}, Upstreams: []string{"1.2.3.4"}}
	corp := config.StubConfig{Zones: []string{"corp.example"}, Upstreams: []string{"10.0.0.53", "10.0.1.53:5353"}}
	cases := []struct {
		name    string
		data    string
		opts    KubeDNSOptions
		wantErr string // a part of the error; "" for none
		checks  []func(t *testing.T, res *Result)
	}{
		{
			name:   "two stub domains and upstreams, as a manifest",
			data:   readKubeDNSFile(t, "testdata/kubedns/configmap.yaml"),
			checks: []func(*testing.T, *Result){wantKubeDNSStubs(acme, corp), wantKubeDNSUpstreams("8.8.8.8", "8.8.4.4")},
		},
		{
			name:   "the same as bare data in JSON",
			data:   readKubeDNSFile(t, "testdata/kubedns/data.json"),
			checks: []func(*testing.T, *Result){wantKubeDNSStubs(acme, corp), wantKubeDNSUpstreams("8.8.8.8", "8.8.4.4")},
		},
		{
			name:   "values written in place rather than as JSON strings",
			data:   "stubDomains:\n  acme.local: [1.2.3.4]\nupstreamNameservers: [8.8.8.8]\n",
			checks: []func(*testing.T, *Result){wantKubeDNSStubs(acme), wantKubeDNSUpstreams("8.8.8.8")},
		},
		{
			name: "ip:port nameservers keep their port",
			data: `{"stubDomains": "{\"corp.example\": [\"10.0.0.53:5353\", \"[fd00::53]:5300\"]}", "upstreamNameservers": "[\"8.8.8.8:5353\"]"}`,
			checks: []func(*testing.T, *Result){wantKubeDNSUpstreams("8.8.8.8:5353"),
				wantKubeDNSStubs(config.StubConfig{Zones: []string{"corp.example"}, Upstreams: []string{"10.0.0.53:5353", "[fd00::53]:5300"}})},
		},
		{
			name:   "stub domains are lower-cased, without the final dot",
			data:   `{"stubDomains": "{\"ACME.local.\": [\"1.2.3.4\"]}"}`,
			checks: []func(*testing.T, *Result){wantKubeDNSStubs(acme), wantKubeDNSUpstreams("/etc/resolv.conf")},
		},
		{
			name:   "an empty ConfigMap is kubeadm's default",
			data:   "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: kube-dns\n",
			checks: []func(*testing.T, *Result){wantKubeDNSStubs(), wantKubeDNSUpstreams("/etc/resolv.conf"), checkKubeDNSDefault},
		},
		{
			name:   "empty data is kubeadm's default too",
			data:   `{"upstreamNameservers": "", "stubDomains": "{}"}`,
			checks: []func(*testing.T, *Result){wantKubeDNSStubs(), wantKubeDNSUpstreams("/etc/resolv.conf"), checkKubeDNSDefault},
		},
		{
			name: "another cluster domain",
			data: "{}",
			opts: KubeDNSOptions{ClusterDomain: "Example.Internal."},
			checks: []func(*testing.T, *Result){func(t *testing.T, res *Result) {
				if got := res.Config.Kubernetes.Zones; !reflect.DeepEqual(got, []string{"example.internal"}) {
					t.Errorf("kubernetes.zones %q", got)
				}
			}},
		},
		{name: "malformed JSON names the key", data: "data:\n  stubDomains: '{\"acme.local\": [\"1.2.3.4\"'\nkind: ConfigMap\n", wantErr: "stubDomains: malformed JSON"},
		{name: "JSON of another shape names the key", data: `{"upstreamNameservers": "{\"a\": 1}"}`, wantErr: "upstreamNameservers: malformed JSON"},
		{name: "bad stub nameserver is named", data: `{"stubDomains": "{\"acme.local\": [\"1.2.3.999\"]}"}`, wantErr: `stubDomains: "acme.local": nameserver "1.2.3.999" is not an IP or IP:port`},
		{name: "bad upstream is named", data: `{"upstreamNameservers": "[\"dns.google\"]"}`, wantErr: `upstreamNameservers: nameserver "dns.google" is not an IP or IP:port`},
		{name: "port 0 is not a port", data: `{"upstreamNameservers": "[\"8.8.8.8:0\"]"}`, wantErr: `nameserver "8.8.8.8:0"`},
		{name: "bad stub domain is named", data: `{"stubDomains": "{\"acme..local\": [\"1.2.3.4\"]}"}`, wantErr: `stubDomains: "acme..local" is not a domain name`},
		{name: "the root is no stub domain", data: `{"stubDomains": "{\".\": [\"1.2.3.4\"]}"}`, wantErr: `stubDomains: "." is not a domain name`},
		{name: "a stub domain twice", data: `{"stubDomains": "{\"acme.local\": [\"1.2.3.4\"], \"acme.local.\": [\"1.2.3.5\"]}"}`, wantErr: "are the same domain"},
		{name: "a stub domain without nameservers", data: `{"stubDomains": "{\"acme.local\": []}"}`, wantErr: `"acme.local" has no nameservers`},
		{name: "bad federation name", data: `{"federations": "{\"My_Fed\": \"fed.example.com\"}"}`, wantErr: `federations: name "My_Fed" is not a DNS label`},
		{name: "bad federation domain", data: `{"federations": "{\"myfed\": \"fed example\"}"}`, wantErr: `federations: "myfed": "fed example" is not a domain name`},
		{name: "unknown data key", data: "Corefile: \".:53 {}\"\n", wantErr: `unknown key "Corefile"`},
		{name: "another kind", data: "kind: Secret\ndata: {}\n", wantErr: "kind Secret"},
		{name: "empty input", data: " \n", wantErr: "the input is empty"},
		{name: "not an object", data: "[1, 2]", wantErr: "not a YAML or JSON object"},
		{name: "bad cluster domain", data: "{}", opts: KubeDNSOptions{ClusterDomain: "a..b"}, wantErr: `cluster domain "a..b"`},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			res, err := kubeDNSConvert(t, tc.data, tc.opts)
			if errorWanted(t, err, tc.wantErr) {
				return
			}
			for _, check := range tc.checks {
				check(t, res)
			}
		})
	}
}

// checkKubeDNSDefault checks what kubeadm's default Corefile sets, and
// that nothing of it is left out.
func checkKubeDNSDefault(t *testing.T, res *Result) {
	t.Helper()
	cfg := res.Config
	k := cfg.Kubernetes
	if !k.Enabled || !reflect.DeepEqual(k.Zones, []string{"cluster.local"}) || k.Pods != "insecure" ||
		k.TTL == nil || *k.TTL != 30 || !reflect.DeepEqual(k.Fallthrough, []string{"in-addr.arpa", "ip6.arpa"}) {
		t.Errorf("kubernetes %+v", k)
	}
	if !cfg.Log.Errors || !cfg.Cache.Enabled || cfg.Cache.MaxTTL != 30 || !cfg.LoadBalance.Enabled ||
		cfg.HTTP.Lameduck != config.Duration(5*time.Second) {
		t.Errorf("log.errors %v, cache %+v, loadbalance %v, http.lameduck %v", cfg.Log.Errors, cfg.Cache, cfg.LoadBalance.Enabled, cfg.HTTP.Lameduck)
	}
	if n := res.Unmapped(); n != 0 {
		t.Errorf("%d unmapped findings: %v", n, res.Findings)
	}
}

// The manifest and its bare data give the same Corefile, the golden one,
// which converts with nothing left out, its federations included.
func TestKubeDNSCorefileGolden(t *testing.T) {
	manifest, err := KubeDNSCorefile([]byte(readKubeDNSFile(t, "testdata/kubedns/configmap.yaml")), KubeDNSOptions{})
	if err != nil {
		t.Fatal(err)
	}
	bare, err := KubeDNSCorefile([]byte(readKubeDNSFile(t, "testdata/kubedns/data.json")), KubeDNSOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if string(manifest) != string(bare) {
		t.Errorf("the manifest gives:\n%s\nits data gives:\n%s", manifest, bare)
	}
	if want := readKubeDNSFile(t, "testdata/kubedns/configmap.Corefile"); string(manifest) != want {
		t.Errorf("Corefile:\n%s\nwant (testdata/kubedns/configmap.Corefile):\n%s", manifest, want)
	}
	res, err := kubeDNSConvert(t, readKubeDNSFile(t, "testdata/kubedns/configmap.yaml"), KubeDNSOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if n := res.Unmapped(); n != 0 {
		t.Errorf("%d unmapped findings: %v", n, res.Findings)
	}
	want := config.FederationConfig{Names: map[string]string{"myfed": "fed.example.com"}}
	if got := res.Config.Federation; !reflect.DeepEqual(got, want) {
		t.Errorf("federation %+v, want %+v", got, want)
	}
}

// The domain and the port come from options, as kube-dns took them from
// its flags: every server block listens on the port.
func TestKubeDNSCorefileDomainAndPort(t *testing.T) {
	data := []byte(`{"stubDomains": "{\"acme.local\": [\"1.2.3.4\"]}"}`)
	text, err := KubeDNSCorefile(data, KubeDNSOptions{ClusterDomain: "corp.internal", Port: 10053})
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{".:10053 {", "kubernetes corp.internal in-addr.arpa ip6.arpa {", "acme.local:10053 {"} {
		if !strings.Contains(string(text), want) {
			t.Errorf("Corefile lacks %q:\n%s", want, text)
		}
	}
	if _, err := KubeDNSCorefile(data, KubeDNSOptions{Port: 70000}); err == nil || !strings.Contains(err.Error(), "70000") {
		t.Errorf("port 70000: %v, want an error naming it", err)
	}
}
