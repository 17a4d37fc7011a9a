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

// answer is one compiled `answer name` or `answer value` rewrite.
type answer struct {
	value bool // the names records point to; otherwise owner names
	re    *regexp.Regexp
	to    string // lower-case, fully qualified, with {N} groups
}

// compileAnswers compiles the answer rewrites of a name rule (key names
// it in errors), last first: CoreDNS applies a response's rewrites in
// the reverse of their configured order.
func compileAnswers(key string, c config.RewriteRule) ([]answer, error) {
	var out []answer
	for _, list := range []struct {
		key   string
		value bool
		as    []config.RewriteAnswer
	}{{"answerName", false, c.AnswerName}, {"answerValue", true, c.AnswerValue}} {
		for i, a := range list.as {
			k := fmt.Sprintf("%s.%s[%d]", key, list.key, i)
			re, err := regexp.Compile(a.From)
			if err != nil || a.From == "" {
				return nil, fmt.Errorf("%s.from: %q is not a regular expression: %v", k, a.From, err)
			}
			if n := config.RegexGroup(a.To); n > re.NumSubexp() || a.To == "" {
				return nil, fmt.Errorf("%s.to: %q is empty or uses group {%d}, but %q has %d", k, a.To, n, a.From, re.NumSubexp())
			}
			out = append(out, answer{value: list.value, re: re, to: dns.Fqdn(strings.ToLower(a.To))})
		}
	}
	slices.Reverse(out)
	return out, nil
}

// rename returns the replacement of s, or s when the pattern does not
// match it (CoreDNS replaces the whole name, not only the match).
func (a *answer) rename(s string) string {
	groups := a.re.FindStringSubmatch(s)
	if groups == nil {
		return s
	}
	out := a.to
	// Highest group first, so {1} does not eat the front of {10}.
	for g := len(groups) - 1; g >= 0; g-- {
		out = strings.ReplaceAll(out, "{"+strconv.Itoa(g)+"}", groups[g])
	}
	return dns.Fqdn(zone.LowerASCII(out))
}

// Section returns rrs as the client must see them: the rules' answer
// rewrites applied first, then records owned by the rewritten name (and
// targets naming it) carry the asked name, and TTLs are clamped by a ttl
// rule. rrs may be shared with snapshots and caches: it is never
// written; records that change are copied.
func (res *Result) Section(rrs []dns.RR, asked string) []dns.RR {
	if !res.Renamed && !res.TTL && len(res.answers) == 0 {
		return rrs
	}
	var out []dns.RR
	for i, rr := range rrs {
		changed := res.revert(rr, asked)
		if changed == rr {
			if out != nil {
				out[i] = rr
			}
			continue
		}
		if out == nil {
			out = make([]dns.RR, len(rrs))
			copy(out, rrs[:i])
		}
		out[i] = changed
	}
	if out == nil {
		return rrs
	}
	return out
}

// revert returns rr, or a changed copy of it.
func (res *Result) revert(rr dns.RR, asked string) dns.RR {
	h := rr.Header()
	if h.Rrtype == dns.TypeOPT {
		return rr
	}
	owner, target := res.rewritten(h.Name, targetOf(rr))
	ownerBack := res.Renamed && strings.EqualFold(owner, res.Name)
	targetBack := res.Renamed && target != "" && strings.EqualFold(target, res.Name)
	ttl := res.TTL && (h.Ttl < res.TTLMin || h.Ttl > res.TTLMax)
	if owner == h.Name && target == targetOf(rr) && !ownerBack && !targetBack && !ttl {
		return rr
	}
	rr = dns.Copy(rr)
	h = rr.Header()
	h.Name = owner
	if ownerBack {
		h.Name = asked
	}
	if targetBack {
		target = asked
	}
	if target != "" {
		*targetField(rr) = target
	}
	if ttl {
		h.Ttl = min(max(h.Ttl, res.TTLMin), res.TTLMax)
	}
	return rr
}

// rewritten applies the answer rewrites to a record's owner and target.
func (res *Result) rewritten(owner, target string) (string, string) {
	for i := range res.answers {
		a := &res.answers[i]
		switch {
		case a.value && target != "":
			target = a.rename(target)
		case !a.value:
			owner = a.rename(owner)
		}
	}
	return owner, target
}

// targetOf is the name a record points to, for the types whose target
// CoreDNS's answer rewrites change (an SRV of a ClusterIP service names
// the service), or "" for other types.
func targetOf(rr dns.RR) string {
	if p := targetField(rr); p != nil {
		return *p
	}
	return ""
}

// targetField is the field of rr that holds targetOf's name, nil for
// other types: read and written through the same switch, the types
// whose targets are read are the ones whose targets are rewritten.
func targetField(rr dns.RR) *string {
	switch v := rr.(type) {
	case *dns.CNAME:
		return &v.Target
	case *dns.SRV:
		return &v.Target
	case *dns.MX:
		return &v.Mx
	case *dns.NS:
		return &v.Ns
	case *dns.DNAME:
		return &v.Target
	case *dns.PTR:
		return &v.Ptr
	case *dns.NAPTR:
		return &v.Replacement
	case *dns.SOA:
		return &v.Ns
	}
	return nil
}
