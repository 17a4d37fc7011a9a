package query

import (
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/miekg/dns"

	"github.com/shardns/shardns/cache"
	"github.com/shardns/shardns/config"
	"github.com/shardns/shardns/forward"
	"github.com/shardns/shardns/hosts"
	"github.com/shardns/shardns/internal/testutil"
	"github.com/shardns/shardns/rewrite"
)

func chaosQuery(name string, qtype uint16) *dns.Msg {
	m := query(name, qtype)
	m.Question[0].Qclass = dns.ClassCHAOS
	return m
}

func TestChaos(t *testing.T) {
	off := testHandler(t)
	if r := serve(t, off, pack(t, chaosQuery("version.bind.", dns.TypeTXT)), Transport{}); r.Rcode != dns.RcodeRefused {
		t.Fatalf("chaos off: %s, want REFUSED", dns.RcodeToString[r.Rcode])
	}
	on := testHandler(t)
	on.Chaos = &Chaos{Version: "shardns-1.2.3", Hostname: "replica-0", Authors: []string{"ann", "bob"}}
	for _, c := range []struct {
		name  string
		qtype uint16
		rcode int
		txt   string
	}{
		{"version.bind.", dns.TypeTXT, dns.RcodeSuccess, "shardns-1.2.3"},
		{"VERSION.Server.", dns.TypeTXT, dns.RcodeSuccess, "shardns-1.2.3"},
		{"hostname.bind.", dns.TypeTXT, dns.RcodeSuccess, "replica-0"},
		{"id.server.", dns.TypeANY, dns.RcodeSuccess, "replica-0"},
		{"version.bind.", dns.TypeA, dns.RcodeSuccess, ""}, // NODATA
		{"web.ns.svc.cluster.local.", dns.TypeA, dns.RcodeRefused, ""},
	} {
		r := serve(t, on, pack(t, chaosQuery(c.name, c.qtype)), Transport{})
		var txt string
		if len(r.Answer) == 1 {
			rr := r.Answer[0].(*dns.TXT)
			if rr.Hdr.Class != dns.ClassCHAOS || rr.Hdr.Name != c.name {
				t.Errorf("%s: record %v", c.name, rr)
			}
			txt = rr.Txt[0]
		}
		if r.Rcode != c.rcode || txt != c.txt || len(r.Answer) > 1 {
			t.Errorf("%s %s: %s %q, want %s %q", c.name, dns.TypeToString[c.qtype], dns.RcodeToString[r.Rcode], txt,
				dns.RcodeToString[c.rcode], c.txt)
		}
	}
	// authors.bind: a record per author, as CoreDNS's chaos authors; no
	// authors, the name is refused.
	r := serve(t, on, pack(t, chaosQuery("authors.bind.", dns.TypeTXT)), Transport{})
	var authors []string
	for _, rr := range r.Answer {
		authors = append(authors, rr.(*dns.TXT).Txt...)
	}
	if r.Rcode != dns.RcodeSuccess || !r.Authoritative || fmt.Sprint(authors) != "[ann bob]" {
		t.Errorf("authors.bind: %s aa=%v %q, want NOERROR aa [ann bob]", dns.RcodeToString[r.Rcode], r.Authoritative, authors)
	}
	on.Chaos.Authors = nil
	if r := serve(t, on, pack(t, chaosQuery("authors.bind.", dns.TypeTXT)), Transport{}); r.Rcode != dns.RcodeRefused {
		t.Errorf("authors.bind without authors: %s, want REFUSED", dns.RcodeToString[r.Rcode])
	}
	// Other classes are still refused.
	m := query("version.bind.", dns.TypeTXT)
	m.Question[0].Qclass = dns.ClassHESIOD
	if r := serve(t, on, pack(t, m), Transport{}); r.Rcode != dns.RcodeRefused {
		t.Fatalf("HESIOD: %s", dns.RcodeToString[r.Rcode])
	}
}

