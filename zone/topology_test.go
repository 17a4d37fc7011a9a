package zone

import (
	"testing"

	"github.com/miekg/dns"

	"github.com/shardns/shardns/config"
	"github.com/shardns/shardns/model"
)

// topoCluster is a headless service "db" of namespace ns1 with one
// endpoint per address given as zone:forZones ("a:a,b" is in zone a and
// hinted for a and b; "b:" is in zone b without hints; "-" is not
// ready), named db-0, db-1… in that order.
func topoCluster(preferClose bool, eps ...[2]string) []any {
	http := model.Port{Name: "http", Protocol: "TCP", Port: 80}
	sl := &model.EndpointSlice{Namespace: "ns1", Name: "db-1", ServiceName: "db", Ports: []model.Port{http}}
	for i, e := range eps {
		ep := model.Endpoint{Addresses: ips(e[0]), Hostname: "db-" + string(rune('0'+i)), Ready: true}
		switch spec := e[1]; {
		case spec == "-":
			ep.Ready = false
		default:
			zone, hints, _ := cut(spec, ':')
			ep.Zone = zone
			if hints != "" {
				ep.ForZones = split(hints)
			}
		}
		sl.Endpoints = append(sl.Endpoints, ep)
	}
	return []any{&model.Namespace{Name: "ns1"},
		&model.Service{Namespace: "ns1", Name: "db", Type: model.ServiceHeadless, Ports: []model.Port{http}, PreferClose: preferClose},
		&model.Service{Namespace: "ns1", Name: "vip", ClusterIPs: ips("10.0.0.9"), Ports: []model.Port{http}, PreferClose: preferClose},
		sl}
}

func cut(s string, sep byte) (string, string, bool) {
	for i := range len(s) {
		if s[i] == sep {
			return s[:i], s[i+1:], true
		}
	}
	return s, "", false
}

func split(s string) []string {
	var out []string
	for {
		head, rest, ok := cut(s, ',')
		out = append(out, head)
		if !ok {
			return out
		}
		s = rest
	}
}

