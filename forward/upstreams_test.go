package forward

import (
	"net/netip"
	"strings"
	"testing"
)

func TestCheckLoop(t *testing.T) {
	local := []netip.Addr{netip.MustParseAddr("10.0.0.5")}
	for _, c := range []struct {
		name      string
		upstreams []string
		listen    []string
		loop      bool
	}{
		{"same address", []string{"127.0.0.1:53"}, []string{"127.0.0.1:53"}, true},
		{"another port", []string{"127.0.0.1:53"}, []string{"127.0.0.1:5353"}, false},
		{"another address", []string{"10.0.0.9:53"}, []string{"10.0.0.5:53"}, false},
		{"wildcard listen, loopback upstream", []string{"127.0.0.2:53"}, []string{"0.0.0.0:53"}, true},
		{"wildcard listen, local upstream", []string{"10.0.0.5:53"}, []string{"[::]:53"}, true},
		{"wildcard listen, remote upstream", []string{"10.0.0.9:53"}, []string{"0.0.0.0:53"}, false},
		{"second of several", []string{"192.0.2.1:53", "127.0.0.1:5300"}, []string{"127.0.0.1:53", "127.0.0.1:5300"}, true},
		{"an upstream that is a name", []string{"tls://dns.example:853"}, []string{"127.0.0.1:853"}, false},
	} {
		err := CheckLoop(c.upstreams, c.listen, local)
		if (err != nil) != c.loop {
			t.Errorf("%s: CheckLoop(%v, %v) = %v, want a loop: %v", c.name, c.upstreams, c.listen, err, c.loop)
		}
		if err != nil && !strings.Contains(err.Error(), "forwarding would loop") {
			t.Errorf("%s: error %q does not say why", c.name, err)
		}
	}
}