func withRules(t testing.TB, h *Handler, rules ...config.RewriteRule) *Handler {
	rs, err := rewrite.Compile(rules)
	if err != nil {
		t.Fatal(err)
	}
	h.Rewrite = rs
	return h
}

func TestRewriteName(t *testing.T) {
	h := withRules(t, testHandler(t),
		config.RewriteRule{Field: "name", From: "web.example.com", To: "web.ns.svc.cluster.local"},
		config.RewriteRule{Field: "ttl", Match: "suffix", From: "ns.svc.cluster.local", TTL: "60-120", Continue: true},
		config.RewriteRule{Field: "name", Match: "regex", From: `^(\w+)\.short\.$`, To: "{1}.ns.svc.cluster.local"},
		config.RewriteRule{Field: "name", Match: "regex", From: `^broken\.$`, To: "a..b"},
	)
	// Twice: the second time the fast path has had its chance.
	for range 2 {
		r := serve(t, h, pack(t, query("Web.Example.com.", dns.TypeA)), Transport{})
		if r.Question[0].Name != "Web.Example.com." || r.Question[0].Qtype != dns.TypeA {
			t.Fatalf("question %v, want the asked one", r.Question[0])
		}
		if got := testutil.Records(r.Answer); len(got) != 1 || got[0] != "Web.Example.com.\t5\tIN\tA\t10.0.0.1" {
			t.Fatalf("answer %q", got)
		}
		// The cluster name itself is answered as always: the ttl rule is
		// reached only by a name rule that continues.
		r = serve(t, h, pack(t, query("web.ns.svc.cluster.local.", dns.TypeA)), Transport{})
		if got := testutil.Records(r.Answer); len(got) != 1 || got[0] != "web.ns.svc.cluster.local.\t60\tIN\tA\t10.0.0.1" {
			t.Fatalf("ttl rule: %q", got)
		}
	}
	r := serve(t, h, pack(t, query("web.short.", dns.TypeSRV)), Transport{})
	if r.Rcode != dns.RcodeSuccess || len(r.Answer) != 1 || r.Answer[0].Header().Name != "web.short." ||
		r.Answer[0].(*dns.SRV).Target != "web.short." || len(r.Extra) != 1 || r.Extra[0].Header().Name != "web.short." {
		t.Fatalf("SRV through a regex rule: %v", r)
	}
	r = serve(t, h, pack(t, query("nothere.short.", dns.TypeA)), Transport{})
	if r.Rcode != dns.RcodeNameError || r.Question[0].Name != "nothere.short." || len(r.Ns) != 1 ||
		r.Ns[0].Header().Name != "cluster.local." {
		t.Fatalf("NXDOMAIN through a rule: %v", r)
	}
	if r := serve(t, h, pack(t, query("broken.", dns.TypeA)), Transport{}); r.Rcode != dns.RcodeServerFailure {
		t.Fatalf("a rule making no name: %s, want SERVFAIL", dns.RcodeToString[r.Rcode])
	}
}

// TestRewriteAnswer is Gardener's search-path rewrite: a name the search
// list doubled is answered as the service, and every name in the answer
// carries the doubled name the client asked.
func TestRewriteAnswer(t *testing.T) {
	back := []config.RewriteAnswer{{From: `(^(?:[^\.]+\.)+)svc\.cluster\.local`, To: "{1}svc.cluster.local.svc.cluster.local"}}
	h := withRules(t, testHandler(t), config.RewriteRule{Field: "name", Match: "regex",
		From: `(^(?:[^\.]+\.)+)svc\.cluster\.local\.svc\.cluster\.local`, To: "{1}svc.cluster.local",
		AnswerName: back, AnswerValue: back})
	// The SRV's target and the additional A are not the rewritten name:
	// only the answer rewrites reach them.
	const asked = "_http._tcp.web.ns.svc.cluster.local.svc.cluster.local."
	for range 2 { // the second time, past the fast path's packed answers
		r := serve(t, h, pack(t, query(asked, dns.TypeSRV)), Transport{})
		if r.Rcode != dns.RcodeSuccess || r.Question[0].Name != asked {
			t.Fatalf("%s, question %v", dns.RcodeToString[r.Rcode], r.Question)
		}
		got := append(testutil.Records(r.Answer), testutil.Records(r.Extra)...)
		want := []string{asked + "\t5\tIN\tSRV\t0 100 80 web.ns.svc.cluster.local.svc.cluster.local.",
			"web.ns.svc.cluster.local.svc.cluster.local.\t5\tIN\tA\t10.0.0.1"}
		if fmt.Sprint(got) != fmt.Sprint(want) {
			t.Fatalf("got %q\nwant %q", got, want)
		}
		// The service's own name is answered as it is.
		r = serve(t, h, pack(t, query("web.ns.svc.cluster.local.", dns.TypeA)), Transport{})
		if got := testutil.Records(r.Answer); len(got) != 1 || got[0] != "web.ns.svc.cluster.local.\t5\tIN\tA\t10.0.0.1" {
			t.Fatalf("the service's name: %q", got)
		}
	}
}

