package corefile

import (
	"fmt"
	"net"
	"net/netip"
	"path/filepath"
	"slices"
	"strings"

	"github.com/shardns/shardns/config"
)

// server is the part of a server block that listens on one scheme and
// port (CoreDNS makes one server per key; keys of a block that share a
// port share a listener).
type server struct {
	block  *ServerBlock
	scheme string
	port   string
	zones  []string // the zones of this listener
	// blockZones are the zones of every key of the block: the zones its
	// plugins serve when they name none.
	blockZones []string
	listen     []string // host:port of each bind address
	root       string   // the root plugin's folder, for relative file paths
	// entry is the index of this server's servers[] listener, -1 when
	// dns.listen serves it.
	entry int
	skip  bool // a transport shardns does not have: nothing is mapped
}

// name is the server's keys as written, for messages.
func (s *server) name() string { return strings.Join(s.block.Keys, " ") }

// setupServers splits blocks into servers, picks the main one (the
// plain-DNS root zone, else the first plain-DNS block) for dns.listen
// and gives every other listener a servers[] entry.
func (c *converter) setupServers(cf *Corefile) error {
	for _, b := range cf.Blocks {
		groups := map[[2]string]*server{}
		for _, k := range b.Keys {
			addrs, err := ParseKey(k)
			if err != nil {
				return keyError(cf, b, err)
			}
			for _, a := range addrs {
				if a.Zone != "." && !config.ValidDomain(a.Zone) {
					c.unmapped(b.place(), "server block zone %s: shardns serves host-style domain names (letters, digits, - and _)", a.Zone)
					continue
				}
				key := [2]string{a.Scheme, a.Port}
				s := groups[key]
				if s == nil {
					s = &server{block: b, scheme: a.Scheme, port: a.Port, entry: -1}
					groups[key] = s
					c.servers = append(c.servers, s)
				}
				if !slices.Contains(s.zones, a.Zone) {
					s.zones = append(s.zones, a.Zone)
				}
			}
		}
		var all []string
		for _, s := range c.servers {
			if s.block == b {
				all = appendNew(all, s.zones...)
			}
		}
		for _, s := range c.servers {
			if s.block == b {
				s.blockZones = all
			}
		}
	}
	if len(c.servers) == 0 {
		return fmt.Errorf("%s: no server block has a zone shardns can serve", cf.File)
	}
	for _, s := range c.servers {
		c.readBindAndRoot(s)
	}
	for _, s := range c.servers {
		if s.scheme == "dns" && slices.Contains(s.zones, ".") {
			c.main = s
			break
		}
	}
	if c.main == nil {
		for _, s := range c.servers {
			if s.scheme == "dns" {
				c.main = s
				break
			}
		}
	}
	if c.main != nil {
		c.cfg.DNS.Listen = c.main.listen
	} else {
		c.note(c.servers[0].block.place(), "no plain DNS server block: dns.listen keeps %s", strings.Join(c.cfg.DNS.Listen, ", "))
	}
	for _, s := range c.servers {
		if s != c.main {
			c.addListener(s)
		}
	}
	return nil
}

// keyError is err in a key of b, at b's line of its file.
func keyError(cf *Corefile, b *ServerBlock, err error) error {
	file := b.File
	if file == "" { // a block built without the parser
		file = cf.File
	}
	return &Error{File: file, Line: b.Line, Msg: err.Error()}
}

// readBindAndRoot sets the listen addresses (bind) and the folder of
// relative paths (root) of s.
func (c *converter) readBindAndRoot(s *server) {
	var hosts []string
	for _, d := range s.block.Directives {
		switch d.Name {
		case "root":
			if len(d.Args) == 1 && printableWords(d) && len(directiveEnvRefs(d)) == 0 {
				s.root = d.Args[0]
			} else {
				c.unmapped(d.place(), "root needs one folder, written out (no environment variable or control character)")
			}
		case "bind":
			if d.HasBlock {
				c.unmapped(d.place(), "bind options (except) have no shardns equivalent")
			}
			for _, a := range d.Args {
				ip, err := netip.ParseAddr(a)
				if err != nil {
					c.unmapped(d.place(), "bind %s: shardns listens on IP addresses, not interfaces; write the address", a)
					continue
				}
				hosts = append(hosts, ip.String())
			}
		}
	}
	if len(hosts) == 0 {
		// CoreDNS without bind listens on every address.
		hosts = []string{"0.0.0.0"}
	}
	for _, h := range hosts {
		a := net.JoinHostPort(h, s.port)
		if !slices.Contains(s.listen, a) {
			s.listen = append(s.listen, a)
		}
	}
}

