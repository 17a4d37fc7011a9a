package corefile

import (
	"slices"
	"testing"

	"github.com/shardns/shardns/config"
)

// Each case is a Corefile with a kubernetes plugin, what the
// configuration must hold and the findings it must produce.
func TestConvertKubernetes(t *testing.T) {
	cases := []convertCase[*config.Config]{
		{
			name: "reverse zones alone: CoreDNS does not start, and cluster.local is not served in their place",
			src:  ".:53 {\n  kubernetes in-addr.arpa ip6.arpa {\n    pods insecure\n  }\n  forward . 10.0.0.53\n}\n",
			check: func(t *testing.T, cfg *config.Config) {
				k := cfg.Kubernetes
				if k.Enabled || len(k.ReverseZones) != 0 {
					t.Errorf("kubernetes.enabled %v, reverseZones %q; want the plugin left out", k.Enabled, k.ReverseZones)
				}
			},
			want: []string{`Corefile:2: kubernetes in-addr.arpa ip6.arpa: no cluster domain, only reverse zones, which CoreDNS refuses to start on ` +
				`("non-reverse zone name must be used"); name the cluster domain first (kubernetes cluster.local in-addr.arpa ip6.arpa)`},
		},
		{
			name: "a reverse block's plugin without zones takes the block's",
			src:  ".:53 {\n  forward . 10.0.0.53\n}\n10.in-addr.arpa:53 {\n  kubernetes\n}\n",
			check: func(t *testing.T, cfg *config.Config) {
				if cfg.Kubernetes.Enabled {
					t.Error("kubernetes.enabled: want the plugin left out")
				}
			},
			want: []string{`Corefile:5: kubernetes 10.in-addr.arpa: no cluster domain, only reverse zones, which CoreDNS refuses to start on ` +
				`("non-reverse zone name must be used"); name the cluster domain first (kubernetes cluster.local 10.in-addr.arpa)`},
		},
		{
			name: "the cluster domain beside reverse zones",
			src:  ".:53 {\n  kubernetes example.local in-addr.arpa\n}\n",
			check: func(t *testing.T, cfg *config.Config) {
				k := cfg.Kubernetes
				if !k.Enabled || !slices.Equal(k.Zones, []string{"example.local"}) || !slices.Equal(k.ReverseZones, []string{"in-addr.arpa"}) {
					t.Errorf("kubernetes %v zones %q reverse %q", k.Enabled, k.Zones, k.ReverseZones)
				}
			},
		},
		{
			name: "without the plugin, a stub of cluster.local is what answers its names",
			src:  ".:53 {\n  forward cluster.local 10.0.0.10\n  forward . 10.0.0.53\n}\n",
			check: func(t *testing.T, cfg *config.Config) {
				k, st := cfg.Kubernetes, cfg.Forward.Stubs
				if k.Enabled || len(k.Zones) != 0 || len(k.ReverseZones) != 0 {
					t.Errorf("kubernetes %v zones %q reverse %q, want no cluster names", k.Enabled, k.Zones, k.ReverseZones)
				}
				if len(st) != 1 || !slices.Equal(st[0].Zones, []string{"cluster.local"}) || !slices.Equal(st[0].Upstreams, []string{"10.0.0.10"}) {
					t.Errorf("forward.stubs %+v, want cluster.local to 10.0.0.10", st)
				}
			},
		},
		{
			name: "a stub of cluster.local in another block, the plugin in none",
			src:  ".:53 {\n  forward . 10.0.0.53\n}\ncluster.local:53 {\n  forward . 10.0.0.10\n}\n",
			check: func(t *testing.T, cfg *config.Config) {
				if st := cfg.Forward.Stubs; len(st) != 1 || !slices.Equal(st[0].Zones, []string{"cluster.local"}) {
					t.Errorf("forward.stubs %+v, want cluster.local", st)
				}
			},
		},
		{
			name: "with the plugin, the stub is shadowed as in CoreDNS",
			src:  ".:53 {\n  kubernetes cluster.local\n  forward cluster.local 10.0.0.10\n  forward . 10.0.0.53\n}\n",
			check: func(t *testing.T, cfg *config.Config) {
				if len(cfg.Forward.Stubs) != 0 {
					t.Errorf("forward.stubs %+v, want none", cfg.Forward.Stubs)
				}
			},
			want: []string{"Corefile:3: note: forward for cluster.local is left out: the kubernetes plugin answers every name there " +
				"(it comes before forward in CoreDNS too) and no fallthrough reaches it"},
		},
		{
			name: "without the plugin, a zone file of cluster.local is served",
			src:  ".:53 {\n  file db.cluster cluster.local\n  forward . 10.0.0.53\n}\n",
			check: func(t *testing.T, cfg *config.Config) {
				if fz := cfg.Files.Zones; len(fz) != 1 || fz[0].Origin != "cluster.local" {
					t.Errorf("files.zones %+v, want cluster.local's", fz)
				}
			},
		},
		{
			name: "bounds on requests to the API server",
			src: ".:53 {\n  kubernetes cluster.local {\n    apiserver_qps 50.5\n    apiserver_burst 100\n    apiserver_max_inflight 8\n  }\n" +
				"}\n",
			check: func(t *testing.T, cfg *config.Config) {
				k := cfg.Kubernetes
				if k.APIServerQPS != 50.5 || k.APIServerBurst != 100 || k.APIServerMaxInflight != 8 {
					t.Errorf("apiserverQPS %v, apiserverBurst %d, apiserverMaxInflight %d; want 50.5, 100, 8",
						k.APIServerQPS, k.APIServerBurst, k.APIServerMaxInflight)
				}
			},
		},
		{
			name: "bounds CoreDNS refuses",
			src:  ".:53 {\n  kubernetes cluster.local {\n    apiserver_qps -1\n    apiserver_burst 1.5\n    apiserver_max_inflight\n    apiserver_qps NaN\n  }\n}\n",
			check: func(t *testing.T, cfg *config.Config) {
				if k := cfg.Kubernetes; k.APIServerQPS != 0 || k.APIServerBurst != 0 || k.APIServerMaxInflight != 0 {
					t.Errorf("bounds %v %d %d, want none", k.APIServerQPS, k.APIServerBurst, k.APIServerMaxInflight)
				}
			},
			want: []string{
				"Corefile:3: apiserver_qps -1: must be one number of requests per second, not negative",
				"Corefile:4: apiserver_burst 1.5: must be one whole number, not negative",
				"Corefile:5: apiserver_max_inflight : must be one whole number, not negative",
				"Corefile:6: apiserver_qps NaN: must be one number of requests per second, not negative",
			},
		},
	}
	runConvertCases(t, cases, wholeConfig)
}
