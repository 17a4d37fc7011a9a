package corefile

import (
	"net/netip"
	"slices"
	"strconv"
	"strings"

	"github.com/miekg/dns"

	"github.com/shardns/shardns/config"
	"github.com/shardns/shardns/hosts"
)

// filePlugin maps file DBFILE [ZONES...] to one files.zones entry per
// zone; the zones default to the block's, as in CoreDNS.
func (c *converter) filePlugin(s *server, d *Directive) {
	if len(d.Args) == 0 {
		c.unmapped(d.place(), "file needs a zone file")
		return
	}
	zones := s.blockZones
	if len(d.Args) > 1 {
		zones = nil
		for _, a := range d.Args[1:] {
			zs, err := keyZones(a)
			if err != nil {
				c.unmapped(d.place(), "file zone %s: %v", a, err)
				continue
			}
			zones = append(zones, zs...)
		}
	}
	var transferTo []string
	c.options(d, func(o *Directive) bool {
		switch o.Name {
		case "reload":
			c.filesInterval(o)
		case "transfer":
			if len(o.Args) < 2 || o.Args[0] != "to" {
				c.unmapped(o.place(), "transfer %s: shardns transfers its zones out (transfer to), never in", strings.Join(o.Args, " "))
				break
			}
			transferTo = c.transferAddrs(o, transferTo, o.Args[1:])
		case "upstream":
			c.note(o.place(), "upstream: obsolete in CoreDNS; CNAME targets outside the zone are left to the client's resolver")
		default:
			return false
		}
		return true
	})
	for _, z := range zones {
		// The origin is the zone, the root's too: CoreDNS reads the file
		// relative to it (@ and relative names) and wants its SOA there.
		fz := config.FileZoneConfig{File: s.path(d.Args[0]), Origin: z, TransferTo: transferTo}
		if z != "." && !config.ValidDomain(z) {
			c.unmapped(d.place(), "file zone %s: not a host-style domain name", z)
			continue
		}
		if i := c.fileZone(z); i >= 0 {
			c.unmapped(d.place(), "file zone %s: already served from %s", z, c.cfg.Files.Zones[i].File)
			continue
		}
		c.cfg.Files.Zones = append(c.cfg.Files.Zones, fz)
		c.filePlaces = append(c.filePlaces, d.place())
		c.blockFiles[s.block] = append(c.blockFiles[s.block], len(c.cfg.Files.Zones)-1)
	}
}

// dropClusterFileZones leaves out file zones that share names with a
// kubernetes zone: shardns answers those names from the cluster's records
// alone, where CoreDNS would ask whichever plugin comes first.
func (c *converter) dropClusterFileZones() {
	k := c.cfg.Kubernetes
	own := k.AllZones()
	var kept []config.FileZoneConfig
	for i, fz := range c.cfg.Files.Zones {
		clash := ""
		for _, z := range own {
			if fz.Origin == "." || underAny(fz.Origin, []string{z}) || underAny(z, []string{fz.Origin}) {
				clash = z
				break
			}
		}
		if clash != "" {
			c.unmapped(c.filePlaces[i], "file zone %s shares names with the kubernetes zone %s: shardns answers those from the cluster's records only", fz.Origin, clash)
			continue
		}
		kept = append(kept, fz)
	}
	c.cfg.Files.Zones = kept
}

// fileZone is the index of the files.zones entry of origin z, or -1.
func (c *converter) fileZone(z string) int {
	for i, f := range c.cfg.Files.Zones {
		if f.Origin == z {
			return i
		}
	}
	return -1
}

// filesInterval maps a file plugin's reload: shardns checks every zone
// file at one interval.
func (c *converter) filesInterval(o *Directive) {
	dur, ok := c.duration(o, 0)
	if !ok {
		return
	}
	if dur == 0 {
		c.unmapped(o.place(), "reload 0: shardns re-reads changed zone files (files.interval)")
		return
	}
	if c.claim("files.interval", o, "zone file check interval") {
		c.cfg.Files.Interval = config.Duration(dur)
	}
}

// transferPlugin maps transfer [ZONES] { to ADDRESS... } onto the zones
// the file plugins of the same block serve.
func (c *converter) transferPlugin(s *server, d *Directive) {
	var zones []string
	for _, a := range d.Args {
		if z, err := NormalizeZone(a); err == nil {
			zones = append(zones, z)
		}
	}
	var to []string
	c.options(d, func(o *Directive) bool {
		if o.Name != "to" {
			return false
		}
		to = c.transferAddrs(o, to, o.Args)
		return true
	})
	matched := false
	for _, i := range c.blockFiles[s.block] {
		fz := &c.cfg.Files.Zones[i]
		if len(zones) == 0 || slices.Contains(zones, fz.Origin) {
			fz.TransferTo = appendNew(fz.TransferTo, to...)
			matched = true
		}
	}
	block := s.block
	c.deferred = append(c.deferred, func() {
		// After k8s_external's own deferred mapping, appended before.
		if !c.externalTransfer(block, d.place(), zones, to) && !matched {
			c.unmapped(d.place(), "transfer: shardns transfers the zones of file plugins and k8s_external only")
		}
	})
}

