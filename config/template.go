package config

import (
	"errors"
	"fmt"
	"regexp"
	"strconv"
	"strings"
	texttemplate "text/template"

	"github.com/miekg/dns"

	"github.com/shardns/shardns/expression"
)

// Template is one template, a CoreDNS `template CLASS TYPE [ZONES] {…}`.
type Template struct {
	// Class of the questions answered: IN (default), CH, ANY, ...
	Class string `json:"class"`
	// Type of the questions answered: A, AAAA, PTR, ... or ANY for all.
	Type string `json:"type"`
	// Zones whose names the template answers; empty: every name.
	Zones []string `json:"zones"`
	// Match lists regular expressions tried on the lower-case, fully
	// qualified question name; the first that matches is used. Empty:
	// every name of the zones.
	Match []string `json:"match"`
	// Vars are set for each matching question, in order, from
	// expressions (github.com/expr-lang/expr, as CoreDNS's var), and seen
	// by the record templates as .Var.NAME and by later expressions.
	Vars []TemplateVar `json:"vars,omitempty"`
	// Expr are conditions that must all hold for a matching question to
	// be answered (CoreDNS's expr); otherwise the question is treated as
	// if no pattern had matched.
	Expr []string `json:"expr,omitempty"`
	// Answer, Additional and Authority are Go templates that each make
	// one record in zone-file form.
	Answer     []string `json:"answer"`
	Additional []string `json:"additional"`
	Authority  []string `json:"authority"`
	// Rcode of the answer: NOERROR (default), NXDOMAIN, SERVFAIL, ...
	Rcode string `json:"rcode"`
	// ExtendedError adds an RFC 8914 extended error to the answer.
	ExtendedError *TemplateExtendedError `json:"extendedError"`
	// Fallthrough zones pass names that no regex matches on to the next
	// template, then to hosts, the cluster zones and the forwarder;
	// ["."]: every name. Otherwise such names get SERVFAIL.
	Fallthrough []string `json:"fallthrough"`
}

// TemplateVar is one variable of a template.
type TemplateVar struct {
	Name string `json:"name"`
	Expr string `json:"expr"`
}

// TemplateExtendedError is an RFC 8914 extended DNS error a template
// adds to its answer.
type TemplateExtendedError struct {
	// Code is the INFO-CODE, 0–65535 (RFC 8914 defines 0–24).
	Code int `json:"code"`
	// Text is the EXTRA-TEXT; may be empty.
	Text string `json:"text"`
}

// maxRegexLen bounds a pattern as CoreDNS does: compiling a huge one
// costs memory out of proportion.
const maxRegexLen = 10000

// ParseTemplates reads the templates, in order, into the values they
// answer with; an error names the key of each fault, e.g.
// template[0].match[1].
func ParseTemplates(ts []Template) ([]*ParsedTemplate, error) {
	out := make([]*ParsedTemplate, 0, len(ts))
	var errs []error
	for i, c := range ts {
		p, err := ParseTemplate(c)
		if err != nil {
			errs = append(errs, prefixed(fmt.Sprintf("template[%d]", i), err))
			continue
		}
		out = append(out, p)
	}
	if len(errs) > 0 {
		return nil, errors.Join(errs...)
	}
	return out, nil
}

// ParsedTemplate is a template's settings read into the values the
// template package answers with.
type ParsedTemplate struct {
	Class, Type                   uint16 // ClassANY, TypeANY: every one
	Zones                         []string
	Match                         []*regexp.Regexp
	Vars                          []ParsedVar
	Expr                          []*expression.Value
	Answer, Additional, Authority []*texttemplate.Template
	Rcode                         int
	ExtendedError                 *dns.EDNS0_EDE
	Fallthrough                   []string // nil: no fallthrough
}

// ParsedVar is one variable of a parsed template.
type ParsedVar struct {
	Name  string
	Value *expression.Value
}

// prefixed puts key before the key of each error err joins.
func prefixed(key string, err error) error {
	var out []error
	for _, e := range unjoin(err) {
		msg := e.Error()
		if strings.HasPrefix(msg, ".") {
			out = append(out, errors.New(key+msg))
		} else {
			out = append(out, fmt.Errorf("%s: %w", key, e))
		}
	}
	return errors.Join(out...)
}

func unjoin(err error) []error {
	if j, ok := err.(interface{ Unwrap() []error }); ok {
		return j.Unwrap()
	}
	return []error{err}
}

