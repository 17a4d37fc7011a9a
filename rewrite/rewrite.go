// Package rewrite changes a question before it is answered, and the
// answer back, as CoreDNS's rewrite plugin does: query names (exact,
// prefix, suffix, substring or regex match), query types, and the TTLs of
// the answer. The client never sees a rewrite: the question of the
// response is the one it asked, and records owned by the rewritten name
// carry the asked name (CoreDNS's `answer auto`).
//
// Everything here is pure: rules are compiled once from the configuration
// and applied to names, with no state between questions.
package rewrite

import (
	"fmt"
	"regexp"
	"slices"
	"strconv"
	"strings"

	"github.com/miekg/dns"

	"github.com/shardns/shardns/config"
	"github.com/shardns/shardns/zone"
)

type field uint8

const (
	fieldName field = iota
	fieldType
	fieldTTL
)

type matchKind uint8

const (
	matchExact matchKind = iota
	matchPrefix
	matchSuffix
	matchSubstring
	matchRegex
)

// rule is one compiled rewrite rule.
type rule struct {
	index    int // position in the configuration, for errors
	field    field
	match    matchKind
	from, to string // lower-case; exact and suffix ones fully qualified
	re       *regexp.Regexp
	fromType uint16
	toType   uint16
	ttlLo    uint32
	ttlHi    uint32
	cont     bool
	answers  []answer // answer name and answer value rewrites, in order
}

// Rules are the compiled rewrite rules, in configuration order.
type Rules struct {
	rules []rule
}

// Compile checks and compiles the configured rules; nil when there are
// none, so the query path pays nothing without rules.
func Compile(cfg []config.RewriteRule) (*Rules, error) {
	if len(cfg) == 0 {
		return nil, nil
	}
	rs := &Rules{}
	for i, c := range cfg {
		r, err := compile(i, c)
		if err != nil {
			return nil, err
		}
		rs.rules = append(rs.rules, r)
	}
	return rs, nil
}

func compile(i int, c config.RewriteRule) (rule, error) {
	key := fmt.Sprintf("rewrite[%d]", i)
	r := rule{index: i, cont: c.Continue}
	switch c.Field {
	case "type":
		r.field = fieldType
		from, okFrom := dns.StringToType[strings.ToUpper(c.From)]
		to, okTo := dns.StringToType[strings.ToUpper(c.To)]
		if !okFrom || !okTo {
			return r, fmt.Errorf("%s: %q or %q is not a query type", key, c.From, c.To)
		}
		r.fromType, r.toType = from, to
		return r, nil
	case "name":
		r.field = fieldName
		var err error
		if r.answers, err = compileAnswers(key, c); err != nil {
			return r, err
		}
	case "ttl":
		r.field = fieldTTL
		lo, hi, err := config.ParseTTLRange(c.TTL)
		if err != nil {
			return r, fmt.Errorf("%s.ttl: %w", key, err)
		}
		r.ttlLo, r.ttlHi = lo, hi
	default:
		return r, fmt.Errorf("%s.field: must be name, type or ttl, got %q", key, c.Field)
	}
	r.from, r.to = strings.ToLower(c.From), strings.ToLower(c.To)
	switch c.Match {
	case "", "exact":
		r.match = matchExact
		r.from, r.to = dns.Fqdn(r.from), dns.Fqdn(r.to)
	case "prefix":
		r.match = matchPrefix
	case "suffix":
		r.match = matchSuffix
		r.from, r.to = dns.Fqdn(r.from), dns.Fqdn(r.to)
	case "substring":
		r.match = matchSubstring
	case "regex":
		r.match = matchRegex
		re, err := regexp.Compile(c.From)
		if err != nil {
			return r, fmt.Errorf("%s.from: %w", key, err)
		}
		if n := config.RegexGroup(r.to); n > re.NumSubexp() {
			return r, fmt.Errorf("%s.to: uses group {%d}, but %q has %d", key, n, c.From, re.NumSubexp())
		}
		r.re = re
	default:
		return r, fmt.Errorf("%s.match: must be exact, prefix, suffix, substring or regex, got %q", key, c.Match)
	}
	if c.From == "" {
		return r, fmt.Errorf("%s.from: is empty", key)
	}
	return r, nil
}

