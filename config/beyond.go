package config

import (
	"fmt"
	"net/netip"
	"strconv"
	"strings"
)

// ServerConfig is one extra listener, like a Corefile server block on its
// own port: plain DNS, DNS over TLS or DNS over HTTPS, optionally limited
// to some zones.
type ServerConfig struct {
	// Listen addresses, host:port.
	Listen []string `json:"listen"`
	// Transport is dns (UDP and TCP; the default), tls (RFC 7858) or
	// https (RFC 8484).
	Transport string `json:"transport"`
	// Zones this listener answers; names outside them get REFUSED. Empty
	// answers every name.
	Zones []string `json:"zones"`
	// TLS is the certificate of tls and https listeners, re-read when the
	// files change.
	TLS TLSConfig `json:"tls"`
	// Path is the URL path of DNS over HTTPS; default /dns-query.
	Path string `json:"path"`
	// Whoami answers every query with the client's address, port and
	// transport (CoreDNS's whoami plugin) instead of records.
	Whoami bool `json:"whoami"`
	// Chain is this block's own plugin chain (chain.go); nil answers
	// through the top-level keys.
	Chain *ChainConfig `json:"chain"`
}

// TLSConfig is a certificate and its key, PEM files.
type TLSConfig struct {
	CertFile string `json:"certFile"`
	KeyFile  string `json:"keyFile"`
}

// StubConfig forwards some zones to their own upstreams (a stub domain).
type StubConfig struct {
	// Zones forwarded to these upstreams; the longest match wins.
	Zones []string `json:"zones"`
	// Upstreams as in forward.upstreams.
	Upstreams []string `json:"upstreams"`
	// Policy as in forward.policy; empty: forward.policy.
	Policy string `json:"policy"`
	// TLS is how this stub's tls:// and https:// upstreams are trusted,
	// as forward.tls is for the default ones (not inherited from it: a
	// stub domain's servers have names of their own, as each forward
	// block of a Corefile has its own tls and tls_servername).
	TLS UpstreamTLSConfig `json:"tls"`
	// ForwardOptions are this stub's own forceTCP, preferUDP, failover
	// and except, not inherited from forward.*.
	ForwardOptions
	// Next are rcodes on which this stub's answer is passed over and the
	// question goes to the forwarder of the next shorter zone that holds
	// the name (another stub, or forward.upstreams), as CoreDNS's next
	// goes on to the forward that follows.
	Next []string `json:"next"`
}

// UpstreamTLSConfig is how shardns trusts DNS over TLS and DNS over
// HTTPS upstreams.
type UpstreamTLSConfig struct {
	// ServerName is the name the upstream's certificate must hold, also
	// sent as SNI (and as the HTTP Host to https:// upstreams, as
	// CoreDNS sends it); empty: the upstream's IP address.
	ServerName string `json:"serverName"`
	// CAFile holds the PEM certificates that may sign the upstream's;
	// empty: the system's roots.
	CAFile string `json:"caFile"`
	// CertFile and KeyFile are a client certificate and its key (PEM),
	// for upstreams that ask for one; both or neither.
	CertFile string `json:"certFile"`
	KeyFile  string `json:"keyFile"`
}

// upstreamTLS lists the TLS settings of the forwarder and of each stub,
// to be read or rewritten in place.
func (f *ForwardConfig) upstreamTLS() []*UpstreamTLSConfig {
	out := []*UpstreamTLSConfig{&f.TLS}
	for i := range f.Stubs {
		out = append(out, &f.Stubs[i].TLS)
	}
	return out
}

// checkUpstreamTLS reports a server name that is no host name or IP
// address, and half a client certificate. Whether the files can be read
// is checked when the forwarder starts, which reads them.
func checkUpstreamTLS(bad func(key, format string, args ...any), key string, t UpstreamTLSConfig) {
	if n := t.ServerName; n != "" {
		if _, err := netip.ParseAddr(n); err != nil && !ValidDomain(n) {
			bad(key+".serverName", "%q is neither a host name nor an IP address", n)
		}
	}
	if (t.CertFile == "") != (t.KeyFile == "") {
		bad(key, "certFile and keyFile: a client certificate needs both")
	}
}