// ParseTemplate reads one template; its errors start with the key inside
// the template (".match[1]: ..."), so that the Corefile converter can name
// the template's line instead of its index.
func ParseTemplate(c Template) (*ParsedTemplate, error) {
	var errs []error
	bad := func(key, format string, args ...any) {
		errs = append(errs, fmt.Errorf("."+key+": "+format, args...))
	}
	t := &ParsedTemplate{Class: dns.ClassINET, Rcode: dns.RcodeSuccess}
	if c.Class != "" {
		var ok bool
		if t.Class, ok = dns.StringToClass[strings.ToUpper(c.Class)]; !ok {
			bad("class", "%q is not a DNS class", c.Class)
		}
	}
	var ok bool
	if t.Type, ok = dns.StringToType[strings.ToUpper(c.Type)]; !ok {
		bad("type", "%q is not a query type (ANY answers every type)", c.Type)
	}
	t.Zones = templateZones(c.Zones, bad, "zones")
	if len(t.Zones) == 0 {
		t.Zones = []string{"."}
	}
	for i, m := range c.Match {
		key := fmt.Sprintf("match[%d]", i)
		if len(m) > maxRegexLen {
			bad(key, "the pattern is %d characters long, at most %d are allowed", len(m), maxRegexLen)
			continue
		}
		re, err := regexp.Compile(m)
		if err != nil {
			bad(key, "%v", err)
			continue
		}
		t.Match = append(t.Match, re)
	}
	if len(c.Match) == 0 {
		t.Match = []*regexp.Regexp{matchAll}
	}
	declared := expression.Declared{}
	for i, v := range c.Vars {
		key := fmt.Sprintf("vars[%d]", i)
		if err := expression.CheckVariable(v.Name); err != nil {
			bad(key+".name", "%v", err)
			continue
		}
		val, err := expression.CompileValue(v.Expr, declared, false)
		if err != nil {
			bad(key+".expr", "%v", err)
			continue
		}
		t.Vars = append(t.Vars, ParsedVar{Name: v.Name, Value: val})
		declared.Declare(v.Name, val)
	}
	for i, src := range c.Expr {
		cond, err := expression.CompileValue(src, declared, true)
		if err != nil {
			bad(fmt.Sprintf("expr[%d]", i), "%v", err)
			continue
		}
		t.Expr = append(t.Expr, cond)
	}
	for _, s := range []struct {
		key  string
		src  []string
		dest *[]*texttemplate.Template
	}{{"answer", c.Answer, &t.Answer}, {"additional", c.Additional, &t.Additional}, {"authority", c.Authority, &t.Authority}} {
		for i, src := range s.src {
			tmpl, err := recordTemplate(s.key, src)
			if err != nil {
				bad(fmt.Sprintf("%s[%d]", s.key, i), "%v", err)
				continue
			}
			*s.dest = append(*s.dest, tmpl)
		}
	}
	if c.Rcode != "" {
		if t.Rcode, ok = dns.StringToRcode[strings.ToUpper(c.Rcode)]; !ok {
			bad("rcode", "%q is not a response code (NOERROR, NXDOMAIN, SERVFAIL, REFUSED, ...)", c.Rcode)
		}
	}
	if e := c.ExtendedError; e != nil {
		if e.Code < 0 || e.Code > 65535 {
			bad("extendedError.code", "must be between 0 and 65535, got %d", e.Code)
		}
		t.ExtendedError = &dns.EDNS0_EDE{InfoCode: uint16(e.Code), ExtraText: e.Text}
	}
	t.Fallthrough = templateZones(c.Fallthrough, bad, "fallthrough")
	return t, errors.Join(errs...)
}

var matchAll = regexp.MustCompile(".*")

// templateZones makes zones lower-case and fully qualified; "." stays
// the root.
func templateZones(zones []string, bad func(key, format string, args ...any), key string) []string {
	var out []string
	for i, z := range zones {
		if _, ok := dns.IsDomainName(z); !ok || z == "" {
			bad(fmt.Sprintf("%s[%d]", key, i), "%q is not a domain name", z)
			continue
		}
		out = append(out, dns.CanonicalName(z))
	}
	return out
}

// recordTemplate parses one record template with CoreDNS's functions.
func recordTemplate(name, text string) (*texttemplate.Template, error) {
	return texttemplate.New(name).Funcs(texttemplate.FuncMap{"parseInt": strconv.ParseUint}).Parse(text)
}
