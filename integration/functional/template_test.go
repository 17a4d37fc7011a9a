package functional

import (
	"fmt"
	"slices"
	"strings"
	"testing"

	"github.com/miekg/dns"

	"github.com/shardns/shardns/integration/harness"
	"github.com/shardns/shardns/internal/testutil"
)

// The examples of CoreDNS 1.15's template README, each served by CoreDNS
// and by `shardns serve --corefile` from the same Corefile (8.8.8.8
// replaced by a local Unbound): every question gets the same rcode,
// flags and sections from both, TTLs included.

// templateExample is one README example and its questions.
type templateExample struct {
	name      string
	corefile  string // the server block's plugins
	questions []sectionQuestion
}

// sectionQuestion is a question and the whole response a client must
// get: the header flags as dig prints them, and every section.
type sectionQuestion struct {
	name     string
	qtype    uint16
	rcode    int
	flags    string // "aa?": either (a forwarded answer)
	answer   []string
	ns       []string
	extra    []string
	edns     bool // ask with EDNS0 (the extended error is compared then)
	extError int  // the extended error code expected, -1 none
}

const soaInvalid = "invalid.\t60\tIN\tSOA\tns.invalid. hostmaster.invalid. 1 60 60 60 60"

var templateExamples = []templateExample{
	{
		name:     "NODATA for AAAA",
		corefile: "template ANY AAAA {\n  rcode NOERROR\n}\nforward . {{upstream}}",
		questions: []sectionQuestion{
			{"www.example.test.", dns.TypeAAAA, dns.RcodeSuccess, "qr aa rd", nil, nil, nil, false, -1},
			{"www.example.test.", dns.TypeA, dns.RcodeSuccess, "qr aa? rd ra", []string{"www.example.test.\t300\tIN\tA\t192.0.2.1"}, nil, nil, false, -1},
		},
	},
	{
		name:     "everything NXDOMAIN",
		corefile: "template ANY ANY {\n  rcode NXDOMAIN\n}",
		questions: []sectionQuestion{
			{"www.example.org.", dns.TypeA, dns.RcodeNameError, "qr aa rd", nil, nil, nil, false, -1},
			{"example.", dns.TypeMX, dns.RcodeNameError, "qr aa rd", nil, nil, nil, false, -1},
		},
	},
	{
		name: ".invalid as NXDOMAIN",
		corefile: "forward . {{upstream}}\ntemplate ANY ANY invalid {\n  rcode NXDOMAIN\n" +
			"  authority \"invalid. 60 {{ .Class }} SOA ns.invalid. hostmaster.invalid. (1 60 60 60 60)\"\n" +
			"  ederror 21 \"Blocked according to RFC2606\"\n}",
		questions: []sectionQuestion{
			{"foo.invalid.", dns.TypeA, dns.RcodeNameError, "qr aa rd", nil, []string{soaInvalid}, nil, true, 21},
			{"invalid.", dns.TypeSOA, dns.RcodeNameError, "qr aa rd", nil, []string{soaInvalid}, nil, true, 21},
			{"www.example.test.", dns.TypeA, dns.RcodeSuccess, "qr aa? rd ra", []string{"www.example.test.\t300\tIN\tA\t192.0.2.1"}, nil, nil, false, -1},
		},
	},
	{
		name: "search domain completions by zone",
		corefile: "forward . {{upstream}}\ntemplate IN ANY example.com.dc1.example.com {\n  rcode NXDOMAIN\n" +
			"  authority \"{{ .Zone }} 60 IN SOA ns.example.com hostmaster.example.com (1 60 60 60 60)\"\n}",
		questions: []sectionQuestion{
			{"something.example.com.dc1.example.com.", dns.TypeA, dns.RcodeNameError, "qr aa rd", nil,
				[]string{"example.com.dc1.example.com.\t60\tIN\tSOA\tns.example.com. hostmaster.example.com. 1 60 60 60 60"}, nil, false, -1},
			{"www.example.com.", dns.TypeA, dns.RcodeSuccess, "qr aa? rd ra", []string{"www.example.com.\t300\tIN\tA\t192.0.2.5"}, nil, nil, false, -1},
		},
	},
	{
		name: "search domain completions by pattern",
		corefile: "forward . {{upstream}}\ntemplate IN ANY example.com {\n  match \"example\\.com\\.(dc1\\.example\\.com\\.)$\"\n  rcode NXDOMAIN\n" +
			"  authority \"{{ index .Match 1 }} 60 IN SOA ns.{{ index .Match 1 }} hostmaster.{{ index .Match 1 }} (1 60 60 60 60)\"\n  fallthrough\n}",
		questions: []sectionQuestion{
			{"something.example.com.dc1.example.com.", dns.TypeA, dns.RcodeNameError, "qr aa rd", nil,
				[]string{"dc1.example.com.\t60\tIN\tSOA\tns.dc1.example.com. hostmaster.dc1.example.com. 1 60 60 60 60"}, nil, false, -1},
			{"www.example.com.", dns.TypeA, dns.RcodeSuccess, "qr aa? rd ra", []string{"www.example.com.\t300\tIN\tA\t192.0.2.5"}, nil, nil, false, -1},
		},
	},
	{
		name: "A and PTR for .example",
		corefile: "forward . {{upstream}}\ntemplate IN A example {\n" +
			"  match (^|[.])ip-(?P<a>[0-9]*)-(?P<b>[0-9]*)-(?P<c>[0-9]*)-(?P<d>[0-9]*)[.]example[.]$\n" +
			"  answer \"{{ .Name }} 60 IN A {{ .Group.a }}.{{ .Group.b }}.{{ .Group.c }}.{{ .Group.d }}\"\n  fallthrough\n}\n" +
			"template IN PTR in-addr.arpa {\n" +
			"  match ^(?P<d>[0-9]*)[.](?P<c>[0-9]*)[.](?P<b>[0-9]*)[.](?P<a>[0-9]*)[.]in-addr[.]arpa[.]$\n" +
			"  answer \"{{ .Name }} 60 IN PTR ip-{{ .Group.a }}-{{ .Group.b }}-{{ .Group.c }}-{{ .Group.d }}.example.\"\n}",
		questions: []sectionQuestion{
			{"ip-10-1-2-3.example.", dns.TypeA, dns.RcodeSuccess, "qr aa rd", []string{"ip-10-1-2-3.example.\t60\tIN\tA\t10.1.2.3"}, nil, nil, false, -1},
			{"www.IP-10-1-2-3.example.", dns.TypeA, dns.RcodeSuccess, "qr aa rd", []string{"www.ip-10-1-2-3.example.\t60\tIN\tA\t10.1.2.3"}, nil, nil, false, -1},
			{"3.2.1.10.in-addr.arpa.", dns.TypePTR, dns.RcodeSuccess, "qr aa rd", []string{"3.2.1.10.in-addr.arpa.\t60\tIN\tPTR\tip-10-1-2-3.example."}, nil, nil, false, -1},
			{"x.2.1.10.in-addr.arpa.", dns.TypePTR, dns.RcodeServerFailure, "qr rd", nil, nil, nil, false, -1},
			{"www.example.", dns.TypeA, dns.RcodeSuccess, "qr aa? rd ra", []string{"www.example.\t300\tIN\tA\t192.0.2.6"}, nil, nil, false, -1},
		},
	},
	{
		name: "hexadecimal with parseInt",
		corefile: "forward . {{upstream}}\ntemplate IN A example {\n" +
			"  match \"^ip0a(?P<b>[a-f0-9]{2})(?P<c>[a-f0-9]{2})(?P<d>[a-f0-9]{2})[.]example[.]$\"\n" +
			"  answer \"{{ .Name }} 60 IN A 10.{{ parseInt .Group.b 16 8 }}.{{ parseInt .Group.c 16 8 }}.{{ parseInt .Group.d 16 8 }}\"\n  fallthrough\n}",
		questions: []sectionQuestion{
			{"ip0a7b7b7b.example.", dns.TypeA, dns.RcodeSuccess, "qr aa rd", []string{"ip0a7b7b7b.example.\t60\tIN\tA\t10.123.123.123"}, nil, nil, false, -1},
		},
	},
	{
		// CoreDNS's README: a name spelling a private address answers it;
		// another falls through to the forwarder.
		name: "vars and conditions",
		corefile: "forward . {{upstream}}\ntemplate IN A example.com {\n" +
			"  match ^(?P<ip>[0-9]{1,3}(-[0-9]{1,3}){3})[.](?P<id>[a-z2-7]{26})[.]example[.]com[.]$\n" +
			"  var ip replace(group('ip'), '-', '.')\n" +
			"  expr \"any(['10.0.0.0/8', '172.16.0.0/12', '192.168.0.0/16', '169.254.0.0/16'], incidr(ip, #))\"\n" +
			"  answer \"{{ .Name }} 60 IN A {{ .Var.ip }}\"\n  fallthrough\n}",
		questions: []sectionQuestion{
			{"10-1-2-3.abcdefghijklmnopqrstuvwxyz.example.com.", dns.TypeA, dns.RcodeSuccess, "qr aa rd",
				[]string{"10-1-2-3.abcdefghijklmnopqrstuvwxyz.example.com.\t60\tIN\tA\t10.1.2.3"}, nil, nil, false, -1},
			{"8-8-8-8.abcdefghijklmnopqrstuvwxyz.example.com.", dns.TypeA, dns.RcodeSuccess, "qr aa? rd ra",
				[]string{"8-8-8-8.abcdefghijklmnopqrstuvwxyz.example.com.\t300\tIN\tA\t192.0.2.88"}, nil, nil, false, -1},
		},
	},
	{
		name: "several patterns",
		corefile: "forward . {{upstream}}\ntemplate IN A example {\n" +
			"  match \"^ip-(?P<a>10)-(?P<b>[0-9]*)-(?P<c>[0-9]*)-(?P<d>[0-9]*)[.]dc[.]example[.]$\"\n" +
			"  match \"^(?P<a>[0-9]*)[.](?P<b>[0-9]*)[.](?P<c>[0-9]*)[.](?P<d>[0-9]*)[.]ext[.]example[.]$\"\n" +
			"  answer \"{{ .Name }} 60 IN A {{ .Group.a}}.{{ .Group.b }}.{{ .Group.c }}.{{ .Group.d }}\"\n  fallthrough\n}",
		questions: []sectionQuestion{
			{"ip-10-0-0-1.dc.example.", dns.TypeA, dns.RcodeSuccess, "qr aa rd", []string{"ip-10-0-0-1.dc.example.\t60\tIN\tA\t10.0.0.1"}, nil, nil, false, -1},
			{"192.0.2.7.ext.example.", dns.TypeA, dns.RcodeSuccess, "qr aa rd", []string{"192.0.2.7.ext.example.\t60\tIN\tA\t192.0.2.7"}, nil, nil, false, -1},
		},
	},
	{
		name: "A and MX with authoritative nameservers",
		corefile: "forward . {{upstream}}\ntemplate IN A example {\n" +
			"  match ^ip-10-(?P<b>[0-9]*)-(?P<c>[0-9]*)-(?P<d>[0-9]*)[.]example[.]$\n" +
			"  answer \"{{ .Name }} 60 IN A 10.{{ .Group.b }}.{{ .Group.c }}.{{ .Group.d }}\"\n" +
			"  authority  \"example. 60 IN NS ns0.example.\"\n  authority  \"example. 60 IN NS ns1.example.\"\n" +
			"  additional \"ns0.example. 60 IN A 203.0.113.8\"\n  additional \"ns1.example. 60 IN A 198.51.100.8\"\n  fallthrough\n}\n" +
			"template IN MX example {\n  match ^ip-10-(?P<b>[0-9]*)-(?P<c>[0-9]*)-(?P<d>[0-9]*)[.]example[.]$\n" +
			"  answer \"{{ .Name }} 60 IN MX 10 {{ .Name }}\"\n" +
			"  additional \"{{ .Name }} 60 IN A 10.{{ .Group.b }}.{{ .Group.c }}.{{ .Group.d }}\"\n" +
			"  authority  \"example. 60 IN NS ns0.example.\"\n  authority  \"example. 60 IN NS ns1.example.\"\n" +
			"  additional \"ns0.example. 60 IN A 203.0.113.8\"\n  additional \"ns1.example. 60 IN A 198.51.100.8\"\n  fallthrough\n}",
		questions: []sectionQuestion{
			{"ip-10-1-2-3.example.", dns.TypeA, dns.RcodeSuccess, "qr aa rd", []string{"ip-10-1-2-3.example.\t60\tIN\tA\t10.1.2.3"},
				[]string{"example.\t60\tIN\tNS\tns0.example.", "example.\t60\tIN\tNS\tns1.example."},
				[]string{"ns0.example.\t60\tIN\tA\t203.0.113.8", "ns1.example.\t60\tIN\tA\t198.51.100.8"}, true, -1},
			{"ip-10-1-2-3.example.", dns.TypeMX, dns.RcodeSuccess, "qr aa rd", []string{"ip-10-1-2-3.example.\t60\tIN\tMX\t10 ip-10-1-2-3.example."},
				[]string{"example.\t60\tIN\tNS\tns0.example.", "example.\t60\tIN\tNS\tns1.example."},
				[]string{"ip-10-1-2-3.example.\t60\tIN\tA\t10.1.2.3", "ns0.example.\t60\tIN\tA\t203.0.113.8", "ns1.example.\t60\tIN\tA\t198.51.100.8"}, false, -1},
		},
	},
	{
		name:     "fabricated CNAME",
		corefile: "template IN ANY foogle.com {\n  match \"^foogle\\.com\\.$\"\n  answer \"foogle.com 60 IN CNAME google.com\"\n}\nforward . {{upstream}}",
		questions: []sectionQuestion{
			{"foogle.com.", dns.TypeA, dns.RcodeSuccess, "qr aa rd",
				[]string{"foogle.com.\t60\tIN\tCNAME\tgoogle.com.", "google.com.\t300\tIN\tA\t192.0.2.99"}, nil, nil, false, -1},
			{"foogle.com.", dns.TypeMX, dns.RcodeSuccess, "qr aa rd", []string{"foogle.com.\t60\tIN\tCNAME\tgoogle.com."}, nil, nil, false, -1},
			{"www.foogle.com.", dns.TypeA, dns.RcodeServerFailure, "qr rd", nil, nil, nil, false, -1},
		},
	},
}