// What a client of each zone sees of a headless service, in order: the
// EndpointSlice API's rules (hints when every ready endpoint has them,
// else PreferClose's zones, else nothing), falling back to every ready
// endpoint when none is for the zone; ClusterIP answers unchanged.
func TestTopologyAnswers(t *testing.T) {
	hinted := [][2]string{{"10.1.0.1", "a:a"}, {"10.1.0.2", "b:b"}, {"10.1.0.3", "a:a"}, {"10.1.0.4", "b:b"}}
	zoned := [][2]string{{"10.1.0.1", "a:"}, {"10.1.0.2", "b:"}, {"10.1.0.3", "a:"}}
	cases := []struct {
		name        string
		preferClose bool
		eps         [][2]string
		topo        Topology
		qname       string
		want        []string // A addresses, or SRV targets' first labels, in order
	}{
		{"off", false, hinted, Topology{}, "db", []string{"10.1.0.1", "10.1.0.2", "10.1.0.3", "10.1.0.4"}},
		{"no zone known", false, hinted, Topology{Mode: TopologyOnly}, "db", []string{"10.1.0.1", "10.1.0.2", "10.1.0.3", "10.1.0.4"}},
		{"hints prefer b", false, hinted, Topology{TopologyPrefer, "b"}, "db", []string{"10.1.0.2", "10.1.0.4", "10.1.0.1", "10.1.0.3"}},
		{"hints only a", false, hinted, Topology{TopologyOnly, "a"}, "db", []string{"10.1.0.1", "10.1.0.3"}},
		{"hints for two zones", false, [][2]string{{"10.1.0.1", "a:a,c"}, {"10.1.0.2", "b:b"}},
			Topology{TopologyOnly, "c"}, "db", []string{"10.1.0.1"}},
		{"zone with no endpoint falls back", false, hinted, Topology{TopologyOnly, "c"}, "db",
			[]string{"10.1.0.1", "10.1.0.2", "10.1.0.3", "10.1.0.4"}},
		{"unknown zone is only unmatched", false, [][2]string{{"10.1.0.1", "mars:mars"}, {"10.1.0.2", "b:b"}},
			Topology{TopologyOnly, "a"}, "db", []string{"10.1.0.1", "10.1.0.2"}},
		{"a ready endpoint without hints voids them", false, [][2]string{{"10.1.0.1", "a:a"}, {"10.1.0.2", "b:"}},
			Topology{TopologyOnly, "a"}, "db", []string{"10.1.0.1", "10.1.0.2"}},
		{"a not ready endpoint without hints does not", false, [][2]string{{"10.1.0.1", "a:a"}, {"10.1.0.2", "-"}, {"10.1.0.3", "b:b"}},
			Topology{TopologyOnly, "a"}, "db", []string{"10.1.0.1"}},
		{"no hints, no PreferClose", false, zoned, Topology{TopologyOnly, "a"}, "db", []string{"10.1.0.1", "10.1.0.2", "10.1.0.3"}},
		{"PreferClose by zone", true, zoned, Topology{TopologyPrefer, "b"}, "db", []string{"10.1.0.2", "10.1.0.1", "10.1.0.3"}},
		{"PreferClose hints win", true, [][2]string{{"10.1.0.1", "a:b"}, {"10.1.0.2", "b:b"}}, Topology{TopologyOnly, "a"}, "db",
			[]string{"10.1.0.1", "10.1.0.2"}},
		{"SRV only a", false, hinted, Topology{TopologyOnly, "a"}, "_http._tcp.db", []string{"db-0", "db-2"}},
		{"SRV prefer b", false, hinted, Topology{TopologyPrefer, "b"}, "_http._tcp.db", []string{"db-1", "db-3", "db-0", "db-2"}},
		{"host name of another zone still answers", false, hinted, Topology{TopologyOnly, "a"}, "db-1.db", []string{"10.1.0.2"}},
		{"ClusterIP unchanged", true, zoned, Topology{TopologyOnly, "b"}, "vip", []string{"10.0.0.9"}},
	}
	// How many records lead each answer as preferred with others after
	// them (prefer mode), which loadbalance keeps first; 0 for the rest.
	preferred := map[string]int{"hints prefer b": 2, "PreferClose by zone": 1, "SRV prefer b": 2}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			cfg := testConfig()
			v := buildView(t, cfg, true, topoCluster(c.preferClose, c.eps...))
			qtype := dns.TypeA
			if c.qname[0] == '_' {
				qtype = dns.TypeSRV
			}
			r := Answer(cfg, v, Question{Name: c.qname + ".ns1.svc.cluster.local.", Type: qtype, Asker: &c.topo})
			got := answerOrder(r)
			if !equal(got, c.want) {
				t.Fatalf("answer %q, want %q", got, c.want)
			}
			if r.Preferred != preferred[c.name] {
				t.Fatalf("Preferred = %d, want %d", r.Preferred, preferred[c.name])
			}
			if qtype == dns.TypeSRV && len(r.Extra) != len(c.want) {
				t.Fatalf("%d additional records for %d targets: %v", len(r.Extra), len(c.want), r.Extra)
			}
			// The node's own answers follow its configured mode and zone.
			cfg.Topology = c.topo.Mode
			cfg.SetNodeZone(c.topo.Zone)
			if own := answerOrder(Answer(cfg, v, Question{Name: c.qname + ".ns1.svc.cluster.local.", Type: qtype})); !equal(own, c.want) {
				t.Fatalf("own answer %q, want %q", own, c.want)
			}
		})
	}
}

func answerOrder(r Response) []string {
	var out []string
	for _, rr := range r.Answer {
		switch x := rr.(type) {
		case *dns.A:
			out = append(out, x.A.String())
		case *dns.SRV:
			first, _, _ := cut(x.Target, '.')
			out = append(out, first)
		}
	}
	return out
}

func equal(a, b []string) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}

func TestParseTopologyMode(t *testing.T) {
	for s, want := range map[string]TopologyMode{"": TopologyOff, "off": TopologyOff, "prefer": TopologyPrefer, "only": TopologyOnly} {
		if m, ok := ParseTopologyMode(s); !ok || m != want {
			t.Errorf("%q: %v %v, want %v", s, m, ok, want)
		}
	}
	if _, ok := ParseTopologyMode("Prefer"); ok {
		t.Error("Prefer parsed; modes are lower case")
	}
}

// kubernetes.topology is checked by config and read here: a value one
// accepts and the other does not would pass validation and answer as off.
func TestTopologyModesAgreeWithConfig(t *testing.T) {
	for _, s := range []string{"", "off", "prefer", "only", "Prefer", "ONLY", "on", "none", " prefer"} {
		_, parsed := ParseTopologyMode(s)
		if valid := config.ValidTopology(s); valid != parsed {
			t.Errorf("kubernetes.topology %q: config accepts %v, zone reads %v", s, valid, parsed)
		}
	}
}
