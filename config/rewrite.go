package config

import (
	"fmt"
	"regexp"
	"strconv"
	"strings"

	"github.com/miekg/dns"
)

// RewriteRule changes a query before it is answered, and the answer back.
type RewriteRule struct {
	// Field is name, type or ttl.
	Field string `json:"field"`
	// Match is exact, prefix, suffix, substring or regex (name and ttl).
	Match string `json:"match"`
	// From is the name (or pattern) to match; for type, the query type.
	From string `json:"from"`
	// To is the replacement name (regex: with {1}… groups) or query type.
	To string `json:"to"`
	// TTL is what ttl rules set: "N" or "MIN-MAX" seconds.
	TTL string `json:"ttl"`
	// Continue applies the next rules too; otherwise the first rule that
	// matches is the last.
	Continue bool `json:"continue"`
	// AnswerName rewrites the owner names of the response's records
	// (name rules only; CoreDNS's `answer name FROM TO`), before shardns
	// gives records owned by the rewritten name back the asked one.
	AnswerName []RewriteAnswer `json:"answerName"`
	// AnswerValue rewrites the names the response's records point to:
	// CNAME, DNAME, SRV, MX, NS, PTR and NAPTR targets and the SOA's
	// primary server (name rules only; CoreDNS's `answer value FROM TO`).
	AnswerValue []RewriteAnswer `json:"answerValue"`
}

// RewriteAnswer rewrites names of a response whose question a name rule
// rewrote: a name that From matches becomes To.
type RewriteAnswer struct {
	// From is a regular expression searched for in the fully qualified
	// name (unanchored, as CoreDNS).
	From string `json:"from"`
	// To replaces the whole name when From matches, with {0} (the match)
	// and {1}… (its groups); it is made fully qualified.
	To string `json:"to"`
}

// validateRewrites checks the rewrite rules under key, and fills the
// match type CoreDNS assumes when none is given.
func validateRewrites(bad func(key, format string, args ...any), key string, rules []RewriteRule) {
	for i := range rules {
		r := &rules[i]
		if r.Match == "" && r.Field != "type" {
			r.Match = "exact" // as CoreDNS, when no match type is given
		}
		validateRewrite(bad, fmt.Sprintf("%s[%d]", key, i), *r)
	}
}

func validateRewrite(bad func(key, format string, args ...any), key string, r RewriteRule) {
	checkMatch := func() {
		switch r.Match {
		case "exact", "prefix", "suffix", "substring":
		case "regex":
			if _, err := regexp.Compile(r.From); err != nil {
				bad(key+".from", "%v", err)
			}
		default:
			bad(key+".match", "must be exact, prefix, suffix, substring or regex, got %q", r.Match)
		}
		if r.From == "" {
			bad(key+".from", "is empty")
		}
	}
	switch r.Field {
	case "name":
		checkMatch()
		if r.To == "" {
			bad(key+".to", "is empty")
		}
		checkRewriteAnswers(bad, key+".answerName", r.AnswerName)
		checkRewriteAnswers(bad, key+".answerValue", r.AnswerValue)
	case "type":
		if _, ok := dns.StringToType[strings.ToUpper(r.From)]; !ok {
			bad(key+".from", "%q is not a query type", r.From)
		}
		if _, ok := dns.StringToType[strings.ToUpper(r.To)]; !ok {
			bad(key+".to", "%q is not a query type", r.To)
		}
	case "ttl":
		checkMatch()
		if _, _, err := ParseTTLRange(r.TTL); err != nil {
			bad(key+".ttl", "%v", err)
		}
	default:
		bad(key+".field", "must be name, type or ttl, got %q", r.Field)
	}
	if r.Field != "name" && len(r.AnswerName)+len(r.AnswerValue) > 0 {
		bad(key+".answerName", "only name rules rewrite answers (field is %q)", r.Field)
	}
}

// checkRewriteAnswers checks the answer rewrites under key: a pattern Go
// compiles and a replacement using no group the pattern lacks.
func checkRewriteAnswers(bad func(key, format string, args ...any), key string, as []RewriteAnswer) {
	for i, a := range as {
		key := fmt.Sprintf("%s[%d]", key, i)
		re, err := regexp.Compile(a.From)
		switch {
		case a.From == "":
			bad(key+".from", "is empty")
		case err != nil:
			bad(key+".from", "%v", err)
		case a.To == "":
			bad(key+".to", "is empty")
		case RegexGroup(a.To) > re.NumSubexp():
			bad(key+".to", "uses group {%d}, but %q has %d", RegexGroup(a.To), a.From, re.NumSubexp())
		}
	}
}

// RegexGroup is the largest {N} a regex replacement uses.
func RegexGroup(to string) int {
	n := 0
	for i := 0; i < len(to); i++ {
		if to[i] != '{' {
			continue
		}
		j := strings.IndexByte(to[i:], '}')
		if j < 0 {
			break
		}
		if g, err := strconv.Atoi(to[i+1 : i+j]); err == nil && g > n {
			n = g
		}
	}
	return n
}