func TestTemplateBesideCoreDNS(t *testing.T) {
	upstream := harness.StartUnbound(t, "www.example.test. 300 IN A 192.0.2.1", "www.example.com. 300 IN A 192.0.2.5",
		"www.example. 300 IN A 192.0.2.6", "google.com. 300 IN A 192.0.2.99",
		"8-8-8-8.abcdefghijklmnopqrstuvwxyz.example.com. 300 IN A 192.0.2.88")
	for _, ex := range templateExamples {
		t.Run(ex.name, func(t *testing.T) {
			block := "    " + strings.ReplaceAll(ex.corefile, "\n", "\n    ")
			tmpl := ".:{{dns}} {\n    bind 127.0.0.1\n" + block + "\n}\n"
			vars := map[string]string{"upstream": upstream.Addr}
			run := harness.RenderCorefile(t, tmpl, vars)
			shardns := harness.Start(t, harness.Options{Args: []string{"--corefile", harness.WriteFile(t, "Corefile", []byte(run.Text))}}).Addr
			coreRun := harness.RenderCorefile(t, tmpl, vars) // the same Corefile on a port of its own
			// Every answer will do: some examples answer no name with NOERROR.
			coredns := harness.StartCoreDNS(t, harness.CoreDNSOptions{Dir: t.TempDir(), Corefile: coreRun.Text, Addr: coreRun.Addrs["dns"], Ready: func() error {
				_, err := testutil.Exchange(coreRun.Addrs["dns"], "udp", ex.questions[0].name, ex.questions[0].qtype)
				return err
			}})

			for _, q := range ex.questions {
				harness.AskBothWith(t, shardns, coredns, func(addr, proto string) error { return sectionsMatch(addr, proto, q) })
			}
		})
	}
}

