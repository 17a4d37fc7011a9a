package zone

import (
	"strings"

	"github.com/miekg/dns"

	"github.com/shardns/shardns/model"
)

// k8s_external answers the PTR of a Service's external IP with
// <service>.<namespace>.<first external zone> in a reverse zone among its
// zones. Those records live beside the kubernetes plugin's in the /24 or
// /64 reverse zone key of the address (PTR.External), so the zone's
// owners answer both, and a replica without the zone asks them as for a
// cluster IP. CoreDNS runs the kubernetes plugin first: its records win,
// and k8s_external answers only a name it does not, where the name falls
// through it (Config.Fallthrough) or lies outside its reverse zones.

// externalPTRs are the PTRs of svc's external IPs that lie in an external
// reverse zone, as k8s_external answers them (any Service, with ports or
// not; the name of the first external zone).
func (c *Config) externalPTRs(svc *model.Service) []PTR {
	if c.External == nil || len(svc.ExternalIPs) == 0 || len(c.External.Zones) == 0 {
		return nil
	}
	var out []PTR
	target := strings.ToLower(svc.Name+"."+svc.Namespace) + "." + Join("", c.External.Zones[0])
	for _, ip := range svc.ExternalIPs {
		ip = ip.Unmap()
		name := ReverseName(ip)
		if c.Domains.externalZone(name) == "" {
			continue
		}
		if r := c.Domains.Route(name); r.Kind == RouteZone && r.Reverse {
			out = append(out, PTR{Addr: ip, Target: target, External: true})
		}
	}
	return out
}

// routeExternalReverse routes qname, in the external zone z, to the
// reverse zone key of its address when z is a reverse zone, and reports
// false otherwise. The zone's apex is routed there too when it is a key:
// the zone holding its PTRs is then placed, and its answer is the apex's.
func (d *Domains) routeExternalReverse(qname, z string) (Route, bool) {
	key := reverseKey(qname)
	if key == "" || len(key) < len(z) {
		return Route{}, false
	}
	return Route{Kind: RouteZone, Origin: z, Key: key, Reverse: true, External: true}, true
}

// externalReverseZone is the external zone that answers name, of reverse
// route, when the kubernetes plugin has no record of it: the route's own
// when it is external, else the external zone name is in when the
// kubernetes plugin lets it fall through; "" when none does.
func (c *Config) externalReverseZone(route Route, name string) string {
	if c.External == nil {
		return ""
	}
	if route.External {
		return route.Origin
	}
	if !c.fallsThrough(name) {
		return ""
	}
	return c.Domains.externalZone(name)
}

// fallsThrough reports whether the kubernetes plugin passes name on when
// it has no record of it.
func (c *Config) fallsThrough(name string) bool {
	for _, z := range c.Fallthrough {
		if InZone(name, z) {
			return true
		}
	}
	return false
}

// answerExternalPTR answers q in external reverse zone z with the
// external PTRs found for it: the records for an address's PTR, else
// NXDOMAIN with the zone's SOA, as k8s_external does. Another type, or a
// name that is not an address's, is a name of the zone as any other.
func answerExternalPTR(cfg *Config, v Reader, z string, q Question, records []dns.RR) Response {
	if _, ok := parseReverseName(q.Name); !ok || q.Type != dns.TypePTR {
		return answerExternal(cfg, v, v.Directory(), cfg.Domains.routeExternal(q.Name, z), q)
	}
	if len(records) == 0 {
		return negative(dns.RcodeNameError, v.Directory().soa[z])
	}
	return Response{Answer: records}
}
