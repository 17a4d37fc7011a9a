package zone

import (
	"strings"

	"github.com/miekg/dns"
)

// Chasing is what CoreDNS's k8s_external does through its upstream (the
// server itself, whose plugins then answer or forward) for a load
// balancer that has an ingress hostname rather than an IP: an A or AAAA
// answer gets, behind each CNAME to the hostname, the hostname's records
// of that type; an SRV answer gets the hostname's A and AAAA records in
// its additional section, once per target. The owner of a namespace
// answers with the CNAME and SRV records alone; the replica the client
// asked completes them, so that the lookups run where the client's
// forwarder, cache and views are, and the owner's cached answer stays
// the same for every replica.

// ExternalChases reports whether the answer to a question of type qtype
// for name, a name of an external zone, needs records looked up
// upstream: a CNAME in an A or AAAA answer, or an SRV record whose target
// is outside the external zone.
func (c *Config) ExternalChases(name string, qtype uint16, answer []dns.RR) bool {
	if c.External == nil || (qtype != dns.TypeA && qtype != dns.TypeAAAA && qtype != dns.TypeSRV) {
		return false
	}
	z := c.Domains.externalZone(name)
	if z == "" {
		return false
	}
	for _, rr := range answer {
		switch rr := rr.(type) {
		case *dns.CNAME:
			if qtype != dns.TypeSRV {
				return true
			}
		case *dns.SRV:
			if qtype == dns.TypeSRV && !InZone(strings.ToLower(rr.Target), z) {
				return true
			}
		}
	}
	return false
}

// Lookup asks the server itself for name and type qtype; nil when
// nothing answered.
type Lookup func(name string, qtype uint16) *dns.Msg

// ChaseExternal completes an answer of external zone z to a question of
// type qtype (one ExternalChases accepts) with lookup's records, as
// k8s_external does; answer and extra are not written. truncated is
// whether any lookup for an A or AAAA answer was truncated, which
// CoreDNS copies into the response.
func ChaseExternal(z string, qtype uint16, answer, extra []dns.RR, lookup Lookup) (ans, ext []dns.RR, truncated bool) {
	if qtype != dns.TypeSRV {
		ans = make([]dns.RR, 0, len(answer))
		for _, rr := range answer {
			ans = append(ans, rr)
			c, ok := rr.(*dns.CNAME)
			if !ok {
				continue
			}
			if m := lookup(c.Target, qtype); m != nil {
				ans = append(ans, m.Answer...)
				truncated = truncated || m.Truncated
			}
		}
		return ans, extra, truncated
	}
	ext = append([]dns.RR(nil), extra...)
	seen := map[string]bool{}
	for _, rr := range answer {
		srv, ok := rr.(*dns.SRV)
		if !ok {
			continue
		}
		target := strings.ToLower(srv.Target)
		if InZone(target, z) || seen[target] {
			continue
		}
		seen[target] = true
		for _, t := range []uint16{dns.TypeA, dns.TypeAAAA} {
			if m := lookup(srv.Target, t); m != nil {
				ext = append(ext, m.Answer...)
			}
		}
	}
	return answer, ext, false
}

// ExternalZone is the external zone name is in, "" when none.
func (c *Config) ExternalZone(name string) string { return c.Domains.externalZone(name) }
