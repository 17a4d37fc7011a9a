package acl

import (
	"net/netip"
	"testing"

	"github.com/miekg/dns"

	"github.com/shardns/shardns/config"
)

func pol(action string, types, nets []string) config.ACLPolicy {
	return config.ACLPolicy{Action: action, Types: types, Nets: nets}
}

// The examples of CoreDNS's acl README, and how lists combine.
func TestCheck(t *testing.T) {
	a := dns.TypeA
	cases := []struct {
		name   string
		lists  []config.ACLConfig
		qname  string
		qtype  uint16
		client string
		want   Action
	}{
		{"block A from a network", []config.ACLConfig{{Policies: []config.ACLPolicy{pol("block", []string{"A"}, []string{"192.168.0.0/16"})}}},
			"www.example.org.", a, "192.168.3.4", Block},
		{"another type passes", []config.ACLConfig{{Policies: []config.ACLPolicy{pol("block", []string{"A"}, []string{"192.168.0.0/16"})}}},
			"www.example.org.", dns.TypeAAAA, "192.168.3.4", None},
		{"another network passes", []config.ACLConfig{{Policies: []config.ACLPolicy{pol("block", []string{"A"}, []string{"192.168.0.0/16"})}}},
			"www.example.org.", a, "10.0.0.1", None},
		{"filter", []config.ACLConfig{{Policies: []config.ACLPolicy{pol("filter", []string{"A"}, []string{"192.168.0.0/16"})}}},
			"www.example.org.", a, "192.168.0.1", Filter},
		{"allow before block", []config.ACLConfig{{Policies: []config.ACLPolicy{pol("allow", nil, []string{"192.168.1.0/24"}), pol("block", nil, []string{"192.168.0.0/16"})}}},
			"www.example.org.", a, "192.168.1.9", Allow},
		{"block after allow", []config.ACLConfig{{Policies: []config.ACLPolicy{pol("allow", nil, []string{"192.168.1.0/24"}), pol("block", nil, []string{"192.168.0.0/16"})}}},
			"www.example.org.", a, "192.168.2.9", Block},
		{"allow only some, block the rest", []config.ACLConfig{{Policies: []config.ACLPolicy{pol("allow", nil, []string{"192.168.0.0/24", "192.168.1.0/24"}), pol("block", nil, nil)}}},
			"www.example.org.", a, "10.1.1.1", Block},
		{"zone of the list", []config.ACLConfig{{Zones: []string{"a.example.org"}, Policies: []config.ACLPolicy{pol("block", nil, []string{"192.168.1.0/24"})}}},
			"x.a.example.org.", a, "192.168.1.1", Block},
		{"outside the list's zone", []config.ACLConfig{{Zones: []string{"a.example.org"}, Policies: []config.ACLPolicy{pol("block", nil, []string{"192.168.1.0/24"})}}},
			"b.example.org.", a, "192.168.1.1", None},
		{"drop an address", []config.ACLConfig{{Policies: []config.ACLPolicy{pol("drop", nil, []string{"192.0.2.7"})}}},
			"www.example.org.", a, "192.0.2.7", Drop},
		{"IPv6 network", []config.ACLConfig{{Policies: []config.ACLPolicy{pol("block", []string{"*"}, []string{"2001:db8::/32"})}}},
			"www.example.org.", a, "2001:db8::53", Block},
		{"IPv4-mapped source is its IPv4 address", []config.ACLConfig{{Policies: []config.ACLPolicy{pol("block", nil, []string{"192.0.2.0/24"})}}},
			"www.example.org.", a, "::ffff:192.0.2.1", Block},
		{"allow ends the search", []config.ACLConfig{
			{Policies: []config.ACLPolicy{pol("allow", nil, []string{"10.0.0.0/8"})}},
			{Policies: []config.ACLPolicy{pol("block", nil, nil)}}},
			"www.example.org.", a, "10.0.0.1", Allow},
		{"no match goes on to the next list", []config.ACLConfig{
			{Policies: []config.ACLPolicy{pol("allow", nil, []string{"10.0.0.0/8"})}},
			{Policies: []config.ACLPolicy{pol("block", nil, nil)}}},
			"www.example.org.", a, "172.16.0.1", Block},
		{"a source that cannot be checked is refused", []config.ACLConfig{{Policies: []config.ACLPolicy{pol("allow", nil, nil)}}},
			"www.example.org.", a, "", Block},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			var client netip.Addr
			if tc.client != "" {
				client = netip.MustParseAddr(tc.client)
			}
			if got, _ := Compile(tc.lists).Check(tc.qname, tc.qtype, client); got != tc.want {
				t.Errorf("%s from %s: %v, want %v", tc.qname, tc.client, got, tc.want)
			}
		})
	}
	if Compile(nil) != nil {
		t.Error("no lists compile to a list")
	}
}

func TestCheckAllocatesNothing(t *testing.T) {
	l := Compile([]config.ACLConfig{{Zones: []string{"example.org"}, Policies: []config.ACLPolicy{
		pol("allow", []string{"A"}, []string{"10.0.0.0/8"}), pol("block", nil, nil)}}})
	client := netip.MustParseAddr("10.1.2.3")
	if n := testing.AllocsPerRun(100, func() { l.Check("www.example.org.", dns.TypeA, client) }); n != 0 {
		t.Errorf("Check allocates %v times", n)
	}
}
