// Package template answers questions with records made from Go
// text/template templates, as CoreDNS's template plugin does: each
// template matches a class, a type, zones and regular expressions of the
// question name, and makes the answer, authority and additional records
// and the rcode from what matched (.Name, .Match, .Group, ...).
//
// Everything here is pure: templates are compiled once from the
// configuration; answering a question executes them and parses the
// records they print, with no state between questions. Resolving the
// targets of CNAMEs a template made is the caller's, through a function
// it passes.
package template

import (
	"bytes"
	"fmt"
	"regexp"
	"strconv"
	texttemplate "text/template"

	"github.com/miekg/dns"

	"github.com/shardns/shardns/expression"
)

// Templates are the compiled templates, in configuration order.
type Templates struct {
	list  []*compiled
	zones []string // every template's zones: other names pass at once
}

// compiled is one template.
type compiled struct {
	class, qtype                  uint16 // ClassANY, TypeANY: every one
	zones                         []string
	regex                         []*regexp.Regexp
	answer, additional, authority []*texttemplate.Template
	rcode                         int
	ede                           *dns.EDNS0_EDE
	fall                          []string // nil: no fallthrough
	vars                          []variable
	conds                         []*expression.Value
}

// variable is one var of a template.
type variable struct {
	name  string
	value *expression.Value
}

// Question is what a template is asked.
type Question struct {
	// Msg is the request; its question is the one answered (after the
	// rewrite rules).
	Msg *dns.Msg
	// Name is the question's name, lower-case.
	Name string
	// Remote is the client's IP address, for .Remote.
	Remote string
	// Request is the question as expressions see it (client, transport,
	// EDNS0), for the templates with vars or conditions.
	Request *expression.Request
}

// Verdict is what the templates do with a question.
type Verdict uint8

const (
	// Pass leaves the question to what comes after the templates.
	Pass Verdict = iota
	// Answered means Response holds the answer.
	Answered
	// Failed means SERVFAIL: a template's zone holds the name but none
	// of its patterns matched and it does not fall through, its rcode is
	// SERVFAIL, or one of its records did not come out as a record.
	Failed
)

// Response is a templated answer.
type Response struct {
	Verdict Verdict
	Rcode   int
	// Answer, Ns and Extra are the records of the three sections.
	Answer, Ns, Extra []dns.RR
	// ExtendedError, when set, goes into the OPT record.
	ExtendedError *dns.EDNS0_EDE
	// Err says why a Failed verdict is a failure, for the error log; nil
	// when the template asked for SERVFAIL itself.
	Err error
	// Match is the template that matched, for its metrics; Failure, of a
	// Failed verdict, the record template that failed.
	Match   Match
	Failure *Failure
}

// Match labels a question a template matched as CoreDNS's template
// metrics do: the template's zone, and the class and type its records
// see. Zone is "" when no template matched.
type Match struct{ Zone, Class, Type string }

// Failure is a record template that failed: its section (answer,
// additional or authority) and text, and whether it executed but made no
// valid record (RR) rather than failing to execute.
type Failure struct {
	Section, Template string
	RR                bool
}

// Claims reports whether the templates decide the question (answer it or
// fail it) rather than pass it on, without executing anything: the fast
// path leaves such names to the full one. A template with conditions
// claims every name its patterns match, whether they hold being the
// full path's to find. It allocates nothing.
func (ts *Templates) Claims(name string, qclass, qtype uint16) bool {
	t, _ := ts.decide(name, qclass, qtype)
	return t != nil
}

// Bare reports the rcode of a question that a template answers with no
// record and no extended error, CoreDNS's common `template ANY AAAA {
// rcode NOERROR }`, and the zone of that template (its metrics' label):
// such an answer is the question alone, the same for every client, and
// the fast path can write it. ok is false for any other question. It
// allocates nothing.
func (ts *Templates) Bare(name string, qclass, qtype uint16) (rcode int, match Match, ok bool) {
	t, matched := ts.decide(name, qclass, qtype)
	if t == nil || !matched || len(t.answer)+len(t.authority)+len(t.additional) > 0 || t.ede != nil ||
		len(t.vars)+len(t.conds) > 0 ||
		t.rcode == dns.RcodeServerFailure || t.rcode > 0xF {
		return 0, Match{}, false
	}
	return t.rcode, t.labels(matchZone(name, t.zones), qclass, qtype), true
}

