package corefile

import (
	"strconv"
	"strings"

	"github.com/shardns/shardns/config"
)

// externalPlugin maps k8s_external and its options to
// kubernetes.external. Its zones are its arguments, else the block's; it
// needs the kubernetes plugin in the same block, as CoreDNS does.
func (c *converter) externalPlugin(s *server, d *Directive) {
	if !c.claim("k8s_external", d, "k8s_external") {
		return
	}
	e := &config.ExternalConfig{}
	args := d.Args
	if len(args) == 0 {
		args = s.blockZones
	}
	for _, a := range args {
		z, servable := servableZone(a)
		switch {
		case !servable:
			c.unmapped(d.place(), "k8s_external zone %s: not a domain name", a)
		case z == ".":
			c.unmapped(d.place(), "k8s_external zone \".\": it would answer every name; name the zone it publishes services in")
		default:
			e.Zones = appendNew(e.Zones, z)
		}
	}
	c.options(d, func(o *Directive) bool { return c.externalOption(e, o) })
	block := s.block
	c.deferred = append(c.deferred, func() {
		if !c.cfg.Kubernetes.Enabled || c.kubeBlock != block {
			c.unmapped(d.place(), "k8s_external needs the kubernetes plugin in its server block, whose services it publishes")
			return
		}
		if len(e.Zones) > 0 {
			c.cfg.Kubernetes.External = e
		}
	})
}

func (c *converter) externalOption(e *config.ExternalConfig, o *Directive) bool {
	switch o.Name {
	case "apex":
		if len(o.Args) != 1 || strings.Contains(o.Args[0], ".") || !config.ValidDomain(o.Args[0]) {
			c.unmapped(o.place(), "apex %s: must be one DNS label", strings.Join(o.Args, " "))
			break
		}
		e.Apex = strings.ToLower(o.Args[0])
	case "ttl":
		n, err := strconv.Atoi(strings.Join(o.Args, " "))
		if err != nil || n < 0 || n > 3600 {
			c.unmapped(o.place(), "ttl %s: must be 0 to 3600 seconds", strings.Join(o.Args, " "))
			break
		}
		e.TTL = &n
	case "headless":
		e.Headless = true
	case "fallthrough":
		e.Fallthrough = c.fallthroughZones(o, e.Zones)
	default:
		return false
	}
	return true
}