// sectionsMatch asks addr q and compares the whole response.
func sectionsMatch(addr, proto string, q sectionQuestion) error {
	m := new(dns.Msg)
	m.SetQuestion(q.name, q.qtype)
	if q.edns {
		m.SetEdns0(1232, false)
	}
	r, err := testutil.ExchangeMsg(addr, proto, m)
	if err != nil {
		return err
	}
	gotFlags := flags(r)
	if strings.Contains(q.flags, "aa?") {
		// A forwarded answer: CoreDNS passes the upstream's AA bit on,
		// shardns's forwarder clears it. Not the templates' concern.
		gotFlags = strings.Replace(strings.Replace(gotFlags, " aa", "", 1), "qr", "qr aa?", 1)
	}
	got := fmt.Sprintf("%s %s answer %q authority %q additional %q ede %d", dns.RcodeToString[r.Rcode], gotFlags,
		testutil.Records(r.Answer), testutil.Records(r.Ns), testutil.Records(withoutOPT(r.Extra)), extendedError(r))
	want := fmt.Sprintf("%s %s answer %q authority %q additional %q ede %d", dns.RcodeToString[q.rcode], q.flags,
		sorted(q.answer), sorted(q.ns), sorted(q.extra), q.extError)
	if got != want {
		return fmt.Errorf("%s %s from %s over %s:\n got %s\nwant %s", q.name, dns.TypeToString[q.qtype], addr, proto, got, want)
	}
	if q.edns != (r.IsEdns0() != nil) {
		return fmt.Errorf("%s %s from %s over %s: OPT %v in the answer to a request with EDNS0 %v", q.name, dns.TypeToString[q.qtype], addr, proto, r.IsEdns0(), q.edns)
	}
	return nil
}

