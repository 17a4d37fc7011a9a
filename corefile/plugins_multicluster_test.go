package corefile

import (
	"reflect"
	"strings"
	"testing"

	"github.com/shardns/shardns/config"
)

// `multicluster ZONES` moves the plugin's zones it names to
// kubernetes.multicluster; what CoreDNS would not serve is said by line.
func TestConvertMulticluster(t *testing.T) {
	cases := []struct {
		name                string
		src                 string
		zones, multicluster []string
		want                []string
	}{
		{
			name:         "README example",
			src:          ". {\n  kubernetes cluster.local clusterset.local {\n    multicluster clusterset.local\n  }\n}\n",
			zones:        []string{"cluster.local"},
			multicluster: []string{"clusterset.local"},
		},
		{
			name: "with reverse zones and fallthrough",
			src: ". {\n  kubernetes cluster.local clusterset.local in-addr.arpa ip6.arpa {\n    pods insecure\n" +
				"    multicluster clusterset.local.\n    fallthrough in-addr.arpa ip6.arpa\n  }\n}\n",
			zones:        []string{"cluster.local"},
			multicluster: []string{"clusterset.local"},
		},
		{
			name:  "a zone the plugin does not serve",
			src:   ". {\n  kubernetes cluster.local {\n    multicluster clusterset.local\n  }\n}\n",
			zones: []string{"cluster.local"},
			want:  []string{"Corefile:3: note: multicluster clusterset.local: not one of the kubernetes plugin's zones (cluster.local)"},
		},
		{
			name:  "no zones",
			src:   ". {\n  kubernetes cluster.local {\n    multicluster\n  }\n}\n",
			zones: []string{"cluster.local"},
			want:  []string{"Corefile:3: note: multicluster without zones"},
		},
		{
			name:  "the plugin's only zone",
			src:   ". {\n  kubernetes clusterset.local {\n    multicluster clusterset.local\n  }\n}\n",
			zones: []string{"clusterset.local"},
			want:  []string{"Corefile:3: multicluster clusterset.local: the plugin's only zone"},
		},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			res := convert(t, c.src)
			k := res.Config.Kubernetes
			if !reflect.DeepEqual(k.Zones, c.zones) || !reflect.DeepEqual(k.Multicluster, c.multicluster) {
				t.Errorf("zones %v, multicluster %v; want %v and %v", k.Zones, k.Multicluster, c.zones, c.multicluster)
			}
			if len(c.want) == 0 {
				if _, err := config.Parse(mustYAML(t, res)); err != nil {
					t.Fatalf("the converted configuration does not load: %v", err)
				}
			}
			all := strings.Join(findings(res), "\n")
			for _, w := range c.want {
				if !strings.Contains("\n"+all, "\n"+w) {
					t.Errorf("missing finding %s\ngot:\n%s", w, all)
				}
			}
		})
	}
}
