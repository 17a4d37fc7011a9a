package config

import (
	"fmt"
	"net/netip"
	"net/url"
	"strconv"
	"strings"
)

// The schemes of forward.upstreams, as in CoreDNS's forward.
const (
	// UpstreamTLS marks a DNS over TLS upstream (RFC 7858).
	UpstreamTLS = "tls://"
	// UpstreamHTTPS marks a DNS over HTTPS upstream (RFC 8484).
	UpstreamHTTPS = "https://"
)

// ParseUpstream reads one entry of forward.upstreams that is not a
// resolv.conf path: IP[:port] (port 53), tls://IP[:port] (port 853) or
// https://IP[:port][/path] (port 443, path /dns-query), written back as
// IP:port, tls://IP:port or https://IP:port/path, the form the forwarder
// dials. The error does not repeat e.
func ParseUpstream(e string) (string, error) {
	switch {
	case strings.HasPrefix(e, UpstreamTLS):
		a, err := ParseAddrPort(strings.TrimPrefix(e, UpstreamTLS), 853)
		if err != nil {
			return "", err
		}
		return UpstreamTLS + a, nil
	case strings.HasPrefix(e, UpstreamHTTPS):
		return parseDoH(e)
	default:
		a, err := ParseAddrPort(e, 53)
		if err != nil {
			return "", fmt.Errorf("want an IP address, IP:port, tls://IP[:port], https://IP[:port][/path] or a resolv.conf path")
		}
		return a, nil
	}
}

// ParseAddrPort reads IP or IP:port, port defaulting to port.
func ParseAddrPort(e string, port uint16) (string, error) {
	if ip, err := netip.ParseAddr(strings.TrimSuffix(strings.TrimPrefix(e, "["), "]")); err == nil {
		return netip.AddrPortFrom(ip, port).String(), nil
	}
	ap, err := netip.ParseAddrPort(e)
	if err != nil {
		return "", fmt.Errorf("want an IP address or IP:port")
	}
	return ap.String(), nil
}

// dohPath is the path CoreDNS asks every DNS over HTTPS upstream at; an
// upstream written without a path is asked there too.
const dohPath = "/dns-query"

// parseDoH reads https://IP[:port][/path] as https://IP:port/path, port
// 443 and path /dns-query by default. A host name is refused, as for
// tls://: looking it up could ask this server itself, and would make
// the upstream change with the answers of a resolver.
func parseDoH(e string) (string, error) {
	u, err := url.Parse(e)
	if err != nil || u.Opaque != "" || u.User != nil || u.RawQuery != "" || u.Fragment != "" || u.Host == "" {
		return "", fmt.Errorf("want https://IP[:port][/path]")
	}
	ip, err := netip.ParseAddr(u.Hostname())
	if err != nil {
		return "", fmt.Errorf("%q is no IP address: upstream names are not looked up (write the IP, and the name in tls.serverName)", u.Hostname())
	}
	port := uint64(443)
	if p := u.Port(); p != "" {
		if port, err = strconv.ParseUint(p, 10, 16); err != nil || port == 0 {
			return "", fmt.Errorf("port %q: want 1 to 65535", p)
		}
	}
	path := u.EscapedPath()
	if path == "" {
		path = dohPath
	}
	return UpstreamHTTPS + netip.AddrPortFrom(ip.Unmap(), uint16(port)).String() + path, nil
}
