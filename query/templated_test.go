package query

import (
	"fmt"
	"log/slog"
	"maps"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/miekg/dns"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/shardns/shardns/config"
	"github.com/shardns/shardns/internal/testutil"
	"github.com/shardns/shardns/metrics"
	"github.com/shardns/shardns/template"
)

func withTemplates(t testing.TB, h *Handler, cfgs ...config.Template) *Handler {
	ts, err := template.Compile(cfgs)
	if err != nil {
		t.Fatal(err)
	}
	h.Template = ts
	return h
}

// templatedHandler has CoreDNS's most common template (NODATA for AAAA),
// one answering names of example. with an address, one making a CNAME
// into the cluster zone, and one for .invalid with an extended error.
func templatedHandler(t testing.TB) *Handler {
	return withTemplates(t, testHandler(t),
		config.Template{Class: "ANY", Type: "AAAA", Rcode: "NOERROR"},
		config.Template{Type: "A", Zones: []string{"example"},
			Match:  []string{`^ip-(?P<a>[0-9]+)-(?P<b>[0-9]+)[.]example[.]$`},
			Answer: []string{"{{ .Name }} 60 IN A 10.0.{{ .Group.a }}.{{ .Group.b }}"}},
		config.Template{Type: "ANY", Zones: []string{"alias.test"},
			Answer: []string{"{{ .Name }} 30 IN CNAME web.ns.svc.cluster.local."}},
		config.Template{Class: "ANY", Type: "ANY", Zones: []string{"invalid"}, Rcode: "NXDOMAIN",
			Authority:     []string{"invalid. 60 {{ .Class }} SOA ns.invalid. hostmaster.invalid. 1 60 60 60 60"},
			ExtendedError: &config.TemplateExtendedError{Code: 21, Text: "Blocked according to RFC2606"}},
	)
}

func TestTemplateAnswers(t *testing.T) {
	h := templatedHandler(t)
	for _, c := range []struct {
		name   string
		qtype  uint16
		rcode  int
		aa     bool
		answer []string
		ns     []string // answer and ns sorted, as testutil.Records gives them
	}{
		{"web.ns.svc.cluster.local.", dns.TypeAAAA, dns.RcodeSuccess, true, nil, nil}, // NODATA, without the zone's SOA
		{"web.ns.svc.cluster.local.", dns.TypeA, dns.RcodeSuccess, true, []string{"web.ns.svc.cluster.local.\t5\tIN\tA\t10.0.0.1"}, nil},
		{"ip-1-2.example.", dns.TypeA, dns.RcodeSuccess, true, []string{"ip-1-2.example.\t60\tIN\tA\t10.0.1.2"}, nil},
		{"www.example.", dns.TypeA, dns.RcodeServerFailure, false, nil, nil}, // no pattern matches, no fallthrough
		{"www.alias.test.", dns.TypeA, dns.RcodeSuccess, true,
			[]string{"web.ns.svc.cluster.local.\t5\tIN\tA\t10.0.0.1", "www.alias.test.\t30\tIN\tCNAME\tweb.ns.svc.cluster.local."}, nil},
		{"www.alias.test.", dns.TypeMX, dns.RcodeSuccess, true, []string{"www.alias.test.\t30\tIN\tCNAME\tweb.ns.svc.cluster.local."}, nil},
		{"x.invalid.", dns.TypeA, dns.RcodeNameError, true, nil, []string{"invalid.\t60\tIN\tSOA\tns.invalid. hostmaster.invalid. 1 60 60 60 60"}},
	} {
		for _, tr := range []struct {
			name string
			t    Transport
		}{{"in place", Transport{}}, {"late", Transport{Late: make(lateAnswers, 1)}}} {
			r := serveMaybeLate(t, h, pack(t, query(c.name, c.qtype)), tr.t)
			if r.Rcode != c.rcode || r.Authoritative != c.aa || r.RecursionAvailable ||
				!slices.Equal(testutil.Records(r.Answer), c.answer) || !slices.Equal(testutil.Records(r.Ns), c.ns) {
				t.Errorf("%s %s (%s): %s aa=%v %q %q, want %s aa=%v %q %q", c.name, dns.TypeToString[c.qtype], tr.name,
					dns.RcodeToString[r.Rcode], r.Authoritative, testutil.Records(r.Answer), testutil.Records(r.Ns),
					dns.RcodeToString[c.rcode], c.aa, c.answer, c.ns)
			}
		}
	}
}

