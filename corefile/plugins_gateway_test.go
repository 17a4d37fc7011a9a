package corefile

import (
	"reflect"
	"testing"

	"github.com/shardns/shardns/config"
)

// k8s_gateway becomes the gateway section with its zones and options;
// what shardns cannot serve is reported with its line.
func TestConvertGateway(t *testing.T) {
	cases := []convertCase[config.GatewayConfig]{
		{
			name:  "zone only: k8s_gateway's defaults",
			src:   ". {\n  k8s_gateway example.com\n  forward . 127.0.0.1\n}\n",
			clean: true,
			check: func(t *testing.T, g config.GatewayConfig) {
				want := config.GatewayConfig{Enabled: true, Zones: []string{"example.com"}, TTL: 60, Apex: "dns1.kube-system"}
				if !reflect.DeepEqual(g, want) {
					t.Errorf("gateway %+v, want %+v", g, want)
				}
			},
		},
		{
			name: "README example",
			src: "example.com {\n  k8s_gateway example.com {\n    resources Ingress\n    ttl 30\n" +
				"    apex exdns-1-k8s-gateway.kube-system\n    secondary exdns-2-k8s-gateway.kube-system\n" +
				"    kubeconfig /.kube/config\n  }\n}\n",
			clean: true,
			check: func(t *testing.T, g config.GatewayConfig) {
				want := config.GatewayConfig{Enabled: true, Zones: []string{"example.com"}, Resources: []string{"Ingress"}, TTL: 30,
					Apex: "exdns-1-k8s-gateway.kube-system", Secondary: "exdns-2-k8s-gateway.kube-system", Kubeconfig: "/.kube/config"}
				if !reflect.DeepEqual(g, want) {
					t.Errorf("gateway %+v, want %+v", g, want)
				}
			},
		},
		{
			name:  "zones from the block, resources in their order, kubeconfig with a context",
			src:   "foo.org bar.org {\n  k8s_gateway {\n    resources Service HTTPRoute\n    kubeconfig /k ctx\n  }\n}\n",
			clean: true,
			check: func(t *testing.T, g config.GatewayConfig) {
				if !reflect.DeepEqual(g.Zones, []string{"foo.org", "bar.org"}) || !reflect.DeepEqual(g.Resources, []string{"Service", "HTTPRoute"}) ||
					g.Kubeconfig != "/k" || g.Context != "ctx" {
					t.Errorf("gateway %+v", g)
				}
			},
		},
		{
			name: "what shardns does not serve",
			src: ". {\n  k8s_gateway example.com {\n    resources Ingress VirtualServer Ingres\n    fallthrough\n    ttl 4000\n" +
				"    apex\n    notify\n  }\n}\n",
			want: []string{
				"Corefile:3: resources VirtualServer: nginxinc's VirtualServers are not watched by shardns",
				"Corefile:3: resources Ingres: not one of HTTPRoute TLSRoute GRPCRoute Ingress Service",
				"Corefile:4: fallthrough: shardns answers the k8s_gateway zones authoritatively (NXDOMAIN for a name without a record) and passes no question on",
				"Corefile:5: ttl 4000: must be 0 to 3600 seconds",
				"Corefile:6: apex : takes one argument",
				`Corefile:7: k8s_gateway option "notify" has no shardns equivalent`,
			},
			check: func(t *testing.T, g config.GatewayConfig) {
				if !reflect.DeepEqual(g.Resources, []string{"Ingress"}) || g.TTL != 60 {
					t.Errorf("gateway %+v, want Ingress and the default TTL", g)
				}
			},
		},
		{
			name: "root zone",
			src:  ". {\n  k8s_gateway\n}\n",
			want: []string{`Corefile:2: k8s_gateway zone ".": it would answer every name; name the zone the gateway names are published in`},
		},
	}
	runConvertCases(t, cases, func(_ *testing.T, res *Result) config.GatewayConfig { return res.Config.Gateway })
}
