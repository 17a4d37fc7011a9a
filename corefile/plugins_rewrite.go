package corefile

import (
	"regexp"
	"slices"
	"strings"

	"github.com/miekg/dns"

	"github.com/shardns/shardns/config"
)

var matchTypes = []string{"exact", "prefix", "suffix", "substring", "regex"}

// rewritePlugin maps the name, type and ttl rules of rewrite to
// rewrite[]; class, edns0, rcode and cname rules have no equivalent.
func (c *converter) rewritePlugin(s *server, d *Directive) {
	args := d.Args
	r := config.RewriteRule{}
	if len(args) > 0 && (args[0] == "continue" || args[0] == "stop") {
		r.Continue = args[0] == "continue"
		args = args[1:]
	}
	if d.HasBlock {
		// The block form (AKS's documentation writes it): the rule on
		// its first line, its answer options on the next ones, read as
		// one line.
		if len(args) > 0 {
			c.unmapped(d.place(), "rewrite %s with a block: CoreDNS takes the rule inside the block", strings.Join(args, " "))
			return
		}
		for _, o := range d.Block {
			args = append(append(args, o.Name), o.Args...)
		}
	}
	if len(args) == 0 {
		c.unmapped(d.place(), "rewrite needs a rule")
		return
	}
	r.Field = args[0]
	var ok bool
	switch r.Field {
	case "name":
		ok = c.rewriteName(d, &r, args[1:])
	case "type":
		ok = c.rewriteType(d, &r, args[1:])
	case "ttl":
		ok = c.rewriteTTL(d, &r, args[1:])
	default:
		c.unmapped(d.place(), "rewrite %s: shardns rewrites names, query types and TTLs only", r.Field)
	}
	if !ok {
		return
	}
	c.cfg.Rewrite = append(c.cfg.Rewrite, r)
	c.global(s, d, "rewrite[] applies to every query")
}

// rewriteName reads [MATCH] FROM TO [answer auto | answer name FROM TO |
// answer value FROM TO]...
func (c *converter) rewriteName(d *Directive, r *config.RewriteRule, args []string) bool {
	r.Match = "exact"
	if len(args) > 0 && slices.Contains(matchTypes, args[0]) {
		r.Match, args = args[0], args[1:]
	}
	if len(args) < 2 {
		c.unmapped(d.place(), "rewrite name needs a name to match and its replacement")
		return false
	}
	r.From, r.To = args[0], args[1]
	if !c.rewriteFrom(d, r) {
		return false
	}
	if r.To == "" {
		c.unmapped(d.place(), "rewrite name: the replacement is empty")
		return false
	}
	for rest := args[2:]; len(rest) > 0; {
		switch {
		case len(rest) >= 2 && rest[0] == "answer" && rest[1] == "auto":
			rest = rest[2:]
		case len(rest) >= 3 && rest[0] == "answer" && rest[1] == "name" && rest[2] == "auto":
			rest = rest[3:]
		case len(rest) >= 4 && rest[0] == "answer" && (rest[1] == "name" || rest[1] == "value"):
			a := config.RewriteAnswer{From: rest[2], To: rest[3]}
			if !c.rewriteAnswer(d, rest[1], a) {
				return false
			}
			if rest[1] == "name" {
				r.AnswerName = append(r.AnswerName, a)
			} else {
				r.AnswerValue = append(r.AnswerValue, a)
			}
			rest = rest[4:]
		default:
			c.unmapped(d.place(), "rewrite %s: shardns has no such rewrite option", strings.Join(rest, " "))
			return false
		}
	}
	return true
}

// rewriteType reads FROM TO query types.
func (c *converter) rewriteType(d *Directive, r *config.RewriteRule, args []string) bool {
	if len(args) != 2 {
		c.unmapped(d.place(), "rewrite type needs two query types")
		return false
	}
	for _, t := range args {
		if _, ok := dns.StringToType[strings.ToUpper(t)]; !ok {
			c.unmapped(d.place(), "rewrite type %s: not a query type", t)
			return false
		}
	}
	r.From, r.To = strings.ToUpper(args[0]), strings.ToUpper(args[1])
	return true
}

// rewriteTTL reads [MATCH] NAME TTL, where TTL is N, MIN-MAX, MIN- or
// -MAX (open ends become 0 and 2147483647, RFC 2181's largest TTL).
func (c *converter) rewriteTTL(d *Directive, r *config.RewriteRule, args []string) bool {
	r.Match = "exact"
	if len(args) > 0 && slices.Contains(matchTypes, args[0]) {
		r.Match, args = args[0], args[1:]
	}
	if len(args) != 2 {
		c.unmapped(d.place(), "rewrite ttl needs a name to match and a TTL")
		return false
	}
	r.From = args[0]
	if !c.rewriteFrom(d, r) {
		return false
	}
	ttl := args[1]
	if lo, hi, isRange := strings.Cut(ttl, "-"); isRange {
		if lo == "" {
			lo = "0"
		}
		if hi == "" {
			hi = "2147483647"
		}
		ttl = lo + "-" + hi
	}
	if _, _, err := config.ParseTTLRange(ttl); err != nil {
		c.unmapped(d.place(), "rewrite ttl %s: %v", args[1], err)
		return false
	}
	r.TTL = ttl
	return true
}

// rewriteFrom checks what a name or ttl rule matches: not empty, and a
// regular expression Go compiles.
func (c *converter) rewriteFrom(d *Directive, r *config.RewriteRule) bool {
	if r.From == "" {
		c.unmapped(d.place(), "rewrite %s: the name to match is empty", r.Field)
		return false
	}
	if r.Match == "regex" {
		if _, err := regexp.Compile(r.From); err != nil {
			c.unmapped(d.place(), "rewrite %s regex %s: %v", r.Field, r.From, err)
			return false
		}
	}
	return true
}

// rewriteAnswer checks an answer name or value rewrite as CoreDNS does:
// a regular expression, and a replacement using only its groups.
func (c *converter) rewriteAnswer(d *Directive, kind string, a config.RewriteAnswer) bool {
	re, err := regexp.Compile(a.From)
	if err != nil {
		c.unmapped(d.place(), "rewrite answer %s %s: %v", kind, a.From, err)
		return false
	}
	if n := config.RegexGroup(a.To); n > re.NumSubexp() {
		c.unmapped(d.place(), "rewrite answer %s %s %s: uses group {%d}, the pattern has %d", kind, a.From, a.To, n, re.NumSubexp())
		return false
	}
	return true
}
