package template

import (
	"slices"
	"strings"
	"testing"

	"github.com/miekg/dns"

	"github.com/shardns/shardns/config"
	"github.com/shardns/shardns/internal/testutil"
)

// The examples of CoreDNS 1.15's plugin/template/README.md, as
// configurations, and what each question gets.
var (
	allNXDOMAIN = []config.Template{{Class: "ANY", Type: "ANY", Rcode: "NXDOMAIN"}}
	invalidTLD  = []config.Template{{Class: "ANY", Type: "ANY", Zones: []string{"invalid"}, Rcode: "NXDOMAIN",
		Authority:     []string{"invalid. 60 {{ .Class }} SOA ns.invalid. hostmaster.invalid. (1 60 60 60 60)"},
		ExtendedError: &config.TemplateExtendedError{Code: 21, Text: "Blocked according to RFC2606"}}}
	searchDomain = []config.Template{{Class: "IN", Type: "ANY", Zones: []string{"example.com"},
		Match:       []string{`example\.com\.(dc1\.example\.com\.)$`},
		Rcode:       "NXDOMAIN",
		Authority:   []string{"{{ index .Match 1 }} 60 IN SOA ns.{{ index .Match 1 }} hostmaster.{{ index .Match 1 }} (1 60 60 60 60)"},
		Fallthrough: []string{"."}}}
	aAndPTR = []config.Template{
		{Class: "IN", Type: "A", Zones: []string{"example"},
			Match:       []string{`(^|[.])ip-(?P<a>[0-9]*)-(?P<b>[0-9]*)-(?P<c>[0-9]*)-(?P<d>[0-9]*)[.]example[.]$`},
			Answer:      []string{"{{ .Name }} 60 IN A {{ .Group.a }}.{{ .Group.b }}.{{ .Group.c }}.{{ .Group.d }}"},
			Fallthrough: []string{"."}},
		{Class: "IN", Type: "PTR", Zones: []string{"in-addr.arpa"},
			Match:  []string{`^(?P<d>[0-9]*)[.](?P<c>[0-9]*)[.](?P<b>[0-9]*)[.](?P<a>[0-9]*)[.]in-addr[.]arpa[.]$`},
			Answer: []string{"{{ .Name }} 60 IN PTR ip-{{ .Group.a }}-{{ .Group.b }}-{{ .Group.c }}-{{ .Group.d }}.example."}},
	}
	// The README's example of vars and conditions: a name that spells a
	// private address answers it, others fall through.
	privateIP = []config.Template{{Class: "IN", Type: "A", Zones: []string{"example.com"},
		Match: []string{`^(?P<ip>[0-9]{1,3}(-[0-9]{1,3}){3})[.](?P<id>[a-z2-7]{26})[.]example[.]com[.]$`},
		Vars:  []config.TemplateVar{{Name: "ip", Expr: "replace(group('ip'), '-', '.')"}},
		Expr: []string{"any(['10.0.0.0/8', '172.16.0.0/12', '192.168.0.0/16', '169.254.0.0/16'], incidr(ip, #))",
			"type() == 'A' && group(0) == name()"},
		Answer:      []string{"{{ .Name }} 60 IN A {{ .Var.ip }}"},
		Fallthrough: []string{"."}}}
	// A condition that fails while it runs fails the question, as in
	// CoreDNS (a condition that is false passes it on).
	brokenCondition = []config.Template{{Class: "IN", Type: "A", Zones: []string{"example.org"},
		Expr: []string{"incidr(name(), '10.0.0.0/8')"}, Answer: []string{"{{ .Name }} 60 IN A 10.0.0.1"}, Fallthrough: []string{"."}}}
	hexIP = []config.Template{{Class: "IN", Type: "A", Zones: []string{"example"},
		Match:       []string{`^ip0a(?P<b>[a-f0-9]{2})(?P<c>[a-f0-9]{2})(?P<d>[a-f0-9]{2})[.]example[.]$`},
		Answer:      []string{"{{ .Name }} 60 IN A 10.{{ parseInt .Group.b 16 8 }}.{{ parseInt .Group.c 16 8 }}.{{ parseInt .Group.d 16 8 }}"},
		Fallthrough: []string{"."}}}
	twoPatterns = []config.Template{{Class: "IN", Type: "A", Zones: []string{"example"},
		Match: []string{`^ip-(?P<a>10)-(?P<b>[0-9]*)-(?P<c>[0-9]*)-(?P<d>[0-9]*)[.]dc[.]example[.]$`,
			`^(?P<a>[0-9]*)[.](?P<b>[0-9]*)[.](?P<c>[0-9]*)[.](?P<d>[0-9]*)[.]ext[.]example[.]$`},
		Answer:      []string{"{{ .Name }} 60 IN A {{ .Group.a}}.{{ .Group.b }}.{{ .Group.c }}.{{ .Group.d }}"},
		Fallthrough: []string{"."}}}
	withNS = []config.Template{
		{Class: "IN", Type: "A", Zones: []string{"example"},
			Match:       []string{`^ip-10-(?P<b>[0-9]*)-(?P<c>[0-9]*)-(?P<d>[0-9]*)[.]example[.]$`},
			Answer:      []string{"{{ .Name }} 60 IN A 10.{{ .Group.b }}.{{ .Group.c }}.{{ .Group.d }}"},
			Authority:   []string{"example. 60 IN NS ns0.example.", "example. 60 IN NS ns1.example."},
			Additional:  []string{"ns0.example. 60 IN A 203.0.113.8", "ns1.example. 60 IN A 198.51.100.8"},
			Fallthrough: []string{"."}},
		{Class: "IN", Type: "MX", Zones: []string{"example"},
			Match:       []string{`^ip-10-(?P<b>[0-9]*)-(?P<c>[0-9]*)-(?P<d>[0-9]*)[.]example[.]$`},
			Answer:      []string{"{{ .Name }} 60 IN MX 10 {{ .Name }}"},
			Additional:  []string{"{{ .Name }} 60 IN A 10.{{ .Group.b }}.{{ .Group.c }}.{{ .Group.d }}"},
			Fallthrough: []string{"."}},
	}
	cname = []config.Template{{Class: "IN", Type: "ANY", Zones: []string{"foogle.com"},
		Match: []string{`^foogle\.com\.$`}, Answer: []string{"foogle.com 60 IN CNAME google.com"}}}
	aaaaNODATA = []config.Template{{Class: "ANY", Type: "AAAA", Rcode: "NOERROR"}}
)

