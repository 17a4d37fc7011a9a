package corefile

import (
	"regexp"
	"slices"
	"strings"
	"time"

	"github.com/miekg/dns"

	"github.com/shardns/shardns/config"
)

func (c *converter) errorsPlugin(s *server, d *Directive) {
	c.errorsLogged = true
	c.cfg.Log.Errors = true
	c.global(s, d, "log.errors")
	if len(d.Args) > 0 {
		c.unmapped(d.place(), "errors %s: shardns logs errors to stderr", strings.Join(d.Args, " "))
	}
	c.options(d, func(o *Directive) bool {
		if o.Name != "consolidate" {
			return false
		}
		c.consolidate(o)
		return true
	})
}

// consolidate maps errors' consolidate DURATION REGEXP [LEVEL]
// [show_first] to a log.errorsConsolidate rule.
func (c *converter) consolidate(o *Directive) {
	args := o.Args
	if len(args) < 2 || len(args) > 4 {
		c.unmapped(o.place(), "errors consolidate needs DURATION REGEXP [LEVEL] [show_first]")
		return
	}
	window, err := time.ParseDuration(args[0])
	if err != nil || window <= 0 {
		c.unmapped(o.place(), "errors consolidate %s: not a positive duration", args[0])
		return
	}
	if _, err := regexp.Compile(args[1]); err != nil {
		c.unmapped(o.place(), "errors consolidate %s: %v", args[1], err)
		return
	}
	r := config.ConsolidateConfig{Window: config.Duration(window), Pattern: args[1]}
	for _, a := range args[2:] {
		switch a {
		case "show_first":
			r.ShowFirst = true
		case "warning":
			r.Level = "warn"
		case "error", "info", "debug":
			r.Level = a
		default:
			c.unmapped(o.place(), "errors consolidate level %s: CoreDNS knows warning, error, info and debug", a)
			return
		}
	}
	c.cfg.Log.ErrorsConsolidate = append(c.cfg.Log.ErrorsConsolidate, r)
}

// logPlugin maps log [NAMES...] [FORMAT] { class CLASSES... } to
// log.queries and its queryNames, queryClasses and queryFormat.
func (c *converter) logPlugin(s *server, d *Directive) {
	if !c.claim("log", d, "query log") {
		return
	}
	names := d.Args
	// As CoreDNS: a lone argument is a name; of several, a last one
	// with a placeholder is the format.
	if n := len(names); n > 1 && strings.Contains(names[n-1], "{") {
		c.cfg.Log.QueryFormat, names = names[n-1], names[:n-1]
	}
	var classes []string
	ok := true
	c.options(d, func(o *Directive) bool {
		if o.Name != "class" {
			return false
		}
		for _, a := range o.Args {
			if !slices.Contains(config.QueryLogClasses, a) {
				c.unmapped(o.place(), "log class %s: not a class (all, success, denial, error)", a)
				ok = false
			} else if !slices.Contains(classes, a) {
				classes = append(classes, a)
			}
		}
		return true
	})
	zones, namesOK := c.logNames(d, names)
	if !ok || !namesOK {
		c.cfg.Log.QueryFormat = ""
		return
	}
	c.cfg.Log.Queries = true
	c.cfg.Log.QueryNames = zones
	if !slices.Contains(classes, "all") {
		c.cfg.Log.QueryClasses = classes
	}
	c.global(s, d, "log.queries")
}

// logNames are the zones a log line covers, fully qualified; none when
// one is the root, which covers every name. A name that is not a domain
// name is reported and leaves the log off (ok false), as a bad class
// does: it could never match a question.
func (c *converter) logNames(d *Directive, args []string) ([]string, bool) {
	var out []string
	root, ok := false, true
	for _, a := range args {
		z, servable := servableZone(a)
		switch {
		case !servable:
			c.unmapped(d.place(), "log name %s: not a domain name", a)
			ok = false
		case z == ".":
			root = true
		default:
			out = append(out, dns.Fqdn(z))
		}
	}
	if root {
		return nil, ok
	}
	return out, ok
}

func (c *converter) healthPlugin(s *server, d *Directive) {
	if !c.claim("health", d, "health endpoint") {
		return
	}
	c.httpAddr(d, ":8080")
	c.options(d, func(o *Directive) bool {
		if o.Name != "lameduck" {
			return false
		}
		if dur, ok := c.duration(o, 0); ok {
			c.cfg.HTTP.Lameduck = config.Duration(dur)
		}
		return true
	})
}

func (c *converter) readyPlugin(s *server, d *Directive) {
	if c.claim("ready", d, "readiness endpoint") {
		c.httpAddr(d, ":8181")
		c.note(d.place(), "ready: /ready turns 200 once every source has listed (and, sharded, the replica owns its zones)")
	}
}

