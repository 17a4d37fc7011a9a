package corefile

import (
	"net/netip"
	"strconv"
	"strings"

	"github.com/shardns/shardns/config"
)

// forwardTLS is what a forward block says about its DNS over TLS and
// DNS over HTTPS upstreams.
type forwardTLS struct {
	tls        config.UpstreamTLSConfig
	set        bool   // a tls or tls_servername option was written
	at         *place // the tls option, whose files are read at start
	maxIdle    *int
	expire     *config.Duration
	namedAt    []string // server names written per upstream (tls://IP%NAME)
	tlsTargets int      // tls:// and https:// upstreams
}

// tlsUpstream reads tls://IP[%NAME][:PORT] (IPv6 as [IP%NAME]:PORT) as
// shardns's tls://IP:PORT and the server name written with it, if any.
func tlsUpstream(to string) (u, name string, ok bool) {
	rest, isTLS := strings.CutPrefix(to, "tls://")
	if !isTLS {
		return "", "", false
	}
	addr, name, ok := addrWithName(rest, 853)
	if !ok {
		return "", "", false
	}
	return "tls://" + addr, name, true
}

// httpsUpstream reads https://IP[%NAME][:PORT] as shardns's
// https://IP:PORT/dns-query, the path CoreDNS asks, and the server name
// written with it, which CoreDNS ignores on https:// upstreams. ok is
// false for a host name, and for a path, which CoreDNS refuses.
func httpsUpstream(to string) (u, name string, ok bool) {
	rest, _ := strings.CutPrefix(to, "https://")
	if strings.Contains(rest, "/") {
		return "", "", false
	}
	addr, name, ok := addrWithName(rest, 443)
	if !ok {
		return "", "", false
	}
	return "https://" + addr + "/dns-query", name, true
}

// addrWithName reads IP[%NAME][:PORT] (IPv6 as [IP%NAME]:PORT) as
// IP:PORT, port defaulting to port, and the name, if any.
func addrWithName(rest string, port uint16) (addr, name string, ok bool) {
	if host, n, has := strings.Cut(rest, "%"); has {
		// The name sits between the address and the port.
		name, rest = n, host
		if i := strings.LastIndex(n, ":"); i >= 0 {
			name, rest = n[:i], host+n[i:]
		}
		if strings.HasPrefix(host, "[") {
			name = strings.TrimSuffix(name, "]")
			rest = strings.Replace(rest, host, host+"]", 1)
		}
		if name == "" {
			return "", "", false
		}
	}
	if a, err := netip.ParseAddr(strings.Trim(rest, "[]")); err == nil {
		return netip.AddrPortFrom(a, port).String(), name, true
	}
	ap, err := netip.ParseAddrPort(rest)
	if err != nil {
		return "", "", false
	}
	return ap.String(), name, true
}

// tlsOption maps the forward options about TLS connections; false for
// any other option.
func (c *converter) tlsOption(s *server, o *Directive, t *forwardTLS) bool {
	switch o.Name {
	case "tls":
		t.set = true
		args := make([]string, len(o.Args))
		for i, a := range o.Args {
			args[i] = s.path(a)
		}
		switch len(args) {
		case 0: // the system's roots
		case 1:
			t.tls.CAFile = args[0]
		case 2, 3:
			t.tls.CertFile, t.tls.KeyFile = args[0], args[1]
			if len(args) == 3 {
				t.tls.CAFile = args[2]
			}
		default:
			c.unmapped(o.place(), "tls %s: takes CERT KEY CA, CERT KEY, CA or nothing", strings.Join(o.Args, " "))
		}
		at := o.place()
		t.at = &at
	case "tls_servername":
		t.set = true
		name := strings.Join(o.Args, " ")
		_, ipErr := netip.ParseAddr(name)
		if len(o.Args) != 1 || (ipErr != nil && !config.ValidDomain(name)) {
			c.unmapped(o.place(), "tls_servername %s: not a host name", name)
			return true
		}
		t.tls.ServerName = name
	case "max_idle_conns":
		n, err := strconv.Atoi(strings.Join(o.Args, " "))
		if err != nil || n < 0 {
			c.unmapped(o.place(), "max_idle_conns %s: not a number of 0 or more", strings.Join(o.Args, " "))
			return true
		}
		t.maxIdle = &n
	case "expire":
		if d, ok := c.duration(o, 0); ok {
			e := config.Duration(d)
			t.expire = &e
		}
	default:
		return false
	}
	return true
}

// resolveNames settles the server name of a block's tls:// and https://
// upstreams: tls_servername, or the one name written on the tls:// ones
// (tls://IP%NAME). CoreDNS refuses both at once; shardns has one name
// per forwarder, so an https:// upstream, which CoreDNS asks under
// tls_servername or its IP, cannot sit beside named tls:// ones.
func (c *converter) resolveNames(d *Directive, t *forwardTLS) bool {
	if len(t.namedAt) == 0 {
		return true
	}
	if t.tls.ServerName != "" {
		c.unmapped(d.place(), "%s: tls_servername and a server name on an upstream (tls://IP%%NAME) are both set, which CoreDNS refuses too", d.Name)
		return false
	}
	for _, n := range t.namedAt {
		if n != t.namedAt[0] || len(t.namedAt) != t.tlsTargets {
			c.unmapped(d.place(), "%s: upstreams with different TLS server names; shardns has one per forwarder: write a server block per name (as CoreDNS's forward README does) or one tls_servername", d.Name)
			return false
		}
	}
	name := t.namedAt[0]
	if _, err := netip.ParseAddr(name); err != nil && !config.ValidDomain(name) {
		c.unmapped(d.place(), "%s: TLS server name %s: not a host name", d.Name, name)
		return false
	}
	t.tls.ServerName = name
	return true
}

// noteUnusedTLS says when TLS options are written without a tls:// or
// https:// upstream: CoreDNS ignores them, and so does shardns.
func (c *converter) noteUnusedTLS(d *Directive, t *forwardTLS) {
	if t.set && t.tlsTargets == 0 {
		c.note(d.place(), "%s: tls and tls_servername apply to tls:// and https:// upstreams only, and there is none", d.Name)
	}
}

// tlsFileUse records where the files of t were written, to name that
// line when they cannot be read; the first of blocks that share them.
func (c *converter) tlsFileUse(t *forwardTLS) {
	if _, seen := c.tlsPlaces[t.tls]; !seen && t.at != nil && t.tlsTargets > 0 {
		c.tlsPlaces[t.tls] = *t.at
	}
}