func TestAnswer(t *testing.T) {
	for _, tc := range []struct {
		name    string
		cfg     []config.Template
		qname   string
		qtype   uint16
		qclass  uint16 // 0: IN
		verdict Verdict
		rcode   int
		answer  []string
		ns      []string
		extra   []string
	}{
		{"everything NXDOMAIN", allNXDOMAIN, "www.example.org.", dns.TypeA, 0, Answered, dns.RcodeNameError, nil, nil, nil},
		{"everything NXDOMAIN, CH", allNXDOMAIN, "version.bind.", dns.TypeTXT, dns.ClassCHAOS, Answered, dns.RcodeNameError, nil, nil, nil},
		{".invalid", invalidTLD, "foo.invalid.", dns.TypeA, 0, Answered, dns.RcodeNameError, nil,
			[]string{"invalid.\t60\tIN\tSOA\tns.invalid. hostmaster.invalid. 1 60 60 60 60"}, nil},
		{".invalid in CH", invalidTLD, "foo.invalid.", dns.TypeTXT, dns.ClassCHAOS, Answered, dns.RcodeNameError, nil,
			[]string{"invalid.\t60\tCH\tSOA\tns.invalid. hostmaster.invalid. 1 60 60 60 60"}, nil},
		{"outside .invalid", invalidTLD, "foo.example.", dns.TypeA, 0, Pass, 0, nil, nil, nil},
		{"search domain completion", searchDomain, "something.example.com.dc1.example.com.", dns.TypeA, 0, Answered, dns.RcodeNameError, nil,
			[]string{"dc1.example.com.\t60\tIN\tSOA\tns.dc1.example.com. hostmaster.dc1.example.com. 1 60 60 60 60"}, nil},
		{"search domain, other name falls through", searchDomain, "www.example.com.", dns.TypeA, 0, Pass, 0, nil, nil, nil},
		{"A from the name", aAndPTR, "ip-10-1-2-3.example.", dns.TypeA, 0, Answered, dns.RcodeSuccess,
			[]string{"ip-10-1-2-3.example.\t60\tIN\tA\t10.1.2.3"}, nil, nil},
		{"A wildcard below", aAndPTR, "www.ip-10-1-2-3.example.", dns.TypeA, 0, Answered, dns.RcodeSuccess,
			[]string{"www.ip-10-1-2-3.example.\t60\tIN\tA\t10.1.2.3"}, nil, nil},
		{"A, no match falls through", aAndPTR, "www.example.", dns.TypeA, 0, Pass, 0, nil, nil, nil},
		{"A template, AAAA asked", aAndPTR, "ip-10-1-2-3.example.", dns.TypeAAAA, 0, Pass, 0, nil, nil, nil},
		{"PTR", aAndPTR, "3.2.1.10.in-addr.arpa.", dns.TypePTR, 0, Answered, dns.RcodeSuccess,
			[]string{"3.2.1.10.in-addr.arpa.\t60\tIN\tPTR\tip-10-1-2-3.example."}, nil, nil},
		{"PTR, no match and no fallthrough", aAndPTR, "2.1.10.in-addr.arpa.x.in-addr.arpa.", dns.TypePTR, 0, Failed, 0, nil, nil, nil},
		{"ANY asks every template", aAndPTR, "ip-10-1-2-3.example.", dns.TypeANY, 0, Answered, dns.RcodeSuccess,
			[]string{"ip-10-1-2-3.example.\t60\tIN\tA\t10.1.2.3"}, nil, nil},
		{"var and conditions", privateIP, "10-1-2-3.abcdefghijklmnopqrstuvwxyz.example.com.", dns.TypeA, 0, Answered, dns.RcodeSuccess,
			[]string{"10-1-2-3.abcdefghijklmnopqrstuvwxyz.example.com.\t60\tIN\tA\t10.1.2.3"}, nil, nil},
		{"a condition that is false falls through", privateIP, "8-8-8-8.abcdefghijklmnopqrstuvwxyz.example.com.", dns.TypeA, 0, Pass, 0, nil, nil, nil},
		{"a condition that fails while it runs fails", brokenCondition, "www.example.org.", dns.TypeA, 0, Failed, 0, nil, nil, nil},
		{"parseInt", hexIP, "ip0a7b7c7d.example.", dns.TypeA, 0, Answered, dns.RcodeSuccess,
			[]string{"ip0a7b7c7d.example.\t60\tIN\tA\t10.123.124.125"}, nil, nil},
		{"first pattern", twoPatterns, "ip-10-0-0-1.dc.example.", dns.TypeA, 0, Answered, dns.RcodeSuccess,
			[]string{"ip-10-0-0-1.dc.example.\t60\tIN\tA\t10.0.0.1"}, nil, nil},
		{"second pattern", twoPatterns, "192.0.2.7.ext.example.", dns.TypeA, 0, Answered, dns.RcodeSuccess,
			[]string{"192.0.2.7.ext.example.\t60\tIN\tA\t192.0.2.7"}, nil, nil},
		{"authority and additional", withNS, "ip-10-0-0-1.example.", dns.TypeA, 0, Answered, dns.RcodeSuccess,
			[]string{"ip-10-0-0-1.example.\t60\tIN\tA\t10.0.0.1"},
			[]string{"example.\t60\tIN\tNS\tns0.example.", "example.\t60\tIN\tNS\tns1.example."},
			[]string{"ns0.example.\t60\tIN\tA\t203.0.113.8", "ns1.example.\t60\tIN\tA\t198.51.100.8"}},
		{"MX with additional", withNS, "ip-10-0-0-1.example.", dns.TypeMX, 0, Answered, dns.RcodeSuccess,
			[]string{"ip-10-0-0-1.example.\t60\tIN\tMX\t10 ip-10-0-0-1.example."}, nil,
			[]string{"ip-10-0-0-1.example.\t60\tIN\tA\t10.0.0.1"}},
		{"CNAME", cname, "foogle.com.", dns.TypeA, 0, Answered, dns.RcodeSuccess,
			[]string{"foogle.com.\t60\tIN\tCNAME\tgoogle.com."}, nil, nil},
		{"CNAME zone, other name fails", cname, "www.foogle.com.", dns.TypeA, 0, Failed, 0, nil, nil, nil},
		{"NODATA for AAAA", aaaaNODATA, "www.example.org.", dns.TypeAAAA, 0, Answered, dns.RcodeSuccess, nil, nil, nil},
		{"NODATA for AAAA, A passes", aaaaNODATA, "www.example.org.", dns.TypeA, 0, Pass, 0, nil, nil, nil},
		{"upper case asked", aAndPTR, "IP-10-1-2-3.Example.", dns.TypeA, 0, Answered, dns.RcodeSuccess,
			[]string{"ip-10-1-2-3.example.\t60\tIN\tA\t10.1.2.3"}, nil, nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ts, err := Compile(tc.cfg)
			if err != nil {
				t.Fatal(err)
			}
			req := new(dns.Msg)
			req.SetQuestion(tc.qname, tc.qtype)
			if tc.qclass != 0 {
				req.Question[0].Qclass = tc.qclass
			}
			name := strings.ToLower(tc.qname)
			r := ts.Answer(Question{Msg: req, Name: name, Remote: "192.0.2.1"})
			if r.Verdict != tc.verdict {
				t.Fatalf("verdict %d, want %d (%v)", r.Verdict, tc.verdict, r.Err)
			}
			// A template with conditions claims the names its patterns
			// match: only the full path can say whether they hold.
			conditional := len(tc.cfg[0].Expr) > 0
			if claims := ts.Claims(name, req.Question[0].Qclass, tc.qtype); claims != (tc.verdict != Pass) && !(conditional && claims) {
				t.Errorf("Claims = %v for verdict %d", claims, r.Verdict)
			}
			if r.Verdict != Answered {
				return
			}
			if r.Rcode != tc.rcode {
				t.Errorf("rcode %s, want %s", dns.RcodeToString[r.Rcode], dns.RcodeToString[tc.rcode])
			}
			for _, s := range []struct {
				section   string
				got, want []string
			}{{"answer", records(r.Answer), tc.answer}, {"authority", records(r.Ns), tc.ns}, {"additional", records(r.Extra), tc.extra}} {
				if !slices.Equal(s.got, s.want) {
					t.Errorf("%s %q, want %q", s.section, s.got, s.want)
				}
			}
		})
	}
}