// serveMaybeLate serves req and waits for the late answer when there is
// one.
func serveMaybeLate(t *testing.T, h *Handler, req []byte, tr Transport) *dns.Msg {
	t.Helper()
	out := h.Serve(req, tr, nil)
	if out == nil {
		if tr.Late == nil {
			t.Fatal("no answer")
		}
		select {
		case out = <-tr.Late.(lateAnswers):
		case <-time.After(5 * time.Second):
			t.Fatal("no late answer")
		}
	}
	r := new(dns.Msg)
	if err := r.Unpack(out); err != nil {
		t.Fatal(err)
	}
	return r
}

func TestTemplateExtendedError(t *testing.T) {
	h := templatedHandler(t)
	m := query("x.invalid.", dns.TypeA)
	m.SetEdns0(1232, false)
	r := serve(t, h, pack(t, m), Transport{})
	opt := r.IsEdns0()
	if opt == nil || len(opt.Option) != 1 {
		t.Fatalf("OPT %v, want one extended error", opt)
	}
	if ede, ok := opt.Option[0].(*dns.EDNS0_EDE); !ok || ede.InfoCode != 21 || ede.ExtraText != "Blocked according to RFC2606" {
		t.Fatalf("option %v", opt.Option[0])
	}
	// A client without EDNS0 gets no OPT record at all (RFC 6891 §7).
	if r := serve(t, h, pack(t, query("x.invalid.", dns.TypeA)), Transport{}); r.IsEdns0() != nil {
		t.Fatalf("OPT in an answer to a request without one: %v", r)
	}
}

func TestTemplateAnswersOtherClasses(t *testing.T) {
	h := templatedHandler(t)
	r := serve(t, h, pack(t, chaosQuery("x.invalid.", dns.TypeTXT)), Transport{})
	if r.Rcode != dns.RcodeNameError || len(r.Ns) != 1 || r.Ns[0].Header().Class != dns.ClassCHAOS {
		t.Fatalf("CH question for .invalid: %v", r)
	}
	if r := serve(t, h, pack(t, chaosQuery("version.bind.", dns.TypeTXT)), Transport{}); r.Rcode != dns.RcodeRefused {
		t.Fatalf("CH question no template answers: %s, want REFUSED", dns.RcodeToString[r.Rcode])
	}
}

func TestTemplateAfterRewrite(t *testing.T) {
	h := withRules(t, templatedHandler(t), config.RewriteRule{Field: "name", From: "short.example", To: "ip-7-8.example"})
	r := serve(t, h, pack(t, query("short.example.", dns.TypeA)), Transport{})
	if got := testutil.Records(r.Answer); r.Question[0].Name != "short.example." ||
		!slices.Equal(got, []string{"short.example.\t60\tIN\tA\t10.0.7.8"}) {
		t.Fatalf("rewritten then templated: %v", r)
	}
}

// A CNAME to a name the same template answers with a CNAME again stops
// being followed instead of going round forever.
func TestTemplateChaseEnds(t *testing.T) {
	h := withTemplates(t, testHandler(t), config.Template{Type: "A", Zones: []string{"loop.test"},
		Answer: []string{"{{ .Name }} 5 IN CNAME x.{{ .Name }}"}})
	r := serve(t, h, pack(t, query("loop.test.", dns.TypeA)), Transport{})
	if r.Rcode != dns.RcodeSuccess || len(r.Answer) != maxChaseDepth+1 {
		t.Fatalf("got %s with %d records", dns.RcodeToString[r.Rcode], len(r.Answer))
	}
}

