package rewrite

import (
	"strings"
	"testing"

	"github.com/miekg/dns"

	"github.com/shardns/shardns/config"
)

// gardenerRule is the search-path rewrite Gardener ships: a name that a
// resolver's search list doubled is asked as the service, and the answer
// carries the doubled name back.
var gardenerRule = config.RewriteRule{Field: "name", Match: "regex",
	From:        `(^(?:[^\.]+\.)+)svc\.cluster\.local\.svc\.cluster\.local`,
	To:          "{1}svc.cluster.local",
	AnswerName:  []config.RewriteAnswer{{From: `(^(?:[^\.]+\.)+)svc\.cluster\.local`, To: "{1}svc.cluster.local.svc.cluster.local"}},
	AnswerValue: []config.RewriteAnswer{{From: `(^(?:[^\.]+\.)+)svc\.cluster\.local`, To: "{1}svc.cluster.local.svc.cluster.local"}},
}

func TestAnswerRewrites(t *testing.T) {
	for _, c := range []struct {
		desc  string
		rules []config.RewriteRule
		qname string
		qtype uint16
		in    []string // the response to the rewritten question
		want  []string // what the client sees
	}{
		{"gardener: owner and target carry the doubled name", []config.RewriteRule{gardenerRule},
			"web.shop.svc.cluster.local.svc.cluster.local.", dns.TypeSRV,
			[]string{"_http._tcp.web.shop.svc.cluster.local. 5 IN SRV 0 100 80 web.shop.svc.cluster.local.",
				"web.shop.svc.cluster.local. 5 IN A 10.0.0.1"},
			[]string{"_http._tcp.web.shop.svc.cluster.local.svc.cluster.local. 5 IN SRV 0 100 80 web.shop.svc.cluster.local.svc.cluster.local.",
				"web.shop.svc.cluster.local.svc.cluster.local. 5 IN A 10.0.0.1"}},
		{"gardener: a CNAME's target outside the cluster is left alone", []config.RewriteRule{gardenerRule},
			"ext.shop.svc.cluster.local.svc.cluster.local.", dns.TypeA,
			[]string{"ext.shop.svc.cluster.local. 5 IN CNAME www.example.org.", "www.example.org. 5 IN A 192.0.2.1"},
			[]string{"ext.shop.svc.cluster.local.svc.cluster.local. 5 IN CNAME www.example.org.", "www.example.org. 5 IN A 192.0.2.1"}},
		{"answer value on an exact rule, owner given back the asked name",
			[]config.RewriteRule{{Field: "name", From: "www.example.org", To: "web.default.svc.cluster.local",
				AnswerValue: []config.RewriteAnswer{{From: `(.*)\.svc\.cluster\.local`, To: "{1}.example.org"}}}},
			"www.example.org.", dns.TypeCNAME,
			[]string{"web.default.svc.cluster.local. 5 IN CNAME db.default.svc.cluster.local."},
			[]string{"www.example.org. 5 IN CNAME db.default.example.org."}},
		{"answer value reaches PTR, MX, NS and the SOA's primary server",
			[]config.RewriteRule{{Field: "name", Match: "suffix", From: ".consul", To: ".svc.cluster.local",
				AnswerValue: []config.RewriteAnswer{{From: `^(.*)\.svc\.cluster\.local\.$`, To: "{1}.consul"}}}},
			"x.consul.", dns.TypeANY,
			[]string{"x.svc.cluster.local. 5 IN PTR a.svc.cluster.local.", "x.svc.cluster.local. 5 IN MX 10 m.svc.cluster.local.",
				"x.svc.cluster.local. 5 IN NS ns.svc.cluster.local.",
				"cluster.local. 5 IN SOA ns.dns.cluster.local. hostmaster.svc.cluster.local. 1 7200 1800 86400 5"},
			[]string{"x.consul. 5 IN PTR a.consul.", "x.consul. 5 IN MX 10 m.consul.", "x.consul. 5 IN NS ns.consul.",
				"cluster.local. 5 IN SOA ns.dns.cluster.local. hostmaster.svc.cluster.local. 1 7200 1800 86400 5"}},
		{"an answer name that does not match: the owner still gets the asked name",
			[]config.RewriteRule{{Field: "name", Match: "regex", From: `^(.*)\.old\.domain\.$`, To: "{1}.new.domain",
				AnswerName: []config.RewriteAnswer{{From: `^nomatch\.`, To: "x"}}}},
			"a.old.domain.", dns.TypeA,
			[]string{"a.new.domain. 5 IN A 192.0.2.1", "b.new.domain. 5 IN A 192.0.2.2"},
			[]string{"a.old.domain. 5 IN A 192.0.2.1", "b.new.domain. 5 IN A 192.0.2.2"}},
		{"answer name maps other owners of the section too",
			[]config.RewriteRule{{Field: "name", Match: "regex", From: `^(.*)\.old\.domain\.$`, To: "{1}.new.domain",
				AnswerName: []config.RewriteAnswer{{From: `^(.*)\.new\.domain\.$`, To: "{1}.old.domain"}}}},
			"a.old.domain.", dns.TypeA,
			[]string{"a.new.domain. 5 IN CNAME b.new.domain.", "b.new.domain. 5 IN A 192.0.2.2"},
			[]string{"a.old.domain. 5 IN CNAME b.new.domain.", "b.old.domain. 5 IN A 192.0.2.2"}},
		{"continue: the last rule's answer rewrites run first",
			[]config.RewriteRule{
				{Field: "name", Match: "suffix", From: ".a.", To: ".b.", Continue: true,
					AnswerName: []config.RewriteAnswer{{From: `^(.*)\.b\.$`, To: "{1}.a"}}},
				{Field: "name", Match: "suffix", From: ".b.", To: ".c.",
					AnswerName: []config.RewriteAnswer{{From: `^(.*)\.c\.$`, To: "{1}.b"}}}},
			"x.a.", dns.TypeA,
			[]string{"y.c. 5 IN A 192.0.2.1"},
			[]string{"y.a. 5 IN A 192.0.2.1"}},
		{"an answer rewrite of a rule that did not match does nothing",
			[]config.RewriteRule{{Field: "name", From: "q.example", To: "r.example",
				AnswerName: []config.RewriteAnswer{{From: `.*`, To: "never.example"}}}},
			"other.example.", dns.TypeA,
			[]string{"other.example. 5 IN A 192.0.2.1"},
			[]string{"other.example. 5 IN A 192.0.2.1"}},
	} {
		t.Run(c.desc, func(t *testing.T) {
			rs, err := Compile(c.rules)
			if err != nil {
				t.Fatal(err)
			}
			res, _, err := rs.Apply(c.qname, c.qtype)
			if err != nil {
				t.Fatal(err)
			}
			in := make([]dns.RR, len(c.in))
			for i, s := range c.in {
				in[i] = rr(s)
			}
			before := records(in)
			got := records(res.Section(in, c.qname))
			if got != records(parse(c.want)) {
				t.Errorf("got\n%s\nwant\n%s", got, records(parse(c.want)))
			}
			if records(in) != before {
				t.Errorf("the input section was modified")
			}
		})
	}
}

func parse(ss []string) []dns.RR {
	out := make([]dns.RR, len(ss))
	for i, s := range ss {
		out[i] = rr(s)
	}
	return out
}

func records(rrs []dns.RR) string {
	var b strings.Builder
	for _, r := range rrs {
		b.WriteString(r.String() + "\n")
	}
	return b.String()
}

func TestCompileAnswerErrors(t *testing.T) {
	for _, c := range []struct {
		rule config.RewriteRule
		want string
	}{
		{config.RewriteRule{Field: "name", From: "a", To: "b", AnswerName: []config.RewriteAnswer{{From: "(", To: "x"}}},
			"rewrite[0].answerName[0].from"},
		{config.RewriteRule{Field: "name", From: "a", To: "b", AnswerValue: []config.RewriteAnswer{{From: "(a)", To: "{2}"}}},
			"rewrite[0].answerValue[0].to"},
		{config.RewriteRule{Field: "name", From: "a", To: "b", AnswerValue: []config.RewriteAnswer{{From: "a"}}},
			"rewrite[0].answerValue[0].to"},
	} {
		if _, err := Compile([]config.RewriteRule{c.rule}); err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%+v: err %v, want %q", c.rule, err, c.want)
		}
	}
}
