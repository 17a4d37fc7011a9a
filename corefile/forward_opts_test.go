package corefile

import (
	"reflect"
	"testing"

	"github.com/shardns/shardns/config"
)

// forward's transport, failover, next, except and max_age options.
func TestConvertForwardOptions(t *testing.T) {
	cases := []convertCase[config.ForwardConfig]{
		{
			name: "kubespray: prefer_udp on the root forwarder",
			src:  ".:53 {\n  forward . /etc/resolv.conf {\n    prefer_udp\n    max_concurrent 1000\n  }\n}\n",
			check: func(t *testing.T, f config.ForwardConfig) {
				if !f.PreferUDP || f.ForceTCP {
					t.Errorf("forward %+v, want preferUDP only", f.ForwardOptions)
				}
			},
			clean: true,
		},
		{
			name: "nodelocaldns: force_tcp in every stub block",
			src: "cluster.local:53 {\n  forward . 10.96.0.10 {\n    force_tcp\n  }\n}\n" +
				"in-addr.arpa:53 {\n  forward . 10.96.0.10 {\n    force_tcp\n  }\n}\n" +
				".:53 {\n  forward . /etc/resolv.conf\n}\n",
			check: func(t *testing.T, f config.ForwardConfig) {
				if f.ForceTCP || len(f.Stubs) != 2 || !f.Stubs[0].ForceTCP || !f.Stubs[1].ForceTCP {
					t.Errorf("forward %+v stubs %+v, want forceTCP on both stubs only", f.ForwardOptions, f.Stubs)
				}
			},
			clean: true,
		},
		{
			name: "failover, max_age and except on the root forwarder",
			src:  ".:53 {\n  forward . 10.0.0.1 10.0.0.2 {\n    policy sequential\n    failover servfail REFUSED\n    expire 5s\n    max_age 1m\n    except corp.example Lab.Example.\n  }\n}\n",
			check: func(t *testing.T, f config.ForwardConfig) {
				if !reflect.DeepEqual(f.Failover, []string{"SERVFAIL", "REFUSED"}) || f.MaxAge.D().Minutes() != 1 ||
					!reflect.DeepEqual(f.Except, []string{"corp.example", "lab.example"}) {
					t.Errorf("forward %+v maxAge %s", f.ForwardOptions, f.MaxAge.D())
				}
			},
			clean: true,
		},
		{
			name: "next on a stub followed by the root forward: the default forwarder is asked next",
			src:  ".:53 {\n  forward lab.example 10.20.0.1 {\n    next NXDOMAIN\n    prefer_udp\n  }\n  forward . 10.0.0.1\n}\n",
			check: func(t *testing.T, f config.ForwardConfig) {
				if len(f.Stubs) != 1 || !reflect.DeepEqual(f.Stubs[0].Next, []string{"NXDOMAIN"}) || !f.Stubs[0].PreferUDP || f.PreferUDP {
					t.Errorf("stubs %+v", f.Stubs)
				}
			},
			clean: true,
		},
		{
			name: "next with no forward after it is ignored, as CoreDNS ignores it",
			src:  ".:53 {\n  forward . 10.0.0.1 {\n    next NXDOMAIN\n  }\n}\nlab.example:53 {\n  forward . 10.20.0.1 {\n    next SERVFAIL\n  }\n}\n",
			check: func(t *testing.T, f config.ForwardConfig) {
				if len(f.Stubs) != 1 || f.Stubs[0].Next != nil {
					t.Errorf("stubs %+v, want no next", f.Stubs)
				}
			},
			want: []string{"Corefile:3: note: next NXDOMAIN: no forward follows in this server block, so CoreDNS ignores it, and so does shardns",
				"Corefile:8: note: next SERVFAIL: no forward follows in this server block, so CoreDNS ignores it, and so does shardns"},
			clean: true,
		},
		{
			name: "next to a second forwarder for the same zone",
			src:  ".:53 {\n  forward . 1.2.3.4 {\n    next NXDOMAIN\n  }\n  forward . 5.6.7.8\n}\n",
			want: []string{"Corefile:3: next NXDOMAIN: the forward it passes to is a second forwarder for ., which shardns does not have (list its upstreams with failover in one forward)"},
		},
		{
			name: "except in a stub block of its own: CoreDNS answers SERVFAIL there",
			src:  ".:53 {\n  forward . 10.0.0.1\n}\ncorp.example:53 {\n  forward . 10.1.0.1 {\n    except ci.corp.example\n  }\n}\n",
			check: func(t *testing.T, f config.ForwardConfig) {
				if len(f.Stubs) != 1 || !reflect.DeepEqual(f.Stubs[0].Except, []string{"ci.corp.example"}) {
					t.Errorf("stubs %+v", f.Stubs)
				}
			},
			want: []string{"Corefile:5: forward except ci.corp.example: CoreDNS answers these names SERVFAIL, as no forward follows in the server block; shardns asks the forwarder of the next shorter zone (forward.upstreams)"},
		},
		{
			name: "except on a stub followed by the root forward maps cleanly",
			src:  ".:53 {\n  forward corp.example 10.1.0.1 {\n    except ci.corp.example\n  }\n  forward . 10.0.0.1\n}\n",
			check: func(t *testing.T, f config.ForwardConfig) {
				if len(f.Stubs) != 1 || !reflect.DeepEqual(f.Stubs[0].Except, []string{"ci.corp.example"}) {
					t.Errorf("stubs %+v", f.Stubs)
				}
			},
			clean: true,
		},
		{
			name: "what CoreDNS refuses",
			src:  ".:53 {\n  forward . 10.0.0.1 {\n    failover NOERROR\n    next BOGUS\n    max_age 1s\n    force_tcp now\n    except .\n  }\n}\n",
			check: func(t *testing.T, f config.ForwardConfig) {
				if f.Failover != nil || f.MaxAge != 0 || f.ForceTCP || f.Except != nil {
					t.Errorf("forward %+v maxAge %s: want nothing set", f.ForwardOptions, f.MaxAge.D())
				}
			},
			want: []string{"Corefile:3: failover NOERROR: CoreDNS refuses NOERROR there too", "Corefile:4: next BOGUS: not an rcode",
				"Corefile:2: forward: max_age 1s is less than expire 10s, which CoreDNS refuses", "Corefile:6: force_tcp now: takes no argument",
				"Corefile:7: except .: every name but the root would go unforwarded; leave the forward out"},
		},
		{
			name: "a stub's max_age differs from the root's",
			src:  ".:53 {\n  forward . 10.0.0.1\n}\ncorp.example:53 {\n  forward . 10.1.0.1 {\n    max_age 1m\n  }\n}\n",
			want: []string{"Corefile:5: max_age for stub domain corp.example: one max_age for every upstream (forward.*)"},
		},
	}
	runConvertCases(t, cases, forwardConfig)
}

// forwardConfig picks forward's settings for a case's check.
func forwardConfig(_ *testing.T, res *Result) config.ForwardConfig { return res.Config.Forward }