// matchesName reports whether the rule's pattern matches name (lower-case,
// fully qualified). It allocates nothing, so the fast path can ask.
func (r *rule) matchesName(name string) bool {
	switch r.match {
	case matchExact:
		return name == r.from
	case matchPrefix:
		return strings.HasPrefix(name, r.from)
	case matchSuffix:
		return strings.HasSuffix(name, r.from)
	case matchSubstring:
		return strings.Contains(name, r.from)
	default:
		return r.re.MatchString(name)
	}
}

func (r *rule) matches(name string, qtype uint16) bool {
	if r.field == fieldType {
		return qtype == r.fromType
	}
	return r.matchesName(name)
}

// rewriteName returns the new name for a name that matches.
func (r *rule) rewriteName(name string) string {
	var out string
	switch r.match {
	case matchExact:
		out = r.to
	case matchPrefix:
		out = r.to + name[len(r.from):]
	case matchSuffix:
		out = name[:len(name)-len(r.from)] + r.to
	case matchSubstring:
		out = strings.ReplaceAll(name, r.from, r.to)
	default:
		groups := r.re.FindStringSubmatch(name)
		out = r.to
		// Highest group first, so {1} does not eat the front of {10}.
		for g := len(groups) - 1; g >= 0; g-- {
			out = strings.ReplaceAll(out, "{"+strconv.Itoa(g)+"}", groups[g])
		}
	}
	return dns.Fqdn(zone.LowerASCII(out))
}

// Matches reports whether any rule applies to the question. It allocates
// nothing: the query fast path uses it to leave rewritten questions to the
// full path.
func (rs *Rules) Matches(name string, qtype uint16) bool {
	for i := range rs.rules {
		if rs.rules[i].matches(name, qtype) {
			return true
		}
	}
	return false
}

// Result is what the rules made of a question.
type Result struct {
	// Name and Type are the question to answer instead of the asked one.
	Name string
	Type uint16
	// Renamed is set when Name differs from the asked name: records
	// owned by Name are given back the asked name.
	Renamed bool
	// TTL is set when a ttl rule matched: every TTL of the response is
	// clamped to [TTLMin, TTLMax].
	TTL            bool
	TTLMin, TTLMax uint32
	// answers are the answer rewrites of the rules that applied, last
	// rule first (CoreDNS reverts in reverse order).
	answers []answer
}

// Apply runs the rules over a question (lower-case, fully qualified name):
// each rule that matches is applied; the first that matches without
// continue is the last applied. ok is false when no rule matched. A name
// rule whose result is not a domain name is an error (CoreDNS answers
// SERVFAIL for it).
func (rs *Rules) Apply(name string, qtype uint16) (res Result, ok bool, err error) {
	res = Result{Name: name, Type: qtype}
	for i := range rs.rules {
		r := &rs.rules[i]
		if !r.matches(res.Name, res.Type) {
			continue
		}
		ok = true
		switch r.field {
		case fieldName:
			n := r.rewriteName(res.Name)
			if _, valid := dns.IsDomainName(n); !valid || len(n) > 255 || strings.Contains(n, "..") {
				return res, true, fmt.Errorf("rewrite[%d] turns %s into %q, which is not a domain name", r.index, res.Name, n)
			}
			res.Name = n
			res.answers = append(slices.Clone(r.answers), res.answers...)
		case fieldType:
			res.Type = r.toType
		case fieldTTL:
			res.TTL, res.TTLMin, res.TTLMax = true, r.ttlLo, r.ttlHi
		}
		if !r.cont {
			break
		}
	}
	res.Renamed = res.Name != name
	return res, ok, nil
}
