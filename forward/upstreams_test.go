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
		{"TLS upstream, own TLS listener", []string{"tls://127.0.0.1:853"}, []string{"tls://0.0.0.0:853"}, true},
		{"TLS upstream, plain listener on its port", []string{"tls://127.0.0.1:853"}, []string{"127.0.0.1:853"}, false},
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

func TestParseUpstreamsTLS(t *testing.T) {
	got, err := ParseUpstreams([]string{"tls://1.1.1.1", "tls://127.0.0.1:8853", "tls://[2606:4700::1111]", "9.9.9.9"}, nil)
	want := []string{"tls://1.1.1.1:853", "tls://127.0.0.1:8853", "tls://[2606:4700::1111]:853", "9.9.9.9:53"}
	if err != nil || strings.Join(got, " ") != strings.Join(want, " ") {
		t.Errorf("ParseUpstreams = %v, %v; want %v", got, err, want)
	}
	for _, bad := range []string{"tls://dns.example", "tls://", "https://1.1.1.1", "tls://1.1.1.1:99999"} {
		if _, err := ParseUpstreams([]string{bad}, nil); err == nil || !strings.Contains(err.Error(), bad) {
			t.Errorf("ParseUpstreams(%q) = %v, want an error naming it", bad, err)
		}
	}
}
