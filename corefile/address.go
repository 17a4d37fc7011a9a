package corefile

import (
	"fmt"
	"net"
	"net/netip"
	"strconv"
	"strings"

	"github.com/miekg/dns"

	"github.com/shardns/shardns/config"
)

// Address is one zone of a server block key, [SCHEME://]ZONE[:PORT].
type Address struct {
	// Scheme is dns, tls, https, grpc, quic or https3.
	Scheme string
	// Zone is lower case without the trailing dot; "." is the root.
	Zone string
	// Port is the port number, the scheme's default when not written.
	Port string
}

// defaultPorts are CoreDNS's ports for keys that name none.
var defaultPorts = map[string]string{
	"dns": "53", "tls": "853", "https": "443", "grpc": "443", "quic": "853", "https3": "443",
}

// ParseKey reads a server block key. A reverse zone written as a CIDR
// (10.0.0.0/8, fd00::/64) gives the zones under in-addr.arpa or ip6.arpa
// that cover it, so a prefix off an octet (nibble) boundary gives several.
func ParseKey(key string) ([]Address, error) {
	scheme := "dns"
	rest := key
	if s, r, ok := strings.Cut(key, "://"); ok {
		scheme, rest = strings.ToLower(s), r
	}
	port, ok := defaultPorts[scheme]
	if !ok {
		return nil, fmt.Errorf("%q: unknown scheme %q", key, scheme)
	}
	host := rest
	if _, err := netip.ParsePrefix(rest); err != nil {
		if h, p, err := net.SplitHostPort(rest); err == nil {
			host, port = h, p
		}
	}
	if _, err := config.ParsePort(port); err != nil {
		return nil, fmt.Errorf("%q: port %q is not a number from 0 to 65535", key, port)
	}
	if host == "" {
		host = "."
	}
	zones, err := keyZones(host)
	if err != nil {
		return nil, fmt.Errorf("%q: %v", key, err)
	}
	out := make([]Address, len(zones))
	for i, z := range zones {
		out[i] = Address{Scheme: scheme, Zone: z, Port: port}
	}
	return out, nil
}

// keyZones turns the host part of a key into zone names.
func keyZones(host string) ([]string, error) {
	if pfx, err := netip.ParsePrefix(host); err == nil {
		return reverseZones(pfx.Masked()), nil
	}
	z, err := NormalizeZone(host)
	if err != nil {
		return nil, err
	}
	return []string{z}, nil
}

// NormalizeZone lower-cases a zone name and drops its trailing dot,
// keeping "." for the root; it fails on what is not a domain name.
func NormalizeZone(z string) (string, error) {
	if z == "." {
		return z, nil
	}
	if _, ok := dns.IsDomainName(z); !ok || strings.HasPrefix(z, ".") || strings.Contains(z, "..") {
		return "", fmt.Errorf("%q is not a domain name", z)
	}
	return strings.ToLower(strings.TrimSuffix(z, ".")), nil
}

// servableZone normalizes a zone named in a plugin's arguments and
// reports whether shardns can serve it: the root, or a host-style domain
// name (config.ValidDomain).
func servableZone(a string) (string, bool) {
	z, err := NormalizeZone(a)
	return z, err == nil && (z == "." || config.ValidDomain(z))
}

// reverseZones gives the in-addr.arpa (ip6.arpa) zones covering pfx: one
// when its length is a whole number of octets (nibbles), else one per
// subnet of the next whole length, as CoreDNS does.
func reverseZones(pfx netip.Prefix) []string {
	step := 8
	if pfx.Addr().Is6() {
		step = 4
	}
	bits := (pfx.Bits() + step - 1) / step * step
	n := 1 << (bits - pfx.Bits())
	out := make([]string, 0, n)
	for i := range n {
		out = append(out, reverseName(pfx.Addr(), bits, i))
	}
	return out
}

// reverseName is the reverse zone of the i-th subnet of length bits
// under the network starting at base.
func reverseName(base netip.Addr, bits, i int) string {
	b := base.AsSlice()
	labels := bits / 8
	suffix := "in-addr.arpa"
	var digits []int
	if base.Is6() {
		labels, suffix = bits/4, "ip6.arpa"
		for _, x := range b {
			digits = append(digits, int(x>>4), int(x&15))
		}
	} else {
		for _, x := range b {
			digits = append(digits, int(x))
		}
	}
	if labels > 0 {
		digits[labels-1] += i // the subnet's last whole octet (nibble)
	}
	parts := make([]string, 0, labels+1)
	for j := labels - 1; j >= 0; j-- {
		if base.Is6() {
			parts = append(parts, strconv.FormatInt(int64(digits[j]), 16))
		} else {
			parts = append(parts, strconv.Itoa(digits[j]))
		}
	}
	return strings.Join(append(parts, suffix), ".")
}
