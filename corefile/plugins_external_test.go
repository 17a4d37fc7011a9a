package corefile

import (
	"reflect"
	"strings"
	"testing"

	"github.com/shardns/shardns/config"
)

// k8s_external becomes kubernetes.external with its zones and options;
// what shardns cannot serve is reported with its line.
func TestConvertExternal(t *testing.T) {
	cases := []convertCase[*config.ExternalConfig]{
		{
			name: "README example",
			src:  ". {\n  kubernetes cluster.local\n  k8s_external example.org\n}\n",
			check: func(t *testing.T, e *config.ExternalConfig) {
				if !reflect.DeepEqual(e.Zones, []string{"example.org"}) || e.ApexLabel() != "dns" || e.TTLSeconds() != 5 ||
					e.Headless || e.Fallthrough != nil {
					t.Errorf("external %+v, want example.org with k8s_external's defaults", e)
				}
			},
		},
		{
			name: "every option",
			src: ". {\n  kubernetes cluster.local\n  k8s_external example.org example.net {\n    apex zone\n    ttl 60\n" +
				"    headless\n    fallthrough\n  }\n}\n",
			check: func(t *testing.T, e *config.ExternalConfig) {
				if !reflect.DeepEqual(e.Zones, []string{"example.org", "example.net"}) || e.ApexLabel() != "zone" ||
					e.TTLSeconds() != 60 || !e.Headless || !reflect.DeepEqual(e.Fallthrough, e.Zones) {
					t.Errorf("external %+v (ttl %d), want both zones, apex zone, ttl 60, headless, fallthrough in both", e, e.TTLSeconds())
				}
			},
		},
		{
			name: "zones from the block, fallthrough in one",
			src:  "example.org {\n  kubernetes cluster.local\n  k8s_external {\n    fallthrough example.org\n  }\n}\n",
			check: func(t *testing.T, e *config.ExternalConfig) {
				if !reflect.DeepEqual(e.Zones, []string{"example.org"}) || !reflect.DeepEqual(e.Fallthrough, []string{"example.org"}) {
					t.Errorf("external %+v, want the block's zone", e)
				}
			},
		},
		{
			name: "transfer of the zone, README example",
			src:  ". {\n  transfer example.org {\n    to *\n  }\n  kubernetes cluster.local\n  k8s_external example.org\n}\n",
			check: func(t *testing.T, e *config.ExternalConfig) {
				if !reflect.DeepEqual(e.TransferTo, []string{"*"}) {
					t.Errorf("transferTo %v, want *", e.TransferTo)
				}
			},
		},
		{
			name: "transfer of the block's zones, and of another zone",
			src: ". {\n  transfer {\n    to 192.0.2.0/24 10.0.0.1:53\n  }\n  kubernetes cluster.local\n  k8s_external example.org\n}\n" +
				"example.com {\n  transfer {\n    to *\n  }\n  forward . 127.0.0.1\n}\n",
			check: func(t *testing.T, e *config.ExternalConfig) {
				if !reflect.DeepEqual(e.TransferTo, []string{"192.0.2.0/24", "10.0.0.1"}) {
					t.Errorf("transferTo %v, want the first block's", e.TransferTo)
				}
			},
			want: []string{"Corefile:9: transfer: shardns transfers the zones of file plugins and k8s_external only"},
		},
		{
			name: "bad options",
			src:  ". {\n  kubernetes cluster.local\n  k8s_external example.org {\n    ttl 4000\n    apex a.b\n    notify\n  }\n}\n",
			want: []string{
				"Corefile:4: ttl 4000: must be 0 to 3600 seconds",
				"Corefile:5: apex a.b: must be one DNS label",
				`Corefile:6: k8s_external option "notify" has no shardns equivalent`,
			},
		},
		{
			name: "without the kubernetes plugin",
			src:  ". {\n  k8s_external example.org\n}\n",
			want: []string{"Corefile:2: k8s_external needs the kubernetes plugin in its server block, whose services it publishes"},
		},
		{
			name: "a reverse zone, as CoreDNS's tests list it",
			src:  ". {\n  kubernetes cluster.local\n  k8s_external example.org in-addr.arpa\n}\n",
			check: func(t *testing.T, e *config.ExternalConfig) {
				if !reflect.DeepEqual(e.Zones, []string{"example.org", "in-addr.arpa"}) {
					t.Errorf("external %+v, want both zones", e)
				}
			},
		},
		{
			name: "a reverse zone inside the kubernetes plugin's, which falls through to it",
			src: ". {\n  kubernetes cluster.local in-addr.arpa ip6.arpa {\n    fallthrough in-addr.arpa ip6.arpa\n  }\n" +
				"  k8s_external example.org 200.168.192.in-addr.arpa\n}\n",
			check: func(t *testing.T, e *config.ExternalConfig) {
				if !reflect.DeepEqual(e.Zones, []string{"example.org", "200.168.192.in-addr.arpa"}) {
					t.Errorf("external %+v, want both zones", e)
				}
			},
		},
		{
			name: "root zone",
			src:  ". {\n  kubernetes cluster.local\n  k8s_external\n}\n",
			want: []string{`Corefile:3: k8s_external zone ".": it would answer every name; name the zone it publishes services in`},
		},
	}
	runConvertCases(t, cases, externalConfig)
}

// externalConfig picks kubernetes.external for a case's check, which must
// be there.
func externalConfig(t *testing.T, res *Result) *config.ExternalConfig {
	t.Helper()
	e := res.Config.Kubernetes.External
	if e == nil {
		t.Fatalf("no kubernetes.external; findings:\n%s", strings.Join(findings(res), "\n"))
	}
	return e
}