// path is p read from the root plugin's folder, as CoreDNS reads the
// files of file and hosts.
func (s *server) path(p string) string {
	if s.root == "" || filepath.IsAbs(p) {
		return p
	}
	return filepath.Join(s.root, p)
}

// addListener gives s a servers[] entry unless dns.listen serves it.
func (c *converter) addListener(s *server) {
	transport := map[string]string{"dns": "", "tls": "tls", "https": "https"}
	t, ok := transport[s.scheme]
	if !ok {
		c.unmapped(s.block.place(), "server block %q: %s:// (DNS over %s) has no shardns equivalent; its plugins are not converted",
			s.name(), s.scheme, map[string]string{"grpc": "gRPC", "quic": "QUIC", "https3": "HTTP/3"}[s.scheme])
		s.skip = true
		return
	}
	if c.chainBlock(s) && t == "" {
		c.addChainListener(s)
		return
	}
	if c.main != nil && t == "" && subset(s.listen, c.main.listen) {
		return // the zones are answered on dns.listen
	}
	hasCert := func(d *Directive) bool {
		return d.Name == "tls" && len(d.Args) >= 2 && d.Args[0] != "" && d.Args[1] != "" && printableWords(d) &&
			len(directiveEnvRefs(d)) == 0
	}
	if t != "" && !slices.ContainsFunc(s.block.Directives, hasCert) {
		c.unmapped(s.block.place(), "server block %q: %s:// needs the tls plugin's certificate; its plugins are not converted", s.name(), s.scheme)
		s.skip = true
		return
	}
	servers := c.cfg.Servers
	for i := range servers {
		if servers[i].Transport == t && sameSet(servers[i].Listen, s.listen) {
			s.entry = i
			if servers[i].Zones != nil && !slices.Contains(s.zones, ".") {
				servers[i].Zones = appendNew(servers[i].Zones, s.zones...)
			} else {
				servers[i].Zones = nil
			}
			return
		}
	}
	// An address shared in part with another listener (or with another
	// transport) would answer some zones twice or two protocols on one
	// port: shardns has no way to say that.
	if other := c.sharedAddr(s.listen); other != "" {
		c.unmapped(s.block.place(), "server block %q: %s is also %s; shardns cannot split one address between listeners this way, so its plugins are not converted",
			s.name(), strings.Join(s.listen, ", "), other)
		s.skip = true
		return
	}
	sc := config.ServerConfig{Listen: s.listen, Transport: t}
	if !slices.Contains(s.zones, ".") {
		sc.Zones = append([]string(nil), s.zones...)
	}
	c.cfg.Servers = append(c.cfg.Servers, sc)
	s.entry = len(c.cfg.Servers) - 1
	if sc.Zones != nil && c.main != nil {
		c.note(s.block.place(), "server block %q: servers[%d] listens on %s for %s only; what shardns serves in these zones (zone files, stub domains, hosts) is answered on dns.listen too",
			s.name(), s.entry, strings.Join(s.listen, ", "), strings.Join(sc.Zones, ", "))
	}
}

func (c *converter) tlsPlugin(s *server, d *Directive) {
	if s.entry < 0 || c.cfg.Servers[s.entry].Transport == "" {
		c.unmapped(d.place(), "tls in a plain DNS server block has no shardns equivalent (use a tls:// or https:// block)")
		return
	}
	if len(d.Args) < 2 {
		c.unmapped(d.place(), "tls needs a certificate and a key file")
		return
	}
	if len(d.Args) > 2 {
		c.unmapped(d.place(), "tls CA %s: client certificates are not checked by shardns", d.Args[2])
	}
	c.options(d, func(*Directive) bool { return false })
	sc := &c.cfg.Servers[s.entry]
	tls := config.TLSConfig{CertFile: d.Args[0], KeyFile: d.Args[1]}
	if sc.TLS.CertFile != "" && sc.TLS != tls {
		c.unmapped(d.place(), "tls differs from another server block on %s: one certificate per listener", strings.Join(sc.Listen, ", "))
		return
	}
	sc.TLS = tls
}