func records(rrs []dns.RR) []string {
	var out []string
	for _, rr := range rrs {
		out = append(out, rr.String())
	}
	return out
}

func TestFields(t *testing.T) {
	ts, err := Compile([]config.Template{{Type: "TXT", Zones: []string{"example."},
		Match: []string{`^(?P<host>[a-z]+)\.example\.$`},
		Answer: []string{`{{ .Name }} 5 IN TXT "{{ .Zone }}" "{{ .Class }}" "{{ .Type }}" "{{ index .Match 1 }}" ` +
			`"{{ .Group.host }}" "{{ .Group.a }}" "{{ .Remote }}" "{{ .Question.Name }}" "{{ .Message.Id }}" "{{ .Meta "x" }}"`}}})
	if err != nil {
		t.Fatal(err)
	}
	req := new(dns.Msg)
	req.SetQuestion("WWW.example.", dns.TypeTXT)
	req.Id = 4242
	r := ts.Answer(Question{Msg: req, Name: "www.example.", Remote: "192.0.2.1"})
	want := `www.example.	5	IN	TXT	"example." "IN" "TXT" "www" "www" "<no value>" "192.0.2.1" "WWW.example." "4242" ""`
	if r.Verdict != Answered || len(r.Answer) != 1 || r.Answer[0].String() != want {
		t.Fatalf("got %v %v (%v), want %s", r.Verdict, r.Answer, r.Err, want)
	}
}