func TestRewriteType(t *testing.T) {
	h := withRules(t, testHandler(t), config.RewriteRule{Field: "type", From: "AAAA", To: "A"})
	r := serve(t, h, pack(t, query("web.ns.svc.cluster.local.", dns.TypeAAAA)), Transport{})
	if r.Question[0].Qtype != dns.TypeAAAA || len(r.Answer) != 1 || r.Answer[0].Header().Rrtype != dns.TypeA {
		t.Fatalf("got %v", r)
	}
}

func hostsFor(t testing.TB, opts hosts.Options, lines ...string) *hosts.Hosts {
	t.Helper()
	path := filepath.Join(t.TempDir(), "hosts")
	content := ""
	for _, l := range lines {
		content += l + "\n"
	}
	if err := os.WriteFile(path, []byte(content), 0o644); err != nil {
		t.Fatal(err)
	}
	h, err := hosts.New(hosts.Config{Options: opts, Files: []string{path}, Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatal(err)
	}
	return h
}

func TestHosts(t *testing.T) {
	h := testHandler(t)
	h.Hosts = hostsFor(t, hosts.Options{TTL: 3600, Zones: []string{"example.com.", "cluster.local."}, Fallthrough: []string{"cluster.local."}},
		"192.0.2.1 db.example.com",
		"192.0.2.2 web.ns.svc.cluster.local") // hosts come before the cluster zones
	for _, c := range []struct {
		name   string
		qtype  uint16
		rcode  int
		answer []string
	}{
		{"DB.example.com.", dns.TypeA, dns.RcodeSuccess, []string{"DB.example.com.\t3600\tIN\tA\t192.0.2.1"}},
		{"db.example.com.", dns.TypeAAAA, dns.RcodeSuccess, nil},
		{"missing.example.com.", dns.TypeA, dns.RcodeServerFailure, nil},
		{"web.ns.svc.cluster.local.", dns.TypeA, dns.RcodeSuccess, []string{"web.ns.svc.cluster.local.\t3600\tIN\tA\t192.0.2.2"}},
		{"1.2.0.192.in-addr.arpa.", dns.TypePTR, dns.RcodeSuccess, []string{"1.2.0.192.in-addr.arpa.\t3600\tIN\tPTR\tdb.example.com."}},
		// Falls through to the cluster zones:
		{"nope.ns.svc.cluster.local.", dns.TypeA, dns.RcodeNameError, nil},
		{"1.0.0.10.in-addr.arpa.", dns.TypePTR, dns.RcodeSuccess, []string{"1.0.0.10.in-addr.arpa.\t5\tIN\tPTR\tweb.ns.svc.cluster.local."}},
	} {
		for range 2 { // the second time, past the fast path's packed answers
			r := serve(t, h, pack(t, query(c.name, c.qtype)), Transport{})
			if got := testutil.Records(r.Answer); r.Rcode != c.rcode || len(got) != len(c.answer) || (len(got) > 0 && got[0] != c.answer[0]) {
				t.Fatalf("%s %s: %s %q, want %s %q", c.name, dns.TypeToString[c.qtype], dns.RcodeToString[r.Rcode], got,
					dns.RcodeToString[c.rcode], c.answer)
			}
		}
	}
}

func TestStubPick(t *testing.T) {
	corp := &Upstream{Deadline: 1}
	eng := &Upstream{Deadline: 2}
	u := &Upstream{Stubs: []Stub{{Zone: "corp.example.", Upstream: corp}, {Zone: "eng.corp.example.", Upstream: eng},
		{Zone: "lab.test.", Upstream: corp}}}
	withDefault := *u
	withDefault.Forwarder = &forward.Forwarder{} // never called: only picked
	for _, c := range []struct {
		u    *Upstream
		name string
		want *Upstream
	}{
		{u, "db.corp.example.", corp},
		{u, "corp.example.", corp},
		{u, "build.eng.corp.example.", eng},          // the longest zone wins
		{u, "eng.corp.example.", eng},                // the zone itself
		{u, "xcorp.example.", nil},                   // a label boundary; no default upstream
		{u, "host.lab.test.", corp},                  // a stub of two zones
		{&withDefault, "www.example.", &withDefault}, // the default last
		{&withDefault, "db.corp.example.", corp},
		{nil, "www.example.", nil},
	} {
		if got := c.u.pick(c.name); got != c.want {
			t.Errorf("%s: picked %v, want %v", c.name, got, c.want)
		}
	}
}

// BenchmarkServeWithPlane is BenchmarkServe with rewrite rules and hosts
// entries that do not apply to the name: the fast path stays allocation
// free.
func BenchmarkServeWithPlane(b *testing.B) {
	h := withRules(b, testHandler(b),
		config.RewriteRule{Field: "name", From: "web.example.com", To: "web.ns.svc.cluster.local"},
		config.RewriteRule{Field: "name", Match: "suffix", From: "corp.example", To: "ns.svc.cluster.local"})
	h.Hosts = hostsFor(b, hosts.Options{Fallthrough: []string{"."}}, "192.0.2.1 db.example.com")
	req, _ := query("web.ns.svc.cluster.local.", dns.TypeA).Pack()
	out := make([]byte, 0, 512)
	b.ReportAllocs()
	for b.Loop() {
		out = h.Serve(req, Transport{}, out[:0])
	}
}

// A forwarded answer has the AA bit its upstream gave, from the cache
// too: set by an authoritative server, clear from a recursive resolver.
func TestForwardedAnswerKeepsUpstreamAA(t *testing.T) {
	h := testHandler(t)
	c := cache.New(cache.Config{Size: 16, SuccessMaxTTL: 30 * time.Second, DenialMaxTTL: 30 * time.Second})
	now := time.Now()
	h.Upstream = &Upstream{Stubs: []Stub{{Zone: ".", Upstream: &Upstream{Cache: c, Now: func() time.Time { return now }}}}}
	for _, aa := range []bool{true, false} {
		name := fmt.Sprintf("aa-%t.example.org.", aa)
		reply := query(name, dns.TypeA)
		reply.Response, reply.Authoritative = true, aa
		rr, err := dns.NewRR(name + " 300 IN A 192.0.2.1")
		if err != nil {
			t.Fatal(err)
		}
		reply.Answer = []dns.RR{rr}
		if !c.Put(cache.Key{Name: name, Type: dns.TypeA, Class: dns.ClassINET}, reply, now) {
			t.Fatalf("%s not cached", name)
		}
		r := serve(t, h, pack(t, query(name, dns.TypeA)), Transport{})
		if r.Rcode != dns.RcodeSuccess || len(r.Answer) != 1 || r.Authoritative != aa {
			t.Errorf("%s: %s AA %v %v, want NOERROR, AA %v and the record", name, dns.RcodeToString[r.Rcode], r.Authoritative, r.Answer, aa)
		}
	}
}