// The fast path keeps answering names no template decides, and leaves
// the others to the templates, also once their answer was packed.
func TestFastPathLeavesTemplatedNames(t *testing.T) {
	h := testHandler(t)
	req := pack(t, query("web.ns.svc.cluster.local.", dns.TypeAAAA))
	if r := serve(t, h, req, Transport{}); len(r.Ns) != 1 {
		t.Fatalf("the zone's NODATA carries its SOA: %v", r)
	}
	withTemplates(t, h, config.Template{Type: "AAAA"})
	for range 2 {
		if r := serve(t, h, req, Transport{}); len(r.Ns) != 0 || r.Rcode != dns.RcodeSuccess {
			t.Fatalf("templated NODATA has no SOA: %v", r)
		}
	}
	a := pack(t, query("web.ns.svc.cluster.local.", dns.TypeA))
	serve(t, h, a, Transport{})
	if n := testing.AllocsPerRun(100, func() { h.Serve(a, Transport{}, make([]byte, 0, 512)) }); n > 1 && !testutil.RaceEnabled {
		t.Fatalf("a name no template decides allocates %v times on the fast path", n)
	}
}

// BenchmarkServeWithTemplate is BenchmarkServe with `template ANY AAAA
// { rcode NOERROR }` configured: an A question stays on the fast path.
func BenchmarkServeWithTemplate(b *testing.B) {
	h := withTemplates(b, testHandler(b), config.Template{Class: "ANY", Type: "AAAA", Rcode: "NOERROR"})
	req, _ := query("web.ns.svc.cluster.local.", dns.TypeA).Pack()
	out := make([]byte, 0, 512)
	b.ReportAllocs()
	for b.Loop() {
		out = h.Serve(req, Transport{}, out[:0])
	}
}

// BenchmarkServeTemplated answers the AAAA question that template.
func BenchmarkServeTemplated(b *testing.B) {
	h := withTemplates(b, testHandler(b), config.Template{Class: "ANY", Type: "AAAA", Rcode: "NOERROR"})
	req, _ := query("web.ns.svc.cluster.local.", dns.TypeAAAA).Pack()
	out := make([]byte, 0, 512)
	b.ReportAllocs()
	for b.Loop() {
		out = h.Serve(req, Transport{}, out[:0])
	}
}

// A template that makes no record is answered on the fast path, with the
// bytes the full path packs.
func TestFastPathBareTemplate(t *testing.T) {
	cfgs := []config.Template{{Class: "ANY", Type: "AAAA", Rcode: "NOERROR"},
		{Type: "A", Zones: []string{"invalid"}, Rcode: "NXDOMAIN"}}
	fast := withTemplates(t, testHandler(t), cfgs...)
	full := withTemplates(t, testHandler(t), cfgs...)
	full.QueryLog = slog.New(slog.DiscardHandler) // a query log turns the fast path off
	for _, c := range []struct {
		name    string
		qtype   uint16
		edns    bool
		rd, cd  bool
		comment string
	}{
		{"Web.ns.svc.cluster.local.", dns.TypeAAAA, false, true, false, "NODATA, case kept"},
		{"www.example.org.", dns.TypeAAAA, true, false, true, "with EDNS0 and CD"},
		{"x.invalid.", dns.TypeA, true, true, false, "NXDOMAIN"},
	} {
		m := query(c.name, c.qtype)
		m.RecursionDesired, m.CheckingDisabled = c.rd, c.cd
		if c.edns {
			m.SetEdns0(1232, false)
		}
		req := pack(t, m)
		if !fast.Template.Claims(lower(c.name), dns.ClassINET, c.qtype) {
			t.Fatalf("%s: not templated", c.comment)
		}
		got, want := fast.Serve(req, Transport{}, nil), full.Serve(req, Transport{}, nil)
		if string(got) != string(want) {
			t.Errorf("%s: fast path\n%x\nfull path\n%x", c.comment, got, want)
		}
	}
	req := pack(t, query("www.example.org.", dns.TypeAAAA))
	if n := testing.AllocsPerRun(100, func() { fast.Serve(req, Transport{}, make([]byte, 0, 512)) }); n > 1 && !testutil.RaceEnabled {
		t.Fatalf("a bare templated answer allocates %v times", n)
	}
}