// A record template that fails says which, in which section and how,
// for the metrics CoreDNS labels so (template_failures_total: it did not
// execute; rr_failures_total: it made no valid record).
func TestTemplateFailures(t *testing.T) {
	for _, tc := range []struct {
		name   string
		answer string
		rcode  string
		fail   *Failure // the template's text as CoreDNS labels it: parsed and printed again
	}{
		{"not a record", "{{ .Name }} 60 IN A not-an-address", "",
			&Failure{Section: "answer", Template: "{{.Name}} 60 IN A not-an-address", RR: true}},
		{"empty", "{{ if false }}x{{ end }}", "", &Failure{Section: "answer", Template: "{{if false}}x{{end}}", RR: true}},
		{"execution fails", "{{ .Name }} 60 IN A 10.0.0.{{ parseInt .Name 10 8 }}", "",
			&Failure{Section: "answer", Template: "{{.Name}} 60 IN A 10.0.0.{{parseInt .Name 10 8}}"}},
		{"unknown field", "{{ .Nope }} 60 IN A 10.0.0.1", "", &Failure{Section: "answer", Template: "{{.Nope}} 60 IN A 10.0.0.1"}},
		{"rcode SERVFAIL", "{{ .Name }} 60 IN A 10.0.0.1", "SERVFAIL", nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ts, err := Compile([]config.Template{{Type: "A", Answer: []string{tc.answer}, Rcode: tc.rcode}})
			if err != nil {
				t.Fatal(err)
			}
			req := new(dns.Msg)
			req.SetQuestion("www.example.", dns.TypeA)
			r := ts.Answer(Question{Msg: req, Name: "www.example."})
			if r.Verdict != Failed {
				t.Fatalf("verdict %d, want Failed; answer %v", r.Verdict, r.Answer)
			}
			if want := (Match{Zone: ".", Class: "IN", Type: "A"}); r.Match != want {
				t.Errorf("match %+v, want %+v", r.Match, want)
			}
			if (r.Failure == nil) != (tc.fail == nil) || r.Failure != nil && *r.Failure != *tc.fail {
				t.Errorf("failure %+v, want %+v", r.Failure, tc.fail)
			}
		})
	}
}