// externalTransfer maps transfer onto the k8s_external zones of block
// that it covers (zones, or all of them when it names none), and reports
// whether there were any. shardns has one transferTo for all of
// k8s_external's zones; a transfer naming only some is noted.
func (c *converter) externalTransfer(block *ServerBlock, at place, zones, to []string) bool {
	e := c.cfg.Kubernetes.External
	if e == nil || c.kubeBlock != block {
		return false
	}
	covered := 0
	for _, z := range e.Zones {
		if len(zones) == 0 || slices.ContainsFunc(zones, func(t string) bool { return t == "." || dns.IsSubDomain(dns.Fqdn(t), dns.Fqdn(z)) }) {
			covered++
		}
	}
	if covered == 0 {
		return false
	}
	e.TransferTo = appendNew(e.TransferTo, to...)
	if covered < len(e.Zones) {
		c.unmapped(at, "note: transfer covers some of k8s_external's zones; shardns lets the same clients transfer all of them")
	}
	return true
}

// transferAddrs adds the addresses zones may be transferred to: "*",
// IPs and CIDRs (a port, where CoreDNS sends NOTIFY, is dropped).
func (c *converter) transferAddrs(o *Directive, list, addrs []string) []string {
	for _, a := range addrs {
		switch {
		case a == "*":
		case isPrefix(a):
		default:
			if ap, err := netip.ParseAddrPort(a); err == nil {
				a = ap.Addr().String()
			} else if ip, err := netip.ParseAddr(a); err == nil {
				a = ip.String()
			} else {
				c.unmapped(o.place(), "transfer to %s: not an IP address, a CIDR or *", a)
				continue
			}
		}
		list = appendNew(list, a)
	}
	return list
}

func isPrefix(a string) bool {
	_, err := netip.ParsePrefix(a)
	return err == nil
}

// hostsPlugin maps hosts [FILE [ZONES...]] { entries and options }.
func (c *converter) hostsPlugin(s *server, d *Directive) {
	if !c.claim("hosts", d, "hosts plugin") {
		return
	}
	h := &c.cfg.Hosts
	file := "/etc/hosts"
	if len(d.Args) > 0 {
		file = s.path(d.Args[0])
	}
	h.Files = []string{file}
	zones := s.blockZones
	if len(d.Args) > 1 {
		zones = d.Args[1:]
	}
	h.Zones = c.zoneList(d, zones)
	c.options(d, func(o *Directive) bool { return c.hostsOption(h, o) })
}

func (c *converter) hostsOption(h *config.HostsConfig, o *Directive) bool {
	switch o.Name {
	case "ttl":
		n, err := strconv.Atoi(strings.Join(o.Args, " "))
		if err != nil || n < 0 || n > 604800 {
			c.unmapped(o.place(), "ttl %s: must be 0 to 604800 seconds", strings.Join(o.Args, " "))
			break
		}
		h.TTL = n
	case "no_reverse":
		h.NoReverse = true
	case "reload":
		dur, ok := c.duration(o, 0)
		if ok && dur == 0 {
			c.unmapped(o.place(), "reload 0: shardns re-reads changed hosts files (hosts.interval)")
		} else if ok {
			h.Interval = config.Duration(dur)
		}
	case "fallthrough":
		h.Fallthrough = c.zoneList(o, o.Args)
		if len(o.Args) == 0 {
			h.Fallthrough = h.Zones
		}
		if len(h.Fallthrough) == 0 {
			h.Fallthrough = []string{"."}
		}
	default:
		if _, err := netip.ParseAddr(o.Name); err != nil || o.HasBlock {
			return false
		}
		line := strings.Join(append([]string{o.Name}, o.Args...), " ")
		if _, _, err := hosts.ParseLine(line); err != nil {
			c.unmapped(o.place(), "hosts entry %v", err)
			break
		}
		h.Entries = append(h.Entries, line)
	}
	return true
}

// zoneList normalizes zones for a key that takes "." as every name; a
// list holding the root is nil (every name).
func (c *converter) zoneList(d *Directive, zones []string) []string {
	var out []string
	for _, a := range zones {
		z, err := NormalizeZone(a)
		switch {
		case err == nil && z == ".":
			return nil
		case err != nil || !config.ValidDomain(z):
			c.unmapped(d.place(), "%s zone %s: not a host-style domain name", d.Name, a)
		default:
			out = appendNew(out, z)
		}
	}
	return out
}