// labels are the match of a question of qclass and qtype in zone: the
// class and type its records see, the template's for ANY.
func (t *compiled) labels(zone string, qclass, qtype uint16) Match {
	if qclass == dns.ClassANY {
		qclass = t.class
	}
	if qtype == dns.TypeANY {
		qtype = t.qtype
	}
	return Match{Zone: zone, Class: dns.ClassToString[qclass], Type: dns.TypeToString[qtype]}
}

// decide is the template that decides the question, and whether one of
// its patterns matched (false: it fails the question); nil when the
// question passes on.
func (ts *Templates) decide(name string, qclass, qtype uint16) (t *compiled, matched bool) {
	if !inAny(name, ts.zones) {
		return nil, false
	}
	for _, t := range ts.list {
		if matchZone(name, t.zones) == "" || !t.asks(qclass, qtype) {
			continue
		}
		for _, re := range t.regex {
			if re.MatchString(name) {
				return t, true
			}
		}
		if !inAny(name, t.fall) {
			return t, false
		}
	}
	return nil, false
}

// Answer runs the templates on q in order, as CoreDNS does: a template
// whose zones, class or type do not fit is skipped; one that fits but
// whose patterns do not match the name is skipped if it falls through
// for the name, and fails the question otherwise; the first that matches
// answers.
func (ts *Templates) Answer(q Question) Response {
	if !inAny(q.Name, ts.zones) {
		return Response{}
	}
	question := q.Msg.Question[0]
	for _, t := range ts.list {
		zone := matchZone(q.Name, t.zones)
		if zone == "" || !t.asks(question.Qclass, question.Qtype) {
			continue
		}
		re, groups := t.match(q.Name)
		if re == nil {
			if inAny(q.Name, t.fall) {
				continue
			}
			return Response{Verdict: Failed, Err: fmt.Errorf("no pattern of the template for zone %s matches", zone)}
		}
		d := t.data(q, question, zone, re, groups)
		if len(t.vars)+len(t.conds) > 0 {
			holds, err := t.evaluate(q, re, groups, d)
			if err != nil {
				// A var that fails, or a condition that does, fails the
				// question, as in CoreDNS.
				return Response{Verdict: Failed, Err: err}
			}
			if !holds {
				if inAny(q.Name, t.fall) {
					continue
				}
				return Response{Verdict: Failed, Err: fmt.Errorf("a condition of the template for zone %s does not hold", zone)}
			}
		}
		return t.respond(d)
	}
	return Response{}
}

// evaluate sets the template's variables into d.Var and reports whether
// its conditions hold; an error is a var or condition that failed.
func (t *compiled) evaluate(q Question, re *regexp.Regexp, groups []string, d *data) (bool, error) {
	r := q.Request
	if r == nil {
		question := q.Msg.Question[0]
		r = &expression.Request{Name: q.Name, Type: question.Qtype, Class: question.Qclass, ID: q.Msg.Id, Opcode: q.Msg.Opcode}
	}
	scope := expression.NewScope(r, groups, re.SubexpNames())
	for _, v := range t.vars {
		if err := scope.Set(v.name, v.value); err != nil {
			return false, err
		}
	}
	d.Var = scope.Vars()
	for _, c := range t.conds {
		if holds, err := scope.Holds(c); err != nil || !holds {
			return false, err
		}
	}
	return true, nil
}

// asks reports whether the template answers questions of this class and
// type; ANY on either side matches everything.
func (t *compiled) asks(qclass, qtype uint16) bool {
	return (t.class == dns.ClassANY || qclass == dns.ClassANY || qclass == t.class) &&
		(t.qtype == dns.TypeANY || qtype == dns.TypeANY || qtype == t.qtype)
}

// match is the first pattern that matches name and its submatches.
func (t *compiled) match(name string) (*regexp.Regexp, []string) {
	for _, re := range t.regex {
		if m := re.FindStringSubmatch(name); m != nil {
			return re, m
		}
	}
	return nil, nil
}

// data is what a record template sees, with CoreDNS's field names.
type data struct {
	Zone     string            // the zone of the template that holds the name
	Name     string            // the question name, lower-case
	Regex    string            // the pattern that matched
	Match    []string          // the whole match, then each group
	Group    map[string]string // groups by number ("0", "1", ...) and by name
	Class    string            // the question's class, or the template's for ANY
	Type     string            // the question's type, or the template's for ANY
	Message  *dns.Msg          // the request
	Question *dns.Question     // its question
	Remote   string            // the client's IP address
	Var      map[string]any    // the template's vars, by name
}