// FileZoneConfig is one authoritative RFC 1035 zone file.
type FileZoneConfig struct {
	// File is the zone file's path.
	File string `json:"file"`
	// Origin is the zone's name; empty: the file's $ORIGIN or SOA owner.
	Origin string `json:"origin"`
	// TransferTo lists the addresses (IPs or CIDRs, "*" for any) allowed
	// to transfer the zone with AXFR over TCP.
	TransferTo []string `json:"transferTo"`
}

// FilesConfig is the zone file source.
type FilesConfig struct {
	Zones []FileZoneConfig `json:"zones"`
	// Interval between checks of the files for changes.
	Interval Duration `json:"interval"`
}

// HostsConfig answers names from /etc/hosts-format entries.
type HostsConfig struct {
	// Entries are inline lines: "IP name [name...]".
	Entries []string `json:"entries"`
	// Files in /etc/hosts format.
	Files []string `json:"files"`
	// Zones the hosts entries answer for; empty: every name.
	Zones []string `json:"zones"`
	// TTL of the answers, seconds.
	TTL int `json:"ttl"`
	// NoReverse serves no PTR records for the entries.
	NoReverse bool `json:"noReverse"`
	// Fallthrough zones pass names not in the entries on; "." passes all.
	Fallthrough []string `json:"fallthrough"`
	// Interval between checks of the files for changes.
	Interval Duration `json:"interval"`
}

// ChaosConfig answers CHAOS-class TXT queries (version.bind and friends).
type ChaosConfig struct {
	// Enabled answers version.bind, version.server, hostname.bind and
	// id.server; otherwise CHAOS queries get REFUSED.
	Enabled bool `json:"enabled"`
	// Version is the version.bind answer; empty: "shardns-" and the
	// build's version.
	Version string `json:"version"`
	// Authors are the authors.bind answer, one TXT record each (CoreDNS's
	// chaos VERSION AUTHORS...); empty: authors.bind is refused.
	Authors []string `json:"authors"`
}

// RateLimitConfig bounds the UDP queries each client address may send.
type RateLimitConfig struct {
	// PerSecond per client IP; 0 disables the limit.
	PerSecond int `json:"perSecond"`
	// Burst is how many queries a client that was quiet may send at once
	// (the bucket's size); 0 means PerSecond.
	Burst int `json:"burst"`
}

func (c *Config) validateBeyond(bad func(key, format string, args ...any)) {
	for i := range c.Servers {
		s := &c.Servers[i]
		key := fmt.Sprintf("servers[%d]", i)
		if s.Transport == "" {
			s.Transport = "dns"
		}
		if s.Transport == "https" && s.Path == "" {
			s.Path = "/dns-query"
		}
		if len(s.Listen) == 0 {
			bad(key+".listen", "needs at least one address")
		}
		for j, a := range s.Listen {
			if err := checkHostPort(a); err != nil {
				bad(fmt.Sprintf("%s.listen[%d]", key, j), "%v", err)
			}
		}
		switch s.Transport {
		case "dns":
		case "tls", "https":
			if s.TLS.CertFile == "" || s.TLS.KeyFile == "" {
				bad(key+".tls", "%s needs certFile and keyFile", s.Transport)
			}
		default:
			bad(key+".transport", "must be dns, tls or https, got %q", s.Transport)
		}
		if s.Transport == "https" && !strings.HasPrefix(s.Path, "/") {
			bad(key+".path", "must start with /, got %q", s.Path)
		}
		checkZones(bad, key+".zones", s.Zones, true)
	}
	c.checkServerAddrs(bad)
	c.validateStubs(bad, "forward.stubs", c.Forward.Stubs)
	if c.Files.Interval <= 0 {
		bad("files.interval", "must be positive")
	}
	for i, z := range c.Files.Zones {
		key := fmt.Sprintf("files.zones[%d]", i)
		if z.File == "" {
			bad(key+".file", "is empty")
		}
		if z.Origin != "" {
			// "." is the root zone's (a Corefile's `. { file db.root }`),
			// which names its records relative to the root.
			checkZones(bad, key+".origin", []string{z.Origin}, true)
			c.checkFileOrigin(bad, i)
		}
		checkTransferTo(bad, key+".transferTo", z.TransferTo)
	}
	validateHosts(bad, "hosts", &c.Hosts)
	validateRewrites(bad, "rewrite", c.Rewrite)
	validateTemplates(bad, "template", c.Template)
	if rl := c.DNS.RateLimit; rl.PerSecond < 0 || rl.Burst < 0 {
		bad("dns.rateLimit", "perSecond and burst must not be negative")
	}
}

