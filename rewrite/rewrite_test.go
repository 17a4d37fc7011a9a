package rewrite

import (
	"fmt"
	"strings"
	"testing"

	"github.com/miekg/dns"

	"github.com/shardns/shardns/config"
	"github.com/shardns/shardns/internal/testutil"
)

func name(from, to string) config.RewriteRule {
	return config.RewriteRule{Field: "name", From: from, To: to}
}

func TestApply(t *testing.T) {
	for _, c := range []struct {
		desc     string
		rules    []config.RewriteRule
		qname    string
		qtype    uint16
		wantOK   bool
		wantName string
		wantType uint16
		wantTTL  string // "lo-hi" when a ttl rule applies
	}{
		{"exact, match omitted", []config.RewriteRule{name("foo.example.com", "foo.default.svc.cluster.local")},
			"foo.example.com.", dns.TypeA, true, "foo.default.svc.cluster.local.", dns.TypeA, ""},
		{"exact compares case-insensitively", []config.RewriteRule{name("FOO.Example.com.", "Foo.default.svc.cluster.local")},
			"foo.example.com.", dns.TypeA, true, "foo.default.svc.cluster.local.", dns.TypeA, ""},
		{"exact needs the whole name", []config.RewriteRule{name("example.com", "x.cluster.local")},
			"foo.example.com.", dns.TypeA, false, "foo.example.com.", dns.TypeA, ""},
		{"prefix", []config.RewriteRule{{Field: "name", Match: "prefix", From: "www.", To: "web."}},
			"www.shop.svc.cluster.local.", dns.TypeA, true, "web.shop.svc.cluster.local.", dns.TypeA, ""},
		{"suffix", []config.RewriteRule{{Field: "name", Match: "suffix", From: ".corp.example", To: ".default.svc.cluster.local"}},
			"db.corp.example.", dns.TypeAAAA, true, "db.default.svc.cluster.local.", dns.TypeAAAA, ""},
		{"suffix does not match the middle", []config.RewriteRule{{Field: "name", Match: "suffix", From: ".corp.example", To: ".x"}},
			"db.corp.example.org.", dns.TypeA, false, "db.corp.example.org.", dns.TypeA, ""},
		{"substring replaces every occurrence", []config.RewriteRule{{Field: "name", Match: "substring", From: "us-west-1", To: "svc"}},
			"api.us-west-1.us-west-1.example.", dns.TypeA, true, "api.svc.svc.example.", dns.TypeA, ""},
		{"regex groups", []config.RewriteRule{{Field: "name", Match: "regex", From: `(.*)-(us-west-1)\.example\.org\.$`, To: "{1}.service.{2}.consul"}},
			"ftp-us-west-1.example.org.", dns.TypeA, true, "ftp.service.us-west-1.consul.", dns.TypeA, ""},
		{"regex with ten groups", []config.RewriteRule{{Field: "name", Match: "regex",
			From: `^(a)(b)(c)(d)(e)(f)(g)(h)(i)(j)\.$`, To: "{10}{1}.x"}},
			"abcdefghij.", dns.TypeA, true, "ja.x.", dns.TypeA, ""},
		{"regex no match", []config.RewriteRule{{Field: "name", Match: "regex", From: `^db\.`, To: "x."}},
			"web.example.", dns.TypeA, false, "web.example.", dns.TypeA, ""},
		{"type", []config.RewriteRule{{Field: "type", From: "ANY", To: "HINFO"}},
			"web.example.", dns.TypeANY, true, "web.example.", dns.TypeHINFO, ""},
		{"type, other type untouched", []config.RewriteRule{{Field: "type", From: "ANY", To: "HINFO"}},
			"web.example.", dns.TypeA, false, "web.example.", dns.TypeA, ""},
		{"ttl", []config.RewriteRule{{Field: "ttl", Match: "suffix", From: "example.", TTL: "30-300"}},
			"web.example.", dns.TypeA, true, "web.example.", dns.TypeA, "30-300"},
		{"stop: the first match is the last", []config.RewriteRule{
			name("a.example", "b.example"), name("b.example", "c.example")},
			"a.example.", dns.TypeA, true, "b.example.", dns.TypeA, ""},
		{"continue chains on the rewritten name", []config.RewriteRule{
			{Field: "name", From: "a.example", To: "b.example", Continue: true}, name("b.example", "c.example")},
			"a.example.", dns.TypeA, true, "c.example.", dns.TypeA, ""},
		{"continue skips rules that do not match", []config.RewriteRule{
			{Field: "name", From: "a.example", To: "b.example", Continue: true},
			{Field: "type", From: "MX", To: "TXT"},
			{Field: "ttl", From: "b.example", TTL: "10"}},
			"a.example.", dns.TypeA, true, "b.example.", dns.TypeA, "10-10"},
		{"a non-matching rule does not stop the search", []config.RewriteRule{
			name("x.example", "y.example"), name("a.example", "b.example")},
			"a.example.", dns.TypeA, true, "b.example.", dns.TypeA, ""},
	} {
		t.Run(c.desc, func(t *testing.T) {
			rs, err := Compile(c.rules)
			if err != nil {
				t.Fatal(err)
			}
			res, ok, err := rs.Apply(c.qname, c.qtype)
			if err != nil {
				t.Fatal(err)
			}
			if ok != c.wantOK || res.Name != c.wantName || res.Type != c.wantType {
				t.Fatalf("Apply = %s %s ok=%v, want %s %s ok=%v", res.Name, dns.TypeToString[res.Type], ok,
					c.wantName, dns.TypeToString[c.wantType], c.wantOK)
			}
			if ok != rs.Matches(c.qname, c.qtype) {
				t.Fatalf("Matches disagrees with Apply")
			}
			if res.Renamed != (c.wantName != c.qname) {
				t.Fatalf("Renamed = %v", res.Renamed)
			}
			var ttl string
			if res.TTL {
				ttl = fmt.Sprintf("%d-%d", res.TTLMin, res.TTLMax)
			}
			if ttl != c.wantTTL {
				t.Fatalf("ttl %q, want %q", ttl, c.wantTTL)
			}
		})
	}
}