// Meta is CoreDNS's metadata lookup; shardns has no metadata plugin, and
// CoreDNS without one gives "".
func (*data) Meta(string) string { return "" }

func (t *compiled) data(q Question, question dns.Question, zone string, re *regexp.Regexp, m []string) *data {
	l := t.labels(zone, question.Qclass, question.Qtype)
	d := &data{Zone: zone, Name: q.Name, Regex: re.String(), Match: m, Group: make(map[string]string, len(m)),
		Message: q.Msg, Question: &question, Remote: q.Remote, Class: l.Class, Type: l.Type}
	for i, s := range m {
		d.Group[strconv.Itoa(i)] = s
	}
	for i, n := range re.SubexpNames() {
		if n != "" {
			d.Group[n] = m[i]
		}
	}
	return d
}

// respond executes the record templates of a matched template.
func (t *compiled) respond(d *data) Response {
	match := Match{Zone: d.Zone, Class: d.Class, Type: d.Type}
	if t.rcode == dns.RcodeServerFailure {
		return Response{Verdict: Failed, Match: match}
	}
	r := Response{Verdict: Answered, Rcode: t.rcode, ExtendedError: t.ede, Match: match}
	for _, s := range []struct {
		section string
		tmpls   []*texttemplate.Template
		dest    *[]dns.RR
	}{{"answer", t.answer, &r.Answer}, {"additional", t.additional, &r.Extra}, {"authority", t.authority, &r.Ns}} {
		for _, tmpl := range s.tmpls {
			rr, failure, err := execute(s.section, tmpl, d)
			if err != nil {
				return Response{Verdict: Failed, Err: err, Match: match, Failure: failure}
			}
			*s.dest = append(*s.dest, rr)
		}
	}
	return r
}

// execute makes one record of section; a failure says how it failed.
func execute(section string, tmpl *texttemplate.Template, d *data) (dns.RR, *Failure, error) {
	var b bytes.Buffer
	if err := tmpl.Execute(&b, d); err != nil {
		return nil, &Failure{Section: section, Template: tmpl.Root.String()}, fmt.Errorf("%s template: %w", tmpl.Name(), err)
	}
	rr, err := dns.NewRR(b.String())
	if err == nil && rr == nil {
		err = fmt.Errorf("no record in %q", b.String())
	}
	if err != nil {
		return nil, &Failure{Section: section, Template: tmpl.Root.String(), RR: true},
			fmt.Errorf("%s template made no valid record: %w", tmpl.Name(), err)
	}
	return rr, nil, nil
}

// Chases reports whether the answer to a question of type qtype has CNAME
// targets to resolve: CoreDNS adds their A or AAAA records behind each
// CNAME a template made.
func (r *Response) Chases(qtype uint16) bool {
	if qtype != dns.TypeA && qtype != dns.TypeAAAA {
		return false
	}
	for _, rr := range r.Answer {
		if rr.Header().Rrtype == dns.TypeCNAME {
			return true
		}
	}
	return false
}

// Chase puts behind each CNAME of the answer the answer records lookup
// gives for its target (nil when it gave none), as CoreDNS's upstream
// lookup does; truncated is the last lookup's TC bit, which CoreDNS copies
// into the response.
func (r *Response) Chase(lookup func(target string) *dns.Msg) (truncated bool) {
	answer := make([]dns.RR, 0, len(r.Answer))
	for _, rr := range r.Answer {
		answer = append(answer, rr)
		if c, ok := rr.(*dns.CNAME); ok {
			if m := lookup(c.Target); m != nil {
				truncated = m.Truncated
				answer = append(answer, m.Answer...)
			}
		}
	}
	r.Answer = answer
	return truncated
}

// inAny reports whether name (lower-case, fully qualified) is in one of
// zones.
func inAny(name string, zones []string) bool {
	return matchZone(name, zones) != ""
}

// matchZone is the longest of zones holding name, "" when none does.
func matchZone(name string, zones []string) string {
	best := ""
	for _, z := range zones {
		if len(z) > len(best) && inZone(name, z) {
			best = z
		}
	}
	return best
}

// inZone reports whether name is zone or below it.
func inZone(name, zone string) bool {
	if zone == "." {
		return true
	}
	if len(name) < len(zone) || name[len(name)-len(zone):] != zone {
		return false
	}
	n := len(name) - len(zone)
	return n == 0 || name[n-1] == '.'
}
