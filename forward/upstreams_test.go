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
		{"DoH upstream, own HTTPS listener", []string{"https://127.0.0.1:443/dns-query"}, []string{"https://0.0.0.0:443"}, true},
		{"DoH upstream on another path, own HTTPS listener", []string{"https://10.0.0.5:8443/q"}, []string{"https://10.0.0.5:8443"}, true},
		{"DoH upstream, TLS listener on its port", []string{"https://127.0.0.1:443/dns-query"}, []string{"tls://127.0.0.1:443"}, false},
		{"DoH upstream elsewhere", []string{"https://192.0.2.1:443/dns-query"}, []string{"https://0.0.0.0:443"}, false},
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
	for _, bad := range []string{"tls://dns.example", "tls://", "tls://1.1.1.1:99999"} {
		if _, err := ParseUpstreams([]string{bad}, nil); err == nil || !strings.Contains(err.Error(), bad) {
			t.Errorf("ParseUpstreams(%q) = %v, want an error naming it", bad, err)
		}
	}
}

func TestParseUpstreamsDoH(t *testing.T) {
	for _, c := range []struct{ in, want string }{
		{"https://9.9.9.9", "https://9.9.9.9:443/dns-query"},
		{"https://9.9.9.9/", "https://9.9.9.9:443/"},
		{"https://127.0.0.1:8443/resolve", "https://127.0.0.1:8443/resolve"},
		{"https://[2620:fe::fe]", "https://[2620:fe::fe]:443/dns-query"},
		{"https://[2620:fe::fe]:8443/dns-query", "https://[2620:fe::fe]:8443/dns-query"},
	} {
		got, err := ParseUpstreams([]string{c.in}, nil)
		if err != nil || len(got) != 1 || got[0] != c.want {
			t.Errorf("ParseUpstreams(%q) = %v, %v; want %s", c.in, got, err, c.want)
		}
	}
	for _, c := range []struct{ in, want string }{
		{"https://dns.quad9.net/dns-query", "is no IP address: upstream names are not looked up"},
		{"https://", "want https://IP[:port][/path]"},
		{"https://9.9.9.9/dns-query?dns=AAAB", "want https://IP[:port][/path]"},
		{"https://user@9.9.9.9", "want https://IP[:port][/path]"},
		{"https://9.9.9.9:0", "port"},
		{"https://9.9.9.9:70000", "port"},
		{"https://9.9.9.9%dns.quad9.net", "want https://IP[:port][/path]"},
		{"http://9.9.9.9", "want an IP address"},
	} {
		_, err := ParseUpstreams([]string{c.in}, nil)
		if err == nil || !strings.Contains(err.Error(), c.want) || !strings.Contains(err.Error(), "forward.upstreams: \""+c.in) {
			t.Errorf("ParseUpstreams(%q) = %v, want an error naming it with %q", c.in, err, c.want)
		}
	}
}
