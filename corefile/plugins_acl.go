package corefile

import (
	"strings"

	"github.com/miekg/dns"

	"github.com/shardns/shardns/config"
)

// aclPlugin maps an acl directive to one acl list: its zones (else the
// block's), and a policy per line, `ACTION [type QTYPE...] [net
// SOURCE...]`, read as CoreDNS reads them. A block other than the main
// one adds its list for every listener, limited to the block's zones.
func (c *converter) aclPlugin(s *server, d *Directive) {
	l := config.ACLConfig{Policies: []config.ACLPolicy{}}
	zones := d.Args
	if len(zones) == 0 {
		zones = s.blockZones
	}
	for _, z := range zones {
		nz, err := NormalizeZone(z)
		if err != nil {
			c.unmapped(d.place(), "acl zone %s: %v", z, err)
			return
		}
		if nz == "." {
			l.Zones = nil // every name
			break
		}
		l.Zones = appendNew(l.Zones, nz)
	}
	for _, o := range d.Block {
		p, ok := c.aclPolicy(o)
		if !ok {
			return
		}
		l.Policies = append(l.Policies, p)
	}
	if len(l.Policies) == 0 {
		c.note(d.place(), "acl without policies: every question is answered")
		return
	}
	if s != c.main && c.main != nil && len(l.Zones) == 0 {
		c.note(d.place(), "acl in server block %q applies to every server block in shardns (acl[%d])", strings.Join(s.block.Keys, " "), len(c.cfg.ACL))
	}
	c.cfg.ACL = append(c.cfg.ACL, l)
}

// aclPolicy reads one line of an acl block.
func (c *converter) aclPolicy(o *Directive) (config.ACLPolicy, bool) {
	p := config.ACLPolicy{Action: o.Name}
	switch o.Name {
	case config.ACLAllow, config.ACLBlock, config.ACLFilter, config.ACLDrop:
	default:
		c.unmapped(o.place(), "acl: unexpected %q; want allow, block, filter or drop", o.Name)
		return p, false
	}
	args := o.Args
	for len(args) > 0 {
		section := strings.ToLower(args[0])
		if section != "type" && section != "net" {
			c.unmapped(o.place(), "acl: unexpected %q; want type or net", args[0])
			return p, false
		}
		i := 1
		for i < len(args) && !strings.EqualFold(args[i], "type") && !strings.EqualFold(args[i], "net") {
			i++
		}
		tokens := args[1:i]
		args = args[i:]
		if len(tokens) == 0 {
			c.unmapped(o.place(), "acl: no value after %q", section)
			return p, false
		}
		for _, t := range tokens {
			switch {
			case t == "*":
			case section == "type":
				if _, ok := dns.StringToType[t]; !ok {
					c.unmapped(o.place(), "acl: %q is not a DNS type", t)
					return p, false
				}
			default:
				if _, err := config.ParseACLNet(t); err != nil {
					c.unmapped(o.place(), "acl: %v", err)
					return p, false
				}
			}
		}
		if section == "type" {
			p.Types = append(p.Types, tokens...)
		} else {
			p.Nets = append(p.Nets, tokens...)
		}
	}
	return p, true
}