func TestApplyInvalidName(t *testing.T) {
	rs, err := Compile([]config.RewriteRule{{Field: "name", Match: "regex", From: `^(.*)$`, To: "{1}.{1}"}})
	if err != nil {
		t.Fatal(err)
	}
	// "a.." is not a name: an error, which the query path answers with SERVFAIL.
	if _, ok, err := rs.Apply("a.", dns.TypeA); !ok || err == nil {
		t.Fatalf("ok=%v err=%v, want a match and an error", ok, err)
	}
}

func TestCompileErrors(t *testing.T) {
	for _, c := range []struct {
		rule config.RewriteRule
		want string
	}{
		{config.RewriteRule{Field: "name", Match: "regex", From: "(", To: "x"}, "rewrite[0].from"},
		{config.RewriteRule{Field: "name", Match: "regex", From: "(a)", To: "{2}.x"}, "rewrite[0].to: uses group {2}"},
		{config.RewriteRule{Field: "name", Match: "glob", From: "a", To: "b"}, "rewrite[0].match"},
		{config.RewriteRule{Field: "class", From: "CH", To: "IN"}, "rewrite[0].field"},
		{config.RewriteRule{Field: "type", From: "A", To: "NOPE"}, "not a query type"},
		{config.RewriteRule{Field: "ttl", From: "a", TTL: "9-1"}, "rewrite[0].ttl"},
	} {
		if _, err := Compile([]config.RewriteRule{c.rule}); err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%+v: err %v, want %q", c.rule, err, c.want)
		}
	}
	if rs, err := Compile(nil); rs != nil || err != nil {
		t.Fatalf("no rules: %v %v, want nil", rs, err)
	}
}

func rr(s string) dns.RR {
	r, err := dns.NewRR(s)
	if err != nil {
		panic(err)
	}
	return r
}

func TestSection(t *testing.T) {
	res := Result{Name: "foo.default.svc.cluster.local.", Type: dns.TypeSRV, Renamed: true}
	in := []dns.RR{
		rr("foo.default.svc.cluster.local. 5 IN SRV 0 100 80 foo.default.svc.cluster.local."),
		rr("other.default.svc.cluster.local. 5 IN A 10.0.0.2"),
		rr("FOO.default.svc.cluster.local. 5 IN A 10.0.0.1"),
	}
	out := res.Section(in, "Foo.Example.com.")
	want := []string{
		"Foo.Example.com.\t5\tIN\tSRV\t0 100 80 Foo.Example.com.",
		"other.default.svc.cluster.local.\t5\tIN\tA\t10.0.0.2",
		"Foo.Example.com.\t5\tIN\tA\t10.0.0.1",
	}
	for i := range want {
		if out[i].String() != want[i] {
			t.Errorf("record %d: %s, want %s", i, out[i], want[i])
		}
	}
	// The input (shared with snapshots and caches) is untouched; records
	// that did not change are the same records.
	if in[0].Header().Name != "foo.default.svc.cluster.local." || out[1] != in[1] {
		t.Fatalf("input modified or unchanged record copied")
	}
}

func TestSectionClampsTTL(t *testing.T) {
	res := Result{Name: "a.example.", TTL: true, TTLMin: 30, TTLMax: 300}
	in := []dns.RR{rr("a.example. 5 IN A 192.0.2.1"), rr("a.example. 100 IN A 192.0.2.2"), rr("a.example. 3600 IN A 192.0.2.3"),
		&dns.OPT{Hdr: dns.RR_Header{Name: ".", Rrtype: dns.TypeOPT, Ttl: 0x8000}}}
	out := res.Section(in, "a.example.")
	for i, want := range []uint32{30, 100, 300, 0x8000} {
		if got := out[i].Header().Ttl; got != want {
			t.Errorf("record %d: ttl %d, want %d", i, got, want)
		}
	}
	if in[0].Header().Ttl != 5 {
		t.Fatal("input modified")
	}
	if nothing := (&Result{Name: "a."}); len(nothing.Section(in, "a.")) != len(in) {
		t.Fatal("no rewrite changed the section")
	}
}

func TestMatchesAllocatesNothing(t *testing.T) {
	rs, err := Compile([]config.RewriteRule{
		name("foo.example.com", "foo.default.svc.cluster.local"),
		{Field: "name", Match: "suffix", From: "corp.example", To: "x"},
		{Field: "name", Match: "regex", From: `^db-(\d+)\.`, To: "db.{1}"},
	})
	if err != nil {
		t.Fatal(err)
	}
	allocs := testing.AllocsPerRun(100, func() { rs.Matches("web.shop.svc.cluster.local.", dns.TypeA) })
	if allocs != 0 && !testutil.RaceEnabled { // regexp keeps its machines in a sync.Pool
		t.Fatalf("Matches allocates %v times per call", allocs)
	}
}
