package main

import (
	"bytes"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	"github.com/shardns/shardns/config"
	"github.com/shardns/shardns/corefile"
)

const kubeDNSConfigMap = `apiVersion: v1
kind: ConfigMap
metadata:
  name: kube-dns
  namespace: kube-system
data:
  stubDomains: |
    {"acme.local": ["1.2.3.4"], "corp.example": ["10.0.0.53:5353"]}
  upstreamNameservers: |
    ["8.8.8.8", "8.8.4.4"]
`

func writeKubeDNSFile(t *testing.T, name, content string) string {
	t.Helper()
	return writeFileIn(t, t.TempDir(), name, content)
}

func TestConvertKubeDNS(t *testing.T) {
	path := writeKubeDNSFile(t, "kube-dns.yaml", kubeDNSConfigMap)
	var out, errs bytes.Buffer
	if err := convertKubeDNS(path, corefile.KubeDNSOptions{}, false, nil, &out, &errs); err != nil {
		t.Fatalf("%v\n%s", err, errs.String())
	}
	cfg, err := config.Parse(out.Bytes())
	if err != nil {
		t.Fatalf("printed configuration does not validate: %v\n%s", err, out.String())
	}
	want := []config.StubConfig{
		{Zones: []string{"acme.local"}, Upstreams: []string{"1.2.3.4"}},
		{Zones: []string{"corp.example"}, Upstreams: []string{"10.0.0.53:5353"}},
	}
	if !reflect.DeepEqual(cfg.Forward.Stubs, want) {
		t.Errorf("forward.stubs %+v, want %+v", cfg.Forward.Stubs, want)
	}
	if got := cfg.Forward.Upstreams; !reflect.DeepEqual(got, []string{"8.8.8.8", "8.8.4.4"}) {
		t.Errorf("forward.upstreams %q", got)
	}
	if !strings.Contains(out.String(), "converted from "+path+" as Corefile") {
		t.Errorf("header does not name the ConfigMap:\n%s", out.String())
	}
	if !strings.Contains(errs.String(), path+" as Corefile:") {
		t.Errorf("findings do not name the ConfigMap:\n%s", errs.String())
	}
}

// A federation becomes federation.names, with nothing left out.
func TestConvertKubeDNSFederation(t *testing.T) {
	in := `{"federations": "{\"myfed\": \"fed.example.com\"}"}`
	var out, errs bytes.Buffer
	if err := convertKubeDNS("-", corefile.KubeDNSOptions{}, false, strings.NewReader(in), &out, &errs); err != nil {
		t.Fatalf("%v\n%s", err, errs.String())
	}
	cfg, err := config.Parse(out.Bytes())
	if err != nil {
		t.Fatalf("printed configuration does not validate: %v\n%s", err, out.String())
	}
	if got := cfg.Federation.Names; !reflect.DeepEqual(got, map[string]string{"myfed": "fed.example.com"}) {
		t.Errorf("federation.names %v\n%s", got, out.String())
	}
}

func TestConvertKubeDNSErrors(t *testing.T) {
	bad := writeKubeDNSFile(t, "kube-dns.yaml", "stubDomains: '{\"acme.local\": [\"1.2.3.4\"'\n")
	cases := []struct {
		name, path, want string
	}{
		{name: "malformed key names the file and key", path: bad, want: bad + ": stubDomains: malformed JSON"},
		{name: "missing file", path: filepath.Join(t.TempDir(), "none.yaml"), want: "no such file"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			var out, errs bytes.Buffer
			err := convertKubeDNS(tc.path, corefile.KubeDNSOptions{}, true, nil, &out, &errs)
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("error %v, want one containing %q", err, tc.want)
			}
			if out.Len() != 0 {
				t.Errorf("printed:\n%s", out.String())
			}
		})
	}
}

// `shardns convert --kube-dns-configmap FILE` prints what convertKubeDNS
// prints; with --corefile as well it is refused.
func TestConvertKubeDNSFlag(t *testing.T) {
	path := writeKubeDNSFile(t, "kube-dns.yaml", kubeDNSConfigMap)
	var viaFlag, direct, errs bytes.Buffer
	if err := convert([]string{"--kube-dns-configmap", path}, nil, &viaFlag, &errs); err != nil {
		t.Fatalf("%v\n%s", err, errs.String())
	}
	if err := convertKubeDNS(path, corefile.KubeDNSOptions{}, false, nil, &direct, &errs); err != nil {
		t.Fatal(err)
	}
	if viaFlag.String() != direct.String() || !strings.Contains(viaFlag.String(), "acme.local") {
		t.Fatalf("convert --kube-dns-configmap printed:\n%s\nwant:\n%s", viaFlag.String(), direct.String())
	}
	err := convert([]string{"--kube-dns-configmap", path, "--corefile", path}, nil, &viaFlag, &errs)
	if err == nil || !strings.Contains(err.Error(), "not both") {
		t.Fatalf("both flags: %v, want a refusal", err)
	}
}
