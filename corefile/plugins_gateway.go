package corefile

import (
	"slices"
	"strconv"
	"strings"

	"github.com/shardns/shardns/config"
)

// gatewayPlugin maps the external k8s_gateway plugin and its options to
// the gateway section. Its zones are its arguments, else the block's.
// What it cannot serve (nginxinc's VirtualServer, fallthrough: shardns is
// authoritative for the zones) is reported with its line.
func (c *converter) gatewayPlugin(s *server, d *Directive) {
	if !c.claim("k8s_gateway", d, "k8s_gateway") {
		return
	}
	g := config.DefaultGateway()
	g.Enabled = true
	args := d.Args
	if len(args) == 0 {
		args = s.blockZones
	}
	for _, a := range args {
		z, servable := servableZone(a)
		switch {
		case !servable:
			c.unmapped(d.place(), "k8s_gateway zone %s: not a domain name", a)
		case z == ".":
			c.unmapped(d.place(), "k8s_gateway zone \".\": it would answer every name; name the zone the gateway names are published in")
		default:
			g.Zones = appendNew(g.Zones, z)
		}
	}
	c.options(d, func(o *Directive) bool { return c.gatewayOption(&g, o) })
	if len(g.Zones) > 0 {
		c.cfg.Gateway = g
	}
}

func (c *converter) gatewayOption(g *config.GatewayConfig, o *Directive) bool {
	one := func() (string, bool) {
		if len(o.Args) != 1 {
			c.unmapped(o.place(), "%s %s: takes one argument", o.Name, strings.Join(o.Args, " "))
			return "", false
		}
		return o.Args[0], true
	}
	switch o.Name {
	case "resources":
		if len(o.Args) == 0 {
			c.unmapped(o.place(), "resources: name at least one of %s", strings.Join(config.GatewayResources, " "))
			break
		}
		g.Resources = nil
		for _, r := range o.Args {
			switch {
			case slices.Contains(config.GatewayResources, r):
				g.Resources = appendNew(g.Resources, r)
			case r == "VirtualServer":
				c.unmapped(o.place(), "resources VirtualServer: nginxinc's VirtualServers are not watched by shardns")
			default:
				// k8s_gateway ignores a kind it does not know; a typo
				// would silently answer nothing, so it is reported.
				c.unmapped(o.place(), "resources %s: not one of %s", r, strings.Join(config.GatewayResources, " "))
			}
		}
	case "ttl":
		n, err := strconv.Atoi(strings.Join(o.Args, " "))
		if err != nil || n < 0 || n > 3600 {
			c.unmapped(o.place(), "ttl %s: must be 0 to 3600 seconds", strings.Join(o.Args, " "))
			break
		}
		g.TTL = n
	case "apex", "secondary":
		v, ok := one()
		if !ok {
			break
		}
		if !config.ValidDomain(v) {
			c.unmapped(o.place(), "%s %s: not a domain name", o.Name, v)
			break
		}
		if o.Name == "apex" {
			g.Apex = strings.ToLower(v)
		} else {
			g.Secondary = strings.ToLower(v)
		}
	case "kubeconfig":
		if len(o.Args) < 1 || len(o.Args) > 2 {
			c.unmapped(o.place(), "kubeconfig %s: takes a file and an optional context", strings.Join(o.Args, " "))
			break
		}
		g.Kubeconfig = o.Args[0]
		if len(o.Args) == 2 {
			g.Context = o.Args[1]
		}
	case "fallthrough":
		c.unmapped(o.place(), "fallthrough: shardns answers the k8s_gateway zones authoritatively (NXDOMAIN for a name without a record) and passes no question on")
	default:
		return false
	}
	return true
}