func (c *converter) prometheusPlugin(s *server, d *Directive) {
	if c.claim("prometheus", d, "metrics endpoint") {
		c.httpAddr(d, "localhost:9153")
		c.note(d.place(), "prometheus: metric names are CoreDNS's with shardns_ for coredns_ (shardns_dns_requests_total, ...)")
	}
}

func (c *converter) loadbalancePlugin(s *server, d *Directive) {
	if !c.claim("loadbalance", d, "answer order") {
		return
	}
	if len(d.Args) > 0 && d.Args[0] != "round_robin" {
		c.unmapped(d.place(), "loadbalance %s: shardns shuffles A and AAAA records (round_robin) only", strings.Join(d.Args, " "))
		return
	}
	c.cfg.LoadBalance.Enabled = true
	c.global(s, d, "loadbalance.enabled")
}

func (c *converter) loopPlugin(s *server, d *Directive) {
	c.note(d.place(), "loop: built in; an upstream that is shardns itself (a dns.listen address) is refused at start and on reload")
}

func (c *converter) reloadPlugin(s *server, d *Directive) {
	c.note(d.place(), "reload: built in; --config is checked every 2s and on SIGHUP")
}

func (c *converter) anyPlugin(s *server, d *Directive) {
	c.note(d.place(), "any: built in; ANY gets RFC 8482's minimal answer")
}

func (c *converter) chaosPlugin(s *server, d *Directive) {
	if !c.mainHas(s, d) {
		// A block with a chain of its own converts its chaos there; one
		// without (a whoami block) must not turn it on for every block.
		c.unmapped(d.place(), "chaos in server block %q: this block has no chain of its own to answer CHAOS questions in, "+
			"and the main block's answers for every block", strings.Join(s.block.Keys, " "))
		return
	}
	if !c.claim("chaos", d, "CHAOS answer") {
		return
	}
	c.cfg.Chaos.Enabled = true
	if len(d.Args) > 0 {
		c.cfg.Chaos.Version = d.Args[0]
	}
	c.cfg.Chaos.Authors = chaosAuthors(d.Args)
}

// mainHas reports whether d, of s's block, is the main block's or the
// same as one the main block has.
func (c *converter) mainHas(s *server, d *Directive) bool {
	if c.main == nil || s == c.main || s.block == c.main.block {
		return true
	}
	return slices.ContainsFunc(c.main.block.Directives, func(m *Directive) bool { return canonical(m) == canonical(d) })
}

// chaosAuthors are the authors of `chaos VERSION AUTHORS...` as CoreDNS
// keeps them: each once, sorted, cut to the 255 bytes a TXT string
// holds. CoreDNS's default, its own maintainers, is not shardns's:
// without authors, authors.bind is refused.
func chaosAuthors(args []string) []string {
	if len(args) < 2 {
		return nil
	}
	var out []string
	for _, a := range args[1:] {
		if len(a) > 255 {
			a = a[:255]
		}
		out = appendNew(out, a)
	}
	slices.Sort(out)
	return out
}

// autopathPlugin maps "autopath @kubernetes"; it needs pods verified,
// checked once every block is read.
func (c *converter) autopathPlugin(s *server, d *Directive) {
	if !c.claim("autopath", d, "autopath") {
		return
	}
	if len(d.Args) == 0 || d.Args[len(d.Args)-1] != "@kubernetes" {
		c.unmapped(d.place(), "autopath %s: shardns takes the search path from the client pod's namespace (autopath @kubernetes) only", strings.Join(d.Args, " "))
		return
	}
	c.deferred = append(c.deferred, func() {
		k := c.cfg.Kubernetes
		for _, z := range d.Args[:len(d.Args)-1] {
			nz, err := NormalizeZone(z)
			if err != nil || (nz != "." && !slices.Contains(k.Zones, nz)) {
				c.unmapped(d.place(), "autopath zone %s: shardns shortens the search path in the kubernetes zones", z)
			}
		}
		if !k.Enabled || k.Pods != "verified" {
			c.unmapped(d.place(), "autopath needs the kubernetes plugin with pods verified, to know each client's namespace")
			return
		}
		c.cfg.Autopath.Enabled = true
	})
}

// duration reads o's argument i as a Go duration.
func (c *converter) duration(o *Directive, i int) (time.Duration, bool) {
	if len(o.Args) <= i {
		c.unmapped(o.place(), "%s needs a duration", o.Name)
		return 0, false
	}
	d, err := time.ParseDuration(o.Args[i])
	if err != nil || d < 0 {
		c.unmapped(o.place(), "%s %s: not a duration", o.Name, o.Args[i])
		return 0, false
	}
	return d, true
}
