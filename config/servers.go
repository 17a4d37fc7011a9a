package config

import (
	"fmt"
	"net"

	"github.com/miekg/dns"
)

// checkServerAddrs rejects listeners that cannot share an address. The
// entries of dns.listen and servers[] on one address (port 0 aside, which
// binds a port of its own each time) are one listener whose zones are
// split between them, as Corefile server blocks on one port are; so they
// must agree on the transport, the certificate and the path, and no zone
// may be claimed twice. dns.listen claims the root zone.
func (c *Config) checkServerAddrs(bad func(key, format string, args ...any)) {
	type entry struct {
		key, transport string
		tls            TLSConfig
		path           string
	}
	first := map[string]entry{}    // address → the first entry on it
	claimed := map[string]string{} // address and zone → the key claiming it
	for _, a := range c.DNS.Listen {
		if !ownPort(a) {
			continue
		}
		first[a] = entry{key: "dns.listen", transport: "dns"}
		claimed[a+" ."] = "dns.listen"
	}
	for i, s := range c.Servers {
		for j, a := range s.Listen {
			if !ownPort(a) {
				continue
			}
			key := fmt.Sprintf("servers[%d].listen[%d]", i, j)
			this := entry{key: key, transport: s.Transport, tls: s.TLS, path: s.Path}
			f, shared := first[a]
			switch {
			case !shared:
				first[a] = this
			case f.transport != s.Transport:
				bad(key, "%s is served over %s by %s: one address serves one transport", a, f.transport, f.key)
				continue
			case f.tls != s.TLS || f.path != s.Path:
				bad(key, "%s is shared with %s, so tls and path must be the same as there", a, f.key)
			}
			zones := s.Zones
			if len(zones) == 0 {
				zones = []string{"."}
			}
			for _, z := range zones {
				z = dns.CanonicalName(z)
				if other, dup := claimed[a+" "+z]; dup {
					bad(key, "zone %s on %s is served by %s already", z, a, other)
					continue
				}
				claimed[a+" "+z] = key
			}
		}
	}
}

// ownPort reports a listen address with a fixed port: port 0 asks for a
// new port every time, so such entries share nothing.
func ownPort(addr string) bool {
	_, port, err := net.SplitHostPort(addr)
	return err == nil && port != "0"
}