// The templates' metrics count as CoreDNS's: a question a template
// matched, on the fast path too, by the template's zone and the
// question's class and type; a record template that did not execute, or
// made no valid record, by section and template. A name no pattern
// matches fails without a match.
func TestTemplateMetrics(t *testing.T) {
	h := withTemplates(t, testHandler(t),
		config.Template{Class: "ANY", Type: "AAAA", Rcode: "NOERROR"},
		config.Template{Type: "A", Zones: []string{"example"},
			Match:  []string{`^ip-(?P<a>[0-9]+)-(?P<b>[0-9]+)[.]example[.]$`},
			Answer: []string{"{{ .Name }} 60 IN A 10.0.{{ .Group.a }}.{{ .Group.b }}"}},
		config.Template{Type: "A", Zones: []string{"broken"}, Answer: []string{"{{ .Name }} 60 IN A not-an-address"}},
		config.Template{Type: "A", Zones: []string{"exec"}, Answer: []string{"{{ .Nope }} 60 IN A 10.0.0.1"}})
	reg, m := metrics.New("test")
	h.Metrics, h.Server = m, "dns://:53"
	for _, q := range []struct {
		name  string
		qtype uint16
	}{
		{"web.ns.svc.cluster.local.", dns.TypeAAAA}, {"web.ns.svc.cluster.local.", dns.TypeAAAA},
		{"web.ns.svc.cluster.local.", dns.TypeA}, {"ip-1-2.example.", dns.TypeA}, {"www.example.", dns.TypeA},
		{"x.broken.", dns.TypeA}, {"x.exec.", dns.TypeA},
	} {
		serve(t, h, pack(t, query(q.name, q.qtype)), Transport{})
	}
	got := counters(t, reg, "shardns_template_")
	want := map[string]float64{
		`shardns_template_matches_total{class="IN",server="dns://:53",type="AAAA",view="",zone="."}`:     2,
		`shardns_template_matches_total{class="IN",server="dns://:53",type="A",view="",zone="example."}`: 1,
		`shardns_template_matches_total{class="IN",server="dns://:53",type="A",view="",zone="broken."}`:  1,
		`shardns_template_matches_total{class="IN",server="dns://:53",type="A",view="",zone="exec."}`:    1,
		`shardns_template_rr_failures_total{class="IN",section="answer",server="dns://:53",` +
			`template="{{.Name}} 60 IN A not-an-address",type="A",view="",zone="broken."}`: 1,
		`shardns_template_template_failures_total{class="IN",section="answer",server="dns://:53",` +
			`template="{{.Nope}} 60 IN A 10.0.0.1",type="A",view="",zone="exec."}`: 1,
	}
	if !maps.Equal(got, want) {
		t.Fatalf("template metrics:\n%v\nwant\n%v", got, want)
	}
	a := pack(t, query("web.ns.svc.cluster.local.", dns.TypeAAAA))
	if n := testing.AllocsPerRun(100, func() { h.Serve(a, Transport{}, make([]byte, 0, 512)) }); n > 1 && !testutil.RaceEnabled {
		t.Fatalf("a bare template's answer, counted, allocates %v times on the fast path", n)
	}
}

// counters are the counters of reg whose names start with prefix, by
// name and labels.
func counters(t *testing.T, reg *prometheus.Registry, prefix string) map[string]float64 {
	t.Helper()
	families, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]float64{}
	for _, f := range families {
		if !strings.HasPrefix(f.GetName(), prefix) {
			continue
		}
		for _, s := range f.GetMetric() {
			var labels []string
			for _, l := range s.GetLabel() {
				labels = append(labels, fmt.Sprintf("%s=%q", l.GetName(), l.GetValue()))
			}
			got[f.GetName()+"{"+strings.Join(labels, ",")+"}"] = s.GetCounter().GetValue()
		}
	}
	return got
}
