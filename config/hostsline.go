package config

import (
	"fmt"
	"net/netip"
	"strings"

	"github.com/miekg/dns"
)

// ParseHostsLine reads one /etc/hosts line, as hosts.entries holds them:
// an IP address and one or more names (made lower-case and fully
// qualified), "#" starting a comment. ok is false for a blank or comment
// line.
func ParseHostsLine(line string) (addr netip.Addr, names []string, ok bool, err error) {
	if i := strings.IndexByte(line, '#'); i >= 0 {
		line = line[:i]
	}
	f := strings.Fields(line)
	if len(f) == 0 {
		return addr, nil, false, nil
	}
	if len(f) < 2 {
		return addr, nil, false, fmt.Errorf("%q: want an IP address and at least one name", strings.TrimSpace(line))
	}
	addr, err = netip.ParseAddr(f[0])
	if err != nil {
		return addr, nil, false, fmt.Errorf("%q is not an IP address", f[0])
	}
	// A zone (fe80::1%eth0) means nothing in a DNS answer.
	addr = addr.WithZone("")
	for _, n := range f[1:] {
		name := dns.Fqdn(strings.ToLower(n))
		if !hostsName(name) {
			return addr, nil, false, fmt.Errorf("%q is not a host name", n)
		}
		names = append(names, name)
	}
	return addr, names, true, nil
}

// hostsName accepts what hosts(5) calls a host name (RFC 952 and 1123
// letters, digits and hyphens, and the underscores found in practice), as
// a lower-case, fully qualified name.
func hostsName(name string) bool {
	if _, ok := dns.IsDomainName(name); !ok || name == "." || len(name) > 254 {
		return false
	}
	label := 0
	for i := 0; i < len(name); i++ {
		switch c := name[i]; {
		case c == '.':
			if label == 0 || label > 63 {
				return false
			}
			label = 0
		case 'a' <= c && c <= 'z', '0' <= c && c <= '9', c == '-', c == '_':
			label++
		default:
			return false
		}
	}
	return true
}
