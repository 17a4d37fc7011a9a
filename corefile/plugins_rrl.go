package corefile

import (
	"strconv"
	"strings"

	"github.com/shardns/shardns/config"
)

// rrlPlugin maps CoreDNS's external rrl plugin (github.com/coredns/rrl)
// to dns.rrl, and its requests-per-second to dns.rateLimit. shardns
// limits every UDP answer of every listener, whatever zones rrl names.
func (c *converter) rrlPlugin(_ *server, d *Directive) {
	if !c.claim("rrl", d, "response rate limit") {
		return
	}
	r := &c.cfg.DNS.RRL
	c.options(d, func(o *Directive) bool { return c.rrlOption(r, o) })
	if len(d.Args) > 0 && !(len(d.Args) == 1 && d.Args[0] == ".") {
		c.note(d.place(), "rrl %s: shardns limits the answers of every zone", strings.Join(d.Args, " "))
	}
}

func (c *converter) rrlOption(r *config.RRLConfig, o *Directive) bool {
	n, err := strconv.Atoi(strings.Join(o.Args, " "))
	number := func(lo, hi int) (int, bool) {
		if err != nil || n < lo || n > hi {
			c.unmapped(o.place(), "%s %s: must be a number from %d to %d", o.Name, strings.Join(o.Args, " "), lo, hi)
			return 0, false
		}
		return n, true
	}
	rate := func(p **int) {
		if v, ok := number(0, 1<<30); ok {
			*p = &v
		}
	}
	switch o.Name {
	case "responses-per-second":
		if v, ok := number(0, 1<<30); ok {
			r.ResponsesPerSecond = v
		}
	case "nodata-per-second":
		rate(&r.NodataPerSecond)
	case "nxdomains-per-second":
		rate(&r.NXDomainsPerSecond)
	case "referrals-per-second":
		rate(&r.ReferralsPerSecond)
	case "errors-per-second":
		rate(&r.ErrorsPerSecond)
	case "slip-ratio":
		rate(&r.Slip)
	case "window":
		if v, ok := number(1, 3600); ok {
			r.Window = config.Duration(int64(v) * 1e9)
		}
	case "ipv4-prefix-length":
		if v, ok := number(1, 32); ok {
			r.IPv4PrefixLength = v
		}
	case "ipv6-prefix-length":
		if v, ok := number(1, 128); ok {
			r.IPv6PrefixLength = v
		}
	case "max-table-size":
		if v, ok := number(1, 1<<24); ok {
			r.MaxTableSize = v
		}
	case "report-only":
		r.ReportOnly = true
	case "requests-per-second":
		if v, ok := number(0, 1<<30); ok {
			c.cfg.DNS.RateLimit.PerSecond = v
		}
	default:
		return false
	}
	return true
}