// flags are the header flags of r as dig prints them.
func flags(r *dns.Msg) string {
	var out []string
	for _, f := range []struct {
		on   bool
		name string
	}{{r.Response, "qr"}, {r.Authoritative, "aa"}, {r.Truncated, "tc"}, {r.RecursionDesired, "rd"},
		{r.RecursionAvailable, "ra"}, {r.AuthenticatedData, "ad"}, {r.CheckingDisabled, "cd"}} {
		if f.on {
			out = append(out, f.name)
		}
	}
	return strings.Join(out, " ")
}

func withoutOPT(rrs []dns.RR) []dns.RR {
	var out []dns.RR
	for _, rr := range rrs {
		if rr.Header().Rrtype != dns.TypeOPT {
			out = append(out, rr)
		}
	}
	return out
}

// extendedError is the extended DNS error code of r, -1 without one.
func extendedError(r *dns.Msg) int {
	if opt := r.IsEdns0(); opt != nil {
		for _, o := range opt.Option {
			if e, ok := o.(*dns.EDNS0_EDE); ok {
				return int(e.InfoCode)
			}
		}
	}
	return -1
}

func sorted(s []string) []string {
	s = slices.Clone(s)
	slices.Sort(s)
	if s == nil {
		s = []string{}
	}
	return s
}
