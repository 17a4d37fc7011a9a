package corefile

import (
	"os"
	"slices"
	"strings"
	"testing"

	"github.com/shardns/shardns/config"
)

// askOwnersSummary is what AskOwners decides, in a line each: the
// kubernetes zones, the top-level stubs and each server block's chain.
func askOwnersSummary(cfg *config.Config) []string {
	k := cfg.Kubernetes
	out := []string{"zones " + strings.Join(k.Zones, ",") + " reverse " + strings.Join(k.ReverseZones, ",")}
	for _, s := range cfg.Forward.Stubs {
		out = append(out, "stub "+strings.Join(s.Zones, ",")+" → "+strings.Join(s.Upstreams, ","))
	}
	for _, s := range cfg.Servers {
		if s.Chain == nil {
			continue
		}
		line := "block " + strings.Join(s.Zones, ",") + " kubernetes " + boolWord(s.Chain.AnswersCluster())
		if f := s.Chain.Forward; f == nil {
			line += " forward: the top level's"
		} else {
			for _, st := range f.Stubs {
				line += " stub " + strings.Join(st.Zones, ",") + " → " + strings.Join(st.Upstreams, ",")
			}
		}
		if c := s.Chain.Cache; c != nil {
			line += " own cache"
		}
		out = append(out, line)
	}
	return out
}

func boolWord(b bool) string {
	if b {
		return "yes"
	}
	return "no"
}

func TestAskOwners(t *testing.T) {
	nodeLocalDNS, err := os.ReadFile("testdata/distributions/nodelocaldns.Corefile")
	if err != nil {
		t.Fatal(err)
	}
	base := config.Default().Kubernetes // cluster.local, in-addr.arpa, ip6.arpa
	tests := []struct {
		name       string
		corefile   string
		clusterDNS string
		want       []string
		err        string
	}{{
		name:       "NodeLocal DNSCache's Corefile: its cluster blocks ask the owners, the root block the node's resolvers",
		corefile:   string(nodeLocalDNS),
		clusterDNS: "10.96.0.11",
		want: []string{"zones cluster.local reverse in-addr.arpa,ip6.arpa",
			"block cluster.local kubernetes yes forward: the top level's own cache"},
	}, {
		name:       "the cluster DNS with its port",
		corefile:   "cluster.local:53 {\n cache 5\n forward . 10.96.0.11:53\n}\n.:53 {\n forward . 10.0.0.1\n}\n",
		clusterDNS: "10.96.0.11",
		want:       []string{"zones cluster.local reverse ", "block cluster.local kubernetes yes forward: the top level's own cache"},
	}, {
		name: "a stub domain elsewhere keeps its forward; a reverse zone without a block of its own is no cluster zone",
		corefile: "cluster.local:53 {\n forward . 10.96.0.11\n}\nin-addr.arpa:53 {\n forward . 10.96.0.11\n}\n" +
			"consul:53 {\n forward . 10.0.0.9\n}\n.:53 {\n forward . /etc/resolv.conf\n}\n",
		clusterDNS: "10.96.0.11",
		want:       []string{"zones cluster.local reverse in-addr.arpa", "stub consul → 10.0.0.9"},
	}, {
		name:       "a block of the cluster's zone sent elsewhere is no cluster block",
		corefile:   "cluster.local:53 {\n cache 5\n forward . 10.0.0.9\n}\n.:53 {\n forward . 10.0.0.1\n}\n",
		clusterDNS: "10.96.0.11",
		err:        "no server block forwards a zone of kubernetes.zones or kubernetes.reverseZones (cluster.local, in-addr.arpa, ip6.arpa) to the cluster DNS 10.96.0.11",
	}, {
		name:       "the root block sent to the cluster DNS is not the cluster's",
		corefile:   ".:53 {\n forward . 10.96.0.11\n}\n",
		clusterDNS: "10.96.0.11",
		err:        "no server block forwards",
	}, {
		name:       "a block of a zone beyond the cluster's stays as it is",
		corefile:   "cluster.local:53 {\n forward . 10.96.0.11\n}\nexample.org:53 {\n cache 5\n forward . 10.96.0.11\n}\n.:53 {\n forward . 10.0.0.1\n}\n",
		clusterDNS: "10.96.0.11",
		want:       []string{"zones cluster.local reverse ", "block example.org kubernetes no stub example.org → 10.96.0.11 own cache"},
	}, {
		name:       "the cluster DNS must be an address",
		corefile:   ".:53 {\n forward . 10.96.0.11\n}\n",
		clusterDNS: "kube-dns",
		err:        `the cluster DNS "kube-dns"`,
	}}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			out, err := convert(t, tt.corefile).YAML()
			if err != nil {
				t.Fatal(err)
			}
			cfg, err := config.Parse(out)
			if err != nil {
				t.Fatal(err)
			}
			cfg.Mode = config.ModeNodeLocal
			err = AskOwners(cfg, base, tt.clusterDNS)
			if errorWanted(t, err, tt.err) {
				return
			}
			if got := askOwnersSummary(cfg); !slices.Equal(got, tt.want) {
				t.Errorf("got\n  %s\nwant\n  %s\nfrom\n%s", strings.Join(got, "\n  "), strings.Join(tt.want, "\n  "), out)
			}
			// What a node-local process needs beside the Corefile.
			cfg.Cluster.Replicas, cfg.Cluster.Remote = []string{"127.0.0.1:8090"}, "127.0.0.1:0"
			if err := cfg.Validate(); err != nil {
				t.Errorf("the node-local configuration is invalid: %v", err)
			}
		})
	}
}
