package zone

import (
	"net/netip"
	"testing"
)

func TestClients(t *testing.T) {
	ip := netip.MustParseAddr
	pods := []NodePod{
		{Namespace: "web", Name: "v4", IPs: []netip.Addr{ip("10.244.1.5")}},
		{Namespace: "web", Name: "dual", IPs: []netip.Addr{ip("10.244.1.6"), ip("fd00:10:244:1::6")}},
		{Namespace: "db", Name: "v6", IPs: []netip.Addr{ip("fd00:10:244:1::7")}},
		{Namespace: "kube-system", Name: "proxy", HostNetwork: true, IPs: []netip.Addr{ip("192.168.0.10")}},
		{Namespace: "web", Name: "pending"},
		{Namespace: "old", Name: "finished", Done: true, IPs: []netip.Addr{ip("10.244.1.8")}},
		// An address the node gave again before the old pod's deletion
		// was seen: neither namespace's search path is safe.
		{Namespace: "a", Name: "reused", IPs: []netip.Addr{ip("10.244.1.9")}},
		{Namespace: "b", Name: "reused", IPs: []netip.Addr{ip("10.244.1.9")}},
		{Namespace: "c", Name: "thrice", IPs: []netip.Addr{ip("10.244.1.9")}},
		// Two pods of one namespace at one address: still that namespace.
		{Namespace: "web", Name: "twin1", IPs: []netip.Addr{ip("10.244.1.10")}},
		{Namespace: "web", Name: "twin2", IPs: []netip.Addr{ip("10.244.1.10"), ip("fd00:10:244:1::10")}},
	}
	c := NewClients(pods)
	cases := []struct {
		addr     string
		known    bool
		ns       string
		ipv4Only bool
	}{
		{"10.244.1.5", true, "web", true},
		{"::ffff:10.244.1.5", true, "web", true},
		{"10.244.1.6", true, "web", false},
		{"fd00:10:244:1::6", true, "web", false},
		{"fd00:10:244:1::7", true, "db", false},
		{"192.168.0.10", false, "", false},
		{"10.244.1.8", false, "", false},
		{"10.244.1.9", false, "", false},
		{"10.244.1.10", true, "web", false},
		{"10.244.2.5", false, "", false},
	}
	var x ClientIndex
	if _, ok := x.Namespace(ip("10.244.1.5")); ok || x.IPv4Only(ip("10.244.1.5")) {
		t.Fatal("an empty index knows a client")
	}
	x.Set(c)
	for _, tc := range cases {
		cl, ok := c.Lookup(ip(tc.addr))
		if ok != tc.known || cl.Namespace != tc.ns {
			t.Errorf("%s: %+v %v, want namespace %q known %v", tc.addr, cl, ok, tc.ns, tc.known)
		}
		if got := x.IPv4Only(ip(tc.addr)); got != tc.ipv4Only {
			t.Errorf("%s: IPv4Only %v, want %v", tc.addr, got, tc.ipv4Only)
		}
		if ns, ok := x.Namespace(ip(tc.addr)); ok != tc.known || ns != tc.ns {
			t.Errorf("%s: Namespace %q %v", tc.addr, ns, ok)
		}
	}
	if c.Pods() != len(pods) {
		t.Errorf("Pods() = %d, want %d", c.Pods(), len(pods))
	}
}
