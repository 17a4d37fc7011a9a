package query

import (
	"bytes"
	"log/slog"
	"net/netip"
	"regexp"
	"strings"
	"testing"

	"github.com/miekg/dns"
)

// logLines serves each query through h with rule and returns the
// messages of the query log, one per logged query.
func logLines(t *testing.T, rule *QueryLogRule, tr Transport, reqs ...*dns.Msg) []string {
	t.Helper()
	var buf bytes.Buffer
	h := testHandler(t)
	h.QueryLog = slog.New(slog.NewTextHandler(&buf, &slog.HandlerOptions{
		ReplaceAttr: func(_ []string, a slog.Attr) slog.Attr {
			if a.Key == slog.TimeKey || a.Key == slog.LevelKey {
				return slog.Attr{}
			}
			return a
		}}))
	h.QueryLogRule = rule
	for _, m := range reqs {
		serve(t, h, pack(t, m), tr)
	}
	var out []string
	for l := range strings.Lines(buf.String()) {
		l = strings.TrimPrefix(strings.TrimSpace(l), "msg=")
		if msg, ok := strings.CutPrefix(l, `"`); ok {
			l = strings.TrimSuffix(msg, `"`)
		}
		out = append(out, l)
	}
	return out
}

func TestQueryLogClassesAndNames(t *testing.T) {
	success := query("web.ns.svc.cluster.local.", dns.TypeA)
	nxdomain := query("Nope.ns.svc.cluster.local.", dns.TypeA)
	nodata := query("web.ns.svc.cluster.local.", dns.TypeMX)
	refused := query("version.bind.", dns.TypeTXT)
	refused.Question[0].Qclass = dns.ClassCHAOS
	all := []*dns.Msg{success, nxdomain, nodata, refused}
	const format = "{name} {type} {rcode}"
	for _, c := range []struct {
		desc    string
		names   []string
		classes []string
		want    []string
	}{
		{"every query", nil, nil, []string{"web.ns.svc.cluster.local. A NOERROR", "nope.ns.svc.cluster.local. A NXDOMAIN",
			"web.ns.svc.cluster.local. MX NOERROR", "version.bind. TXT REFUSED"}},
		{"OpenShift's class denial error", []string{"."}, []string{"denial", "error"},
			[]string{"nope.ns.svc.cluster.local. A NXDOMAIN", "web.ns.svc.cluster.local. MX NOERROR", "version.bind. TXT REFUSED"}},
		{"success only", nil, []string{"success"}, []string{"web.ns.svc.cluster.local. A NOERROR"}},
		{"error only", nil, []string{"error"}, []string{"version.bind. TXT REFUSED"}},
		{"all mixed with a class is all", nil, []string{"denial", "all"}, []string{"web.ns.svc.cluster.local. A NOERROR",
			"nope.ns.svc.cluster.local. A NXDOMAIN", "web.ns.svc.cluster.local. MX NOERROR", "version.bind. TXT REFUSED"}},
		{"names under a zone", []string{"ns.svc.cluster.local."}, []string{"denial"},
			[]string{"nope.ns.svc.cluster.local. A NXDOMAIN", "web.ns.svc.cluster.local. MX NOERROR"}},
		{"a zone on a label boundary only", []string{"s.svc.cluster.local.", "bind."}, nil, []string{"version.bind. TXT REFUSED"}},
	} {
		t.Run(c.desc, func(t *testing.T) {
			got := logLines(t, NewQueryLogRule(c.names, c.classes, format), Transport{}, all...)
			if strings.Join(got, "\n") != strings.Join(c.want, "\n") {
				t.Errorf("logged\n%s\nwant\n%s", strings.Join(got, "\n"), strings.Join(c.want, "\n"))
			}
		})
	}
}

func TestQueryLogFormat(t *testing.T) {
	do := query("Web.ns.svc.cluster.local.", dns.TypeA)
	do.SetEdns0(1232, true)
	do.RecursionDesired = true
	udp6 := Transport{IPv6: true, Client: netip.MustParseAddrPort("[fd00::7]:5300"), Server: netip.MustParseAddrPort("[::1]:53")}
	tcp4 := Transport{TCP: true, Client: netip.MustParseAddrPort("10.1.2.3:40000"), Server: netip.MustParseAddrPort("127.0.0.1:53")}
	for _, c := range []struct {
		desc   string
		format string
		tr     Transport
		req    *dns.Msg
		want   string // a regular expression for the whole message
	}{
		{"CoreDNS's common format", "{common}", udp6, do,
			`^\[fd00::7\]:5300 - 4242 \\"A IN web\.ns\.svc\.cluster\.local\. udp 53 true 1232\\" NOERROR qr,aa,rd 69 [0-9.e-]+s$`},
		{"combined, over TCP without EDNS0", "{combined}", tcp4, query("nope.ns.svc.cluster.local.", dns.TypeAAAA),
			`^10\.1\.2\.3:40000 - 4242 \\"AAAA IN nope\.ns\.svc\.cluster\.local\. tcp 43 false 65535\\" NXDOMAIN qr,aa,rd 97 [0-9.e-]+s \\"0\\"$`},
		{"local address, unknown and metadata placeholders", "{local} {x} {/log/class} {{type}} }", udp6, do,
			`^\[::1\] \{x\} - \{A\} }$`},
	} {
		t.Run(c.desc, func(t *testing.T) {
			got := logLines(t, NewQueryLogRule(nil, nil, c.format), c.tr, c.req)
			if len(got) != 1 || !regexp.MustCompile(c.want).MatchString(got[0]) {
				t.Errorf("logged %q, want %s", got, c.want)
			}
		})
	}
}

func TestQueryLogDefaultFields(t *testing.T) {
	got := logLines(t, nil, Transport{Client: netip.MustParseAddrPort("10.1.2.3:40000")}, query("Web.ns.svc.cluster.local.", dns.TypeA))
	if len(got) != 1 || !strings.HasPrefix(got[0], `query client=10.1.2.3:40000 id=4242 type=A name=Web.ns.svc.cluster.local. proto=udp size=42 rcode=NOERROR rsize=58 duration=`) {
		t.Fatalf("logged %q", got)
	}
}