// validateStubs checks the stub domains listed under key.
func (c *Config) validateStubs(bad func(key, format string, args ...any), key string, stubs []StubConfig) {
	for i, s := range stubs {
		key := fmt.Sprintf("%s[%d]", key, i)
		if len(s.Zones) == 0 {
			bad(key+".zones", "needs at least one zone")
		}
		checkZones(bad, key+".zones", s.Zones, true)
		c.checkStubZones(bad, key+".zones", s.Zones)
		if len(s.Upstreams) == 0 {
			bad(key+".upstreams", "needs at least one upstream")
		}
		checkUpstreams(bad, key+".upstreams", s.Upstreams)
		switch s.Policy {
		case "", "random", "round_robin", "sequential":
		default:
			bad(key+".policy", "must be random, round_robin or sequential, got %q", s.Policy)
		}
		checkUpstreamTLS(bad, key+".tls", s.TLS)
		checkForwardOptions(bad, key+".", s.ForwardOptions)
		checkRcodes(bad, key+".next", s.Next, true)
	}
}

// validateHosts checks the hosts entries under key.
func validateHosts(bad func(key, format string, args ...any), key string, h *HostsConfig) {
	if h.TTL < 0 || h.TTL > 3600*24*7 {
		bad(key+".ttl", "must be between 0 and 604800, got %d", h.TTL)
	}
	if h.Interval <= 0 {
		bad(key+".interval", "must be positive")
	}
	checkZones(bad, key+".zones", h.Zones, true)
	checkZones(bad, key+".fallthrough", h.Fallthrough, true)
	for i, f := range h.Files {
		if f == "" {
			bad(fmt.Sprintf("%s.files[%d]", key, i), "is empty")
		}
	}
	for i, e := range h.Entries {
		if _, _, _, err := ParseHostsLine(e); err != nil {
			bad(fmt.Sprintf("%s.entries[%d]", key, i), "%v", err)
		}
	}
}

// validateTemplates checks the templates under key by compiling them.
func validateTemplates(bad func(key, format string, args ...any), key string, ts []Template) {
	if _, err := ParseTemplates(ts); err != nil {
		// Each error starts with its key (template[0].match[1]: ...).
		for _, line := range strings.Split(err.Error(), "\n") {
			k, msg, _ := strings.Cut(line, ": ")
			bad(key+strings.TrimPrefix(k, "template"), "%s", msg)
		}
	}
}

// ParseTTLRange reads a rewrite TTL: "N" or "MIN-MAX" seconds.
func ParseTTLRange(s string) (lo, hi uint32, err error) {
	a, b, isRange := strings.Cut(s, "-")
	if !isRange {
		b = a
	}
	x, err1 := strconv.ParseUint(a, 10, 32)
	y, err2 := strconv.ParseUint(b, 10, 32)
	if err1 != nil || err2 != nil || x > y {
		return 0, 0, fmt.Errorf("must be N or MIN-MAX seconds, got %q", s)
	}
	return uint32(x), uint32(y), nil
}

// checkZones reports entries of zones that are not domain names; "." (the
// root, every name) is accepted where root is true.
func checkZones(bad func(key, format string, args ...any), key string, zones []string, root bool) {
	for i, z := range zones {
		if root && z == "." {
			continue
		}
		if !ValidDomain(z) {
			bad(fmt.Sprintf("%s[%d]", key, i), "%q is not a domain name", z)
		}
	}
}

