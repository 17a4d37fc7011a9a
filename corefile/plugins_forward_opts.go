package corefile

import (
	"slices"
	"strings"

	"github.com/shardns/shardns/config"
)

// forwardOpts is what a forward block says beyond its upstreams and
// their TLS: the options a stub domain has of its own too, and max_age.
type forwardOpts struct {
	opts   config.ForwardOptions
	next   []string
	nextAt *place
	maxAge *config.Duration
}

// forwardOption maps force_tcp, prefer_udp, max_age, next, failover and
// except; false for any other option.
func (c *converter) forwardOption(o *Directive, f *forwardOpts) bool {
	switch o.Name {
	case "force_tcp", "prefer_udp":
		if len(o.Args) > 0 {
			c.unmapped(o.place(), "%s %s: takes no argument", o.Name, strings.Join(o.Args, " "))
		} else if o.Name == "force_tcp" {
			f.opts.ForceTCP = true
		} else {
			f.opts.PreferUDP = true
		}
	case "max_age":
		if d, ok := c.duration(o, 0); ok {
			m := config.Duration(d)
			f.maxAge = &m
		}
	case "next":
		if rc, ok := c.rcodes(o, true); ok {
			at := o.place()
			f.next, f.nextAt = rc, &at
		}
	case "failover":
		if rc, ok := c.rcodes(o, false); ok {
			f.opts.Failover = rc
		}
	case "except":
		f.opts.Except = append(f.opts.Except, c.exceptZones(o)...)
	default:
		return false
	}
	return true
}

// rcodes reads o's arguments as rcode names, upper-case; NOERROR only
// when noError (CoreDNS refuses it in failover).
func (c *converter) rcodes(o *Directive, noError bool) ([]string, bool) {
	if len(o.Args) == 0 {
		c.unmapped(o.place(), "%s needs at least one rcode", o.Name)
		return nil, false
	}
	var out []string
	for _, a := range o.Args {
		rc, err := config.ParseRcodes([]string{a})
		switch {
		case err != nil:
			c.unmapped(o.place(), "%s %s: not an rcode", o.Name, a)
			return nil, false
		case rc[0] == 0 && !noError:
			c.unmapped(o.place(), "%s %s: CoreDNS refuses NOERROR there too", o.Name, a)
			return nil, false
		}
		out = append(out, strings.ToUpper(a))
	}
	return out, true
}

// exceptZones reads the zones of except: names under them are not
// forwarded (forward.except, forward.stubs[].except).
func (c *converter) exceptZones(o *Directive) []string {
	var out []string
	for _, a := range o.Args {
		z, err := NormalizeZone(a)
		switch {
		case err != nil:
			c.unmapped(o.place(), "except %s: %v", a, err)
		case z == ".":
			c.unmapped(o.place(), "except .: every name but the root would go unforwarded; leave the forward out")
		default:
			out = append(out, z)
		}
	}
	if len(o.Args) == 0 {
		c.unmapped(o.place(), "except needs at least one zone")
	}
	return out
}

// forwardAfter reports whether a forward or proxy written after d in
// s's block forwards from a zone that holds from, and whether that zone
// is from itself: where CoreDNS's next and except send a name on to.
func forwardAfter(s *server, d *Directive, from string) (follows, same bool) {
	i := slices.Index(s.block.Directives, d)
	for _, e := range s.block.Directives[i+1:] {
		if (e.Name != "forward" && e.Name != "proxy") || len(e.Args) == 0 {
			continue
		}
		z, err := NormalizeZone(e.Args[0])
		if err != nil || (z != "." && !underAny(from, []string{z})) {
			continue
		}
		follows = true
		same = same || z == from || (z == "." && from == ".")
	}
	return follows, same
}

// nextRcodes settles next: a stub's are kept when a forward for a
// shorter zone follows it in its block, as shardns then asks the
// forwarder of the next shorter zone. The default forwarder has nothing
// after it; nor has a forward that is alone in its block, whose next
// CoreDNS ignores too.
func (c *converter) nextRcodes(s *server, d *Directive, spec *forwardSpec) []string {
	o := &spec.opts
	if o.next == nil {
		return nil
	}
	from := spec.zones[0]
	if len(d.Args) > 0 && d.Args[0] == "." {
		from = "."
	}
	follows, same := forwardAfter(s, d, from)
	switch {
	case same:
		c.unmapped(*o.nextAt, "next %s: the forward it passes to is a second forwarder for %s, which shardns does not have (list its upstreams with failover in one forward)",
			strings.Join(o.next, " "), strings.Join(spec.zones, " "))
	case !follows:
		c.note(*o.nextAt, "next %s: no forward follows in this server block, so CoreDNS ignores it, and so does shardns", strings.Join(o.next, " "))
	default:
		return o.next
	}
	return nil
}

// checkExcept reports except in a stub whose forward is alone in its
// server block: CoreDNS answers those names SERVFAIL (no plugin after
// forward), shardns asks the forwarder of the next shorter zone.
func (c *converter) checkExcept(s *server, d *Directive, spec *forwardSpec) {
	ex := spec.opts.opts.Except
	if len(ex) == 0 || spec.zones[0] == "." {
		return
	}
	from := spec.zones[0]
	if d.Args[0] == "." {
		from = "."
	}
	if follows, _ := forwardAfter(s, d, from); !follows {
		c.unmapped(d.place(), "%s except %s: CoreDNS answers these names SERVFAIL, as no forward follows in the server block; shardns asks the forwarder of the next shorter zone (forward.upstreams)",
			d.Name, strings.Join(ex, " "))
	}
}

// checkMaxAge reports a max_age shorter than expire, which CoreDNS
// refuses, and leaves it out.
func (c *converter) checkMaxAge(d *Directive, o *forwardOpts, expire config.Duration) {
	if o.maxAge != nil && *o.maxAge > 0 && *o.maxAge < expire {
		c.unmapped(d.place(), "%s: max_age %s is less than expire %s, which CoreDNS refuses", d.Name, o.maxAge.D(), expire.D())
		o.maxAge = nil
	}
}