func (c *converter) whoamiPlugin(s *server, d *Directive) {
	if s.entry < 0 {
		c.unmapped(d.place(), "whoami on dns.listen has no shardns equivalent; give its server block a port of its own")
		return
	}
	c.cfg.Servers[s.entry].Whoami = true
	if len(s.block.Directives) > 1 {
		c.note(d.place(), "whoami: servers[%d] answers every query with the client's address, whatever the other plugins of its block", s.entry)
	}
}

// httpCandidate is an address health, ready or prometheus asked for.
type httpCandidate struct {
	plugin  string
	addr    string // host:port with an IP host
	written string // as the Corefile has it, for messages
	at      place
}

func (c *converter) finishHTTP() {
	if len(c.http) == 0 {
		c.cfg.HTTP.Listen = ""
		c.note(place{}, "no health, ready or prometheus plugin: http.listen: \"\" (no HTTP endpoint)")
		return
	}
	// One HTTP address serves /health, /ready and /metrics: the liveness
	// address first, as probes are what breaks when it moves.
	rank := map[string]int{"health": 0, "ready": 1, "prometheus": 2}
	best := c.http[0]
	for _, h := range c.http {
		if rank[h.plugin] < rank[best.plugin] {
			best = h
		}
	}
	c.cfg.HTTP.Listen = best.addr
	for _, h := range c.http {
		switch {
		case h.addr == best.addr:
		case h.plugin == "prometheus":
			// Scrapes of CoreDNS's :9153 (the kube-dns Service's metrics
			// port, ServiceMonitors) keep working.
			if !slices.Contains(c.cfg.HTTP.MetricsListen, h.addr) {
				c.cfg.HTTP.MetricsListen = append(c.cfg.HTTP.MetricsListen, h.addr)
			}
			c.note(h.at, "prometheus %s: /metrics on http.metricsListen %s, and on http.listen %s with /health and /ready",
				h.written, h.addr, best.addr)
		default:
			c.note(h.at, "%s %s: served on http.listen %s with /health, /ready and /metrics (shardns has one HTTP address; move probes there)",
				h.plugin, h.written, best.addr)
		}
	}
}

// httpAddr records the address of health, ready or prometheus: def when
// none is written; a host name other than localhost is not mapped.
func (c *converter) httpAddr(d *Directive, def string) {
	addr := def
	if len(d.Args) > 0 {
		addr = d.Args[0]
	}
	if len(d.Args) > 1 {
		c.unmapped(d.place(), "%s takes one address", d.Name)
	}
	host, port, err := net.SplitHostPort(addr)
	if _, perr := config.ParsePort(port); err != nil || perr != nil {
		c.unmapped(d.place(), "%s %s: not a host:port", d.Name, addr)
		return
	}
	switch host {
	case "", "0.0.0.0", "::":
		host = "0.0.0.0"
	case "localhost":
		host = "127.0.0.1"
	}
	ip, err := netip.ParseAddr(host)
	if err != nil {
		c.unmapped(d.place(), "%s %s: the host must be an IP address", d.Name, addr)
		return
	}
	c.http = append(c.http, httpCandidate{plugin: d.Name, addr: net.JoinHostPort(ip.String(), port), written: addr, at: d.place()})
}

// sharedAddr names the listener (dns.listen or servers[N]) that already
// uses one of addrs, or "".
func (c *converter) sharedAddr(addrs []string) string {
	for _, a := range addrs {
		if slices.Contains(c.cfg.DNS.Listen, a) {
			return "dns.listen"
		}
		for i, sc := range c.cfg.Servers {
			if slices.Contains(sc.Listen, a) {
				return fmt.Sprintf("servers[%d]", i)
			}
		}
	}
	return ""
}

// subset reports whether every element of a is in b.
func subset(a, b []string) bool {
	for _, x := range a {
		if !slices.Contains(b, x) {
			return false
		}
	}
	return true
}

func sameSet(a, b []string) bool {
	if len(a) != len(b) {
		return false
	}
	for _, x := range a {
		if !slices.Contains(b, x) {
			return false
		}
	}
	return true
}

func appendNew(list []string, items ...string) []string {
	for _, x := range items {
		if !slices.Contains(list, x) {
			list = append(list, x)
		}
	}
	return list
}