// checkStubZones rejects stub zones inside a cluster or reverse zone that
// no kubernetes.fallthrough zone overlaps: shardns answers every name
// there itself, so the stub would never be asked.
func (c *Config) checkStubZones(bad func(key, format string, args ...any), key string, zones []string) {
	k := &c.Kubernetes
	all := k.AllZones()
	for i, z := range zones {
		for _, own := range all {
			if !underZone(z, own) {
				continue
			}
			overlaps := false
			for _, f := range k.Fallthrough {
				overlaps = overlaps || underZone(z, f) || underZone(f, z)
			}
			if !overlaps {
				bad(fmt.Sprintf("%s[%d]", key, i), "%q is inside %q, whose names shardns answers itself; "+
					"a stub there is asked only for the NXDOMAINs of kubernetes.fallthrough zones, and none overlaps it", z, own)
			}
			break
		}
	}
}

// checkFileOrigin rejects a configured file zone origin that overlaps a
// cluster or reverse zone (whose names the Kubernetes records own) or is
// the origin of an earlier file zone. Origins read from the files are
// checked when they are loaded.
func (c *Config) checkFileOrigin(bad func(key, format string, args ...any), i int) {
	key, origin := fmt.Sprintf("files.zones[%d].origin", i), c.Files.Zones[i].Origin
	k := &c.Kubernetes
	for _, own := range []struct {
		key   string
		zones []string
	}{{"kubernetes.zones", k.Zones}, {"kubernetes.reverseZones", k.ReverseZones}} {
		for j, z := range own.zones {
			if z == "." && own.key == "kubernetes.zones" && c.fileBlock(origin) {
				continue
			}
			if underZone(origin, z) || underZone(z, origin) {
				bad(key, "%q overlaps %s[%d] %q: a file zone cannot share names with a cluster or reverse zone", origin, own.key, j, z)
			}
		}
	}
	for j := range i {
		if o := c.Files.Zones[j].Origin; o != "" && underZone(o, origin) && underZone(origin, o) {
			bad(key, "%q is also the origin of files.zones[%d]", origin, j)
		}
	}
}

// fileBlock reports whether a server block with a chain answers the
// zone file of origin without the cluster's names: beside cluster names
// under the root (kubernetes.zones: [.]) its names reach that block,
// the longest zone, and never the cluster's (CoreDNS's own multi-block
// example: a "." block with kubernetes beside blocks with file).
func (c *Config) fileBlock(origin string) bool {
	for _, s := range c.Servers {
		if s.Chain == nil || s.Chain.AnswersCluster() || !s.Chain.AnswersFiles() {
			continue
		}
		for _, z := range s.Zones {
			if z != "." && underZone(origin, z) {
				return true
			}
		}
	}
	return false
}

// FilesOutsideBlocks reports whether a zone file is answered by no
// server block of its own (fileBlock), so the top level's chain would
// have to.
func (c *Config) FilesOutsideBlocks() bool {
	for _, z := range c.Files.Zones {
		if z.Origin == "" || !c.fileBlock(z.Origin) {
			return true
		}
	}
	return false
}

// underZone reports whether name equals zone or lies below it.
func underZone(name, zone string) bool {
	n := strings.ToLower(strings.TrimSuffix(name, "."))
	z := strings.ToLower(strings.TrimSuffix(zone, "."))
	return z == "" || n == z || strings.HasSuffix(n, "."+z)
}

// checkTransferTo checks a transferTo list: IPs, CIDRs and "*".
func checkTransferTo(bad func(key, format string, args ...any), key string, list []string) {
	for j, a := range list {
		if a == "*" {
			continue
		}
		if _, err := netip.ParsePrefix(a); err == nil {
			continue
		}
		if _, err := netip.ParseAddr(a); err != nil {
			bad(fmt.Sprintf("%s[%d]", key, j), "%q is not an IP address, a CIDR or *", a)
		}
	}
}

// TransferPrefixes is a checked transferTo list as the prefixes it
// allows ("*": every address of both families).
func TransferPrefixes(list []string) []netip.Prefix {
	var to []netip.Prefix
	for _, a := range list {
		switch p, err := netip.ParsePrefix(a); {
		case a == "*":
			to = append(to, netip.MustParsePrefix("0.0.0.0/0"), netip.MustParsePrefix("::/0"))
		case err == nil:
			to = append(to, p.Masked())
		default:
			if ip, err := netip.ParseAddr(a); err == nil {
				ip = ip.Unmap()
				to = append(to, netip.PrefixFrom(ip, ip.BitLen()))
			}
		}
	}
	return to
}