// An answer says which template matched, with the class and type its
// records see (the template's for a question of ANY); a question no
// template matches says none.
func TestAnswerMatch(t *testing.T) {
	ts, err := Compile(append(slices.Clone(aAndPTR), withNS[1]))
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		name  string
		qtype uint16
		want  Match
	}{
		{"ip-10-1-2-3.example.", dns.TypeA, Match{Zone: "example.", Class: "IN", Type: "A"}},
		{"3.2.1.10.in-addr.arpa.", dns.TypePTR, Match{Zone: "in-addr.arpa.", Class: "IN", Type: "PTR"}},
		{"ip-10-1-2-3.example.", dns.TypeMX, Match{Zone: "example.", Class: "IN", Type: "MX"}},
		{"www.example.", dns.TypeA, Match{}}, // falls through
	} {
		req := new(dns.Msg)
		req.SetQuestion(c.name, c.qtype)
		if r := ts.Answer(Question{Msg: req, Name: c.name}); r.Match != c.want {
			t.Errorf("%s %s: match %+v, want %+v", c.name, dns.TypeToString[c.qtype], r.Match, c.want)
		}
	}
}

func TestCompileErrors(t *testing.T) {
	for _, tc := range []struct {
		cfg  config.Template
		want string
	}{
		{config.Template{Type: "AAAA", Class: "NOPE"}, `template[0].class: "NOPE" is not a DNS class`},
		{config.Template{Type: "NOPE"}, `template[0].type: "NOPE" is not a query type`},
		{config.Template{Type: "A", Match: []string{"ok", "("}}, "template[0].match[1]: error parsing regexp"},
		{config.Template{Type: "A", Match: []string{strings.Repeat("a", 10001)}}, "template[0].match[0]: the pattern is 10001 characters long"},
		{config.Template{Type: "A", Answer: []string{"{{ .Name "}}, "template[0].answer[0]: template: answer:1: unclosed action"},
		{config.Template{Type: "A", Authority: []string{"{{ nope }}"}}, `template[0].authority[0]: template: authority:1: function "nope" not defined`},
		{config.Template{Type: "A", Rcode: "MAYBE"}, `template[0].rcode: "MAYBE" is not a response code`},
		{config.Template{Type: "A", Zones: []string{"a..b"}}, `template[0].zones[0]: "a..b" is not a domain name`},
		{config.Template{Type: "A", ExtendedError: &config.TemplateExtendedError{Code: 70000}}, "template[0].extendedError.code: must be between 0 and 65535"},
	} {
		_, err := Compile([]config.Template{tc.cfg})
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%+v: error %v, want %q", tc.cfg, err, tc.want)
		}
	}
}

