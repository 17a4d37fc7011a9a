// Package forward sends questions that no cluster zone answers to upstream
// resolvers: from /etc/resolv.conf or host:port lists, with a selection
// policy, health checks that take failed upstreams out until they answer
// again, a bound on queries in flight, a read timeout, and a retry over TCP
// when an answer is truncated. Upstreams written tls://host:port are asked
// over DNS over TLS (RFC 7858) on connections kept open between queries,
// and plain ones over TCP on such connections too (force_tcp, questions
// that came over TCP, truncated answers). Some rcodes can send the
// question on to the next upstream (failover).
package forward

import (
	"bufio"
	"fmt"
	"io"
	"net"
	"net/netip"
	"os"
	"strings"

	"github.com/shardns/shardns/config"
)

// tlsScheme marks a DNS over TLS upstream, as in CoreDNS's forward.
const tlsScheme = config.UpstreamTLS

// ParseUpstreams resolves the configured entries to host:port addresses.
// An entry is either host:port, a bare IP (port 53), tls://IP[:port] (DNS
// over TLS, port 853; kept as tls://IP:port), https://IP[:port][/path]
// (DNS over HTTPS, port 443, path /dns-query; kept as
// https://IP:port/path), or the path of a resolv.conf file whose
// nameserver lines are used.
func ParseUpstreams(entries []string, readFile func(string) ([]byte, error)) ([]string, error) {
	if readFile == nil {
		readFile = os.ReadFile
	}
	var out []string
	for _, e := range entries {
		switch {
		case strings.HasPrefix(e, "/"):
			data, err := readFile(e)
			if err != nil {
				return nil, fmt.Errorf("forward.upstreams: %w", err)
			}
			ns, err := resolvConfNameservers(strings.NewReader(string(data)))
			if err != nil {
				return nil, fmt.Errorf("forward.upstreams: %s: %w", e, err)
			}
			if len(ns) == 0 {
				return nil, fmt.Errorf("forward.upstreams: %s has no nameserver line", e)
			}
			out = append(out, ns...)
		default:
			a, err := config.ParseUpstream(e)
			if err != nil {
				return nil, fmt.Errorf("forward.upstreams: %q: %w", e, err)
			}
			out = append(out, a)
		}
	}
	return out, nil
}

// dohAddr is the IP:port of an upstream https://IP:port/path.
func dohAddr(u string) string {
	a := strings.TrimPrefix(u, httpsScheme)
	if i := strings.IndexByte(a, '/'); i >= 0 {
		a = a[:i]
	}
	return a
}

// transport splits an upstream or listen address as written by
// ParseUpstreams (and the server's own addresses, written the same way)
// into its scheme ("", tls:// or https://) and IP:port.
func transport(a string) (scheme, addr string) {
	if rest, ok := strings.CutPrefix(a, tlsScheme); ok {
		return tlsScheme, rest
	}
	if strings.HasPrefix(a, httpsScheme) {
		return httpsScheme, dohAddr(a)
	}
	return "", a
}

func hostPort(e string) (string, error) {
	a, err := config.ParseAddrPort(e, 53)
	if err != nil {
		return "", fmt.Errorf("want an IP address, IP:port, tls://IP[:port], https://IP[:port][/path] or a resolv.conf path")
	}
	return a, nil
}

// resolvConfNameservers reads the nameserver lines of a resolv.conf.
func resolvConfNameservers(r io.Reader) ([]string, error) {
	var out []string
	sc := bufio.NewScanner(r)
	for sc.Scan() {
		f := strings.Fields(sc.Text())
		if len(f) < 2 || f[0] != "nameserver" {
			continue
		}
		a, err := hostPort(strings.SplitN(f[1], "%", 2)[0])
		if err != nil {
			return nil, fmt.Errorf("nameserver %q: %w", f[1], err)
		}
		out = append(out, a)
	}
	return out, sc.Err()
}

// CheckLoop refuses upstreams that are this server itself: forwarding to
// them would send every unknown name round in a loop until it times out.
// listen are the server's own plain DNS addresses (dns.listen and the
// servers of transport dns), its DNS over TLS ones written
// tls://host:port and its DNS over HTTPS ones written https://host:port
// (whatever the path: any is this server); an unspecified listen host
// (0.0.0.0, ::) matches every local address on that port.
func CheckLoop(upstreams, listen []string, localAddrs []netip.Addr) error {
	for _, u := range upstreams {
		uScheme, uAddr := transport(u)
		up, err := netip.ParseAddrPort(uAddr)
		if err != nil {
			continue
		}
		for _, l := range listen {
			lScheme, lAddr := transport(l)
			own, err := netip.ParseAddrPort(lAddr)
			if err != nil || own.Port() != up.Port() || lScheme != uScheme {
				continue
			}
			if own.Addr() == up.Addr() ||
				(own.Addr().IsUnspecified() && (up.Addr().IsLoopback() || contains(localAddrs, up.Addr()))) {
				return fmt.Errorf("forward.upstreams: %s is this server itself (it listens on %s): forwarding would loop", u, l)
			}
		}
	}
	return nil
}

func contains(list []netip.Addr, a netip.Addr) bool {
	for _, b := range list {
		if b == a.Unmap() {
			return true
		}
	}
	return false
}

// LocalAddrs lists the addresses of this host's interfaces.
func LocalAddrs() []netip.Addr {
	addrs, err := net.InterfaceAddrs()
	if err != nil {
		return nil
	}
	var out []netip.Addr
	for _, a := range addrs {
		if p, err := netip.ParsePrefix(a.String()); err == nil {
			out = append(out, p.Addr().Unmap())
		}
	}
	return out
}
