package corefile

import (
	"slices"
	"testing"

	"github.com/shardns/shardns/config"
)

func TestConvertChaos(t *testing.T) {
	cases := []convertCase[*config.Config]{
		{
			name: "version and authors, each author once",
			src:  ".:53 {\n  chaos shardns-test bob ann bob\n}\n",
			check: func(t *testing.T, cfg *config.Config) {
				ch := cfg.Chaos
				if !ch.Enabled || ch.Version != "shardns-test" || !slices.Equal(ch.Authors, []string{"ann", "bob"}) {
					t.Errorf("chaos %+v, want version shardns-test, authors ann and bob", ch)
				}
			},
		},
		{
			name: "OpenShift's hostname.bind block answers CHAOS in its own chain, not in every block",
			src:  ".:5353 {\n  forward . 10.0.0.53\n}\nhostname.bind:5353 {\n  chaos\n}\n",
			check: func(t *testing.T, cfg *config.Config) {
				if cfg.Chaos.Enabled {
					t.Error("chaos.enabled at the top level, want it off for the main block")
				}
				if len(cfg.Servers) != 1 || cfg.Servers[0].Chain == nil || cfg.Servers[0].Chain.Chaos == nil || !cfg.Servers[0].Chain.Chaos.Enabled {
					t.Errorf("servers %+v, want hostname.bind's chain with chaos", cfg.Servers)
				}
			},
		},
		{
			name: "chaos in a whoami block is reported, not turned on for every block",
			src:  ".:53 {\n  forward . 10.0.0.53\n}\nhostname.bind:5353 {\n  whoami\n  chaos\n}\n",
			check: func(t *testing.T, cfg *config.Config) {
				if cfg.Chaos.Enabled {
					t.Error("chaos.enabled, want off")
				}
			},
			want: []string{`Corefile:6: chaos in server block "hostname.bind:5353": this block has no chain of its own to answer CHAOS questions in, ` +
				"and the main block's answers for every block"},
		},
	}
	runConvertCases(t, cases, wholeConfig)
}
