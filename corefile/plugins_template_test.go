package corefile

import (
	"reflect"
	"strings"
	"testing"

	"github.com/shardns/shardns/config"
)

// The template examples of CoreDNS's README convert option by option,
// and the YAML they make passes `shardns check`.
func TestConvertTemplate(t *testing.T) {
	cases := []struct {
		name string
		src  string
		want []config.Template
		// findings that must be reported
		findings []string
	}{
		{
			name: "NODATA for AAAA",
			src:  ".:53 {\n  template ANY AAAA {\n    rcode NOERROR\n  }\n}\n",
			want: []config.Template{{Class: "ANY", Type: "AAAA", Rcode: "NOERROR"}},
		},
		{
			name: "zone of the server block, extended error",
			src: "invalid:53 {\n  template ANY ANY {\n    rcode NXDOMAIN\n" +
				"    authority \"invalid. 60 {{ .Class }} SOA ns.invalid. hostmaster.invalid. (1 60 60 60 60)\"\n" +
				"    ederror 21 \"Blocked according to RFC2606\"\n  }\n}\n",
			want: []config.Template{{Class: "ANY", Type: "ANY", Zones: []string{"invalid"}, Rcode: "NXDOMAIN",
				Authority:     []string{"invalid. 60 {{ .Class }} SOA ns.invalid. hostmaster.invalid. (1 60 60 60 60)"},
				ExtendedError: &config.TemplateExtendedError{Code: 21, Text: "Blocked according to RFC2606"}}},
		},
		{
			name: "two patterns, records, fallthrough and upstream",
			src: ".:53 {\n  template IN A example in-addr.arpa {\n" +
				"    match \"^ip-(?P<a>10)-(?P<b>[0-9]*)[.]dc[.]example[.]$\"\n" +
				"    match ^(?P<a>[0-9]*)[.](?P<b>[0-9]*)[.]ext[.]example[.]$\n" +
				"    answer \"{{ .Name }} 60 IN A {{ .Group.a }}.0.0.{{ .Group.b }}\"\n" +
				"    additional \"ns0.example. 60 IN A 203.0.113.8\" \"ns1.example. 60 IN A 198.51.100.8\"\n" +
				"    authority \"example. 60 IN NS ns0.example.\"\n" +
				"    fallthrough in-addr.arpa\n    upstream\n  }\n" +
				"  template IN MX example {\n    answer \"{{ .Name }} 60 IN MX 10 {{ .Name }}\"\n    fallthrough\n  }\n}\n",
			want: []config.Template{
				{Class: "IN", Type: "A", Zones: []string{"example", "in-addr.arpa"},
					Match:      []string{`^ip-(?P<a>10)-(?P<b>[0-9]*)[.]dc[.]example[.]$`, `^(?P<a>[0-9]*)[.](?P<b>[0-9]*)[.]ext[.]example[.]$`},
					Answer:     []string{"{{ .Name }} 60 IN A {{ .Group.a }}.0.0.{{ .Group.b }}"},
					Additional: []string{"ns0.example. 60 IN A 203.0.113.8", "ns1.example. 60 IN A 198.51.100.8"},
					Authority:  []string{"example. 60 IN NS ns0.example."}, Fallthrough: []string{"in-addr.arpa"}},
				{Class: "IN", Type: "MX", Zones: []string{"example"}, Answer: []string{"{{ .Name }} 60 IN MX 10 {{ .Name }}"},
					Fallthrough: []string{"."}},
			},
			findings: []string{"Corefile:9: note: template upstream: CNAME targets are looked up through shardns itself, as CoreDNS does whether or not it is written"},
		},
		{
			name:     "bad class",
			src:      ".:53 {\n  template INX A {\n  }\n}\n",
			findings: []string{`Corefile:2: template INX A: class: "INX" is not a DNS class`},
		},
		{
			name:     "missing type",
			src:      ".:53 {\n  template IN\n}\n",
			findings: []string{"Corefile:2: template needs a class and a type"},
		},
		{
			name:     "bad regex names its line",
			src:      ".:53 {\n  template IN A {\n    match ok\n    match (\n  }\n}\n",
			findings: []string{"Corefile:4: template match: match[0]: error parsing regexp: missing closing ): `(`"},
		},
		{
			name:     "template that does not parse names its line",
			src:      ".:53 {\n  template IN A {\n    answer \"{{ .Name 60 IN A 10.0.0.1\"\n  }\n}\n",
			findings: []string{`Corefile:3: template answer: answer[0]: template: answer:1: function "IN" not defined`},
		},
		{
			name:     "bad rcode",
			src:      ".:53 {\n  template IN A {\n    rcode MAYBE\n  }\n}\n",
			findings: []string{`Corefile:3: template rcode: rcode: "MAYBE" is not a response code (NOERROR, NXDOMAIN, SERVFAIL, REFUSED, ...)`},
		},
		{
			name: "a var and a condition",
			src:  ".:53 {\n  template IN A example.com {\n    var ip replace(group('ip'), '-', '.')\n    expr \"ip != ''\"\n  }\n}\n",
			want: []config.Template{{Class: "IN", Type: "A", Zones: []string{"example.com"},
				Vars: []config.TemplateVar{{Name: "ip", Expr: "replace(group('ip'), '-', '.')"}}, Expr: []string{"ip != ''"}}},
		},
		{
			name: "a var that shadows a function, a condition that does not compile",
			src:  ".:53 {\n  template IN A {\n    var len 1\n    expr incidr(\n  }\n}\n",
			findings: []string{
				`Corefile:3: template var: vars[0].name: variable "len" is the name of a function or a word of the expression language`,
				`Corefile:4: template expr: expr[0]: expression "incidr(": unexpected token EOF (1:7)`,
			},
		},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			res := convert(t, c.src)
			for _, w := range c.findings {
				if !hasFinding(res, w) {
					t.Errorf("missing finding %s\ngot:\n%s", w, strings.Join(findings(res), "\n"))
				}
			}
			if c.want == nil {
				if len(res.Config.Template) != 0 {
					t.Errorf("template %+v, want none", res.Config.Template)
				}
				return
			}
			if !reflect.DeepEqual(res.Config.Template, c.want) {
				t.Errorf("template\n%+v\nwant\n%+v", res.Config.Template, c.want)
			}
			y, err := res.YAML()
			if err != nil {
				t.Fatal(err)
			}
			if _, err := config.Parse(y); err != nil {
				t.Fatalf("the YAML does not load: %v\n%s", err, y)
			}
		})
	}
}