func TestChase(t *testing.T) {
	ts, err := Compile(cname)
	if err != nil {
		t.Fatal(err)
	}
	req := new(dns.Msg)
	req.SetQuestion("foogle.com.", dns.TypeA)
	r := ts.Answer(Question{Msg: req, Name: "foogle.com."})
	if !r.Chases(dns.TypeA) || r.Chases(dns.TypeMX) {
		t.Fatal("a CNAME answer to A must be chased, to MX not")
	}
	target, _ := dns.NewRR("google.com. 300 IN A 192.0.2.9")
	truncated := r.Chase(func(name string) *dns.Msg {
		if name != "google.com." {
			t.Errorf("looked up %s", name)
		}
		return &dns.Msg{Answer: []dns.RR{target}, MsgHdr: dns.MsgHdr{Truncated: true}}
	})
	want := []string{"foogle.com.\t60\tIN\tCNAME\tgoogle.com.", "google.com.\t300\tIN\tA\t192.0.2.9"}
	if got := records(r.Answer); !slices.Equal(got, want) || !truncated {
		t.Fatalf("answer %q truncated %v, want %q and true", got, truncated, want)
	}
}

func TestClaimsAllocatesNothing(t *testing.T) {
	ts, err := Compile(append(slices.Clone(aAndPTR), aaaaNODATA...))
	if err != nil {
		t.Fatal(err)
	}
	if n := testing.AllocsPerRun(100, func() {
		ts.Claims("www.default.svc.cluster.local.", dns.ClassINET, dns.TypeA)
		ts.Claims("ip-10-1-2-3.example.", dns.ClassINET, dns.TypeA)
	}); n != 0 && !testutil.RaceEnabled { // regexp keeps its machines in a sync.Pool
		t.Fatalf("Claims allocates %v times", n)
	}
}

func TestBare(t *testing.T) {
	ts, err := Compile(append(append(slices.Clone(invalidTLD), aaaaNODATA...), cname...))
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		name  string
		qtype uint16
		rcode int
		zone  string
		ok    bool
	}{
		{"www.example.org.", dns.TypeAAAA, dns.RcodeSuccess, ".", true},
		{"www.example.org.", dns.TypeA, 0, "", false},                  // passes on
		{"x.invalid.", dns.TypeAAAA, 0, "", false},                     // a SOA and an extended error
		{"foogle.com.", dns.TypeA, 0, "", false},                       // a CNAME
		{"www.foogle.com.", dns.TypeA, 0, "", false},                   // SERVFAIL
		{"www.foogle.com.", dns.TypeAAAA, dns.RcodeSuccess, ".", true}, // the AAAA template comes first
	} {
		rcode, match, ok := ts.Bare(c.name, dns.ClassINET, c.qtype)
		want := Match{}
		if c.ok {
			want = Match{Zone: c.zone, Class: "IN", Type: dns.TypeToString[c.qtype]}
		}
		if rcode != c.rcode || match != want || ok != c.ok {
			t.Errorf("%s %s: %d %+v %v, want %d %+v %v", c.name, dns.TypeToString[c.qtype], rcode, match, ok, c.rcode, want, c.ok)
		}
	}
}
