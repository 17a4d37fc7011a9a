package config

import (
	"strings"
	"testing"
)

// The resolver plane's keys: stub domains, hosts and rewrite.
func TestParseResolverPlane(t *testing.T) {
	cfg, err := Parse([]byte(`
kubernetes: {enabled: false}
forward: {stubs: [{zones: [corp.example, 10.in-addr.arpa], upstreams: [10.0.0.53]}]}
hosts: {entries: ["192.0.2.1 a.lan b", "fd00::1 a.lan # comment"], fallthrough: ["."]}
rewrite:
- {field: name, from: foo.example.com, to: foo.default.svc.cluster.local}
- {field: type, from: ANY, to: HINFO}
chaos: {enabled: true}
template:
- {type: AAAA, rcode: NOERROR}
- class: IN
  type: A
  zones: [example]
  match: ['^ip-(?P<a>[0-9]+)-(?P<b>[0-9]+)[.]example[.]$']
  answer: ["{{ .Name }} 60 IN A 10.0.{{ .Group.a }}.{{ .Group.b }}"]
  extendedError: {code: 21, text: blocked}
  fallthrough: ["."]
`))
	if err != nil {
		t.Fatal(err)
	}
	if cfg.Rewrite[0].Match != "exact" || cfg.Rewrite[1].Match != "" {
		t.Fatalf("a name rule without match is exact, a type rule has none: %+v", cfg.Rewrite)
	}
	if cfg.Hosts.TTL != 3600 || cfg.Hosts.Interval.D().Seconds() != 5 {
		t.Fatalf("hosts defaults: %+v", cfg.Hosts)
	}
	if len(cfg.Template) != 2 || cfg.Template[1].ExtendedError.Code != 21 {
		t.Fatalf("templates: %+v", cfg.Template)
	}
}

func TestParseResolverPlaneRejects(t *testing.T) {
	for _, c := range []struct{ name, yaml, want string }{
		{"stub inside the cluster domain", "kubernetes: {enabled: false}\nforward: {stubs: [{zones: [x.cluster.local], upstreams: [10.0.0.53]}]}\n",
			`forward.stubs[0].zones[0]: "x.cluster.local" is inside "cluster.local"`},
		{"stub inside a reverse zone without fallthrough", "kubernetes: {enabled: false, fallthrough: []}\nforward: {stubs: [{zones: [10.in-addr.arpa], upstreams: [10.0.0.53]}]}\n",
			`forward.stubs[0].zones[0]: "10.in-addr.arpa" is inside "in-addr.arpa"`},
		{"stub without upstreams", "kubernetes: {enabled: false}\nforward: {stubs: [{zones: [corp.example]}]}\n", "forward.stubs[0].upstreams"},
		{"hosts entry without a name", "kubernetes: {enabled: false}\nhosts: {entries: [\"192.0.2.1\"]}\n", "hosts.entries[0]"},
		{"hosts entry with a bad address", "kubernetes: {enabled: false}\nhosts: {entries: [\"ok\", \"1.2.3 a\"]}\n",
			`hosts.entries[0]: "ok": want an IP address`},
		{"hosts wildcard", "kubernetes: {enabled: false}\nhosts: {entries: [\"192.0.2.1 *.lan\"]}\n", `"*.lan" is not a host name`},
		{"rewrite regex", "kubernetes: {enabled: false}\nrewrite: [{field: name, match: regex, from: \"(\", to: x}]\n", "rewrite[0].from"},
		{"template without a type", "kubernetes: {enabled: false}\ntemplate: [{rcode: NOERROR}]\n", `template[0].type: "" is not a query type`},
		{"template regex", "kubernetes: {enabled: false}\ntemplate: [{type: A}, {type: A, match: [x, \"(\"]}]\n",
			"template[1].match[1]: error parsing regexp: missing closing ): `(`"},
		{"template that does not parse", "kubernetes: {enabled: false}\ntemplate: [{type: A, answer: [\"{{ .Name\"]}]\n",
			"template[0].answer[0]: template: answer:1: unclosed action"},
		{"template key unknown", "kubernetes: {enabled: false}\ntemplate: [{type: A, exprs: [x]}]\n", `unknown field "exprs"`},
		{"template condition that does not compile", "kubernetes: {enabled: false}\ntemplate: [{type: A, expr: [\"incidr(\"]}]\n", "template[0].expr[0]"},
		{"rewrite ttl", "kubernetes: {enabled: false}\nrewrite: [{field: ttl, from: a, ttl: \"10-5\"}]\n", "rewrite[0].ttl"},
		{"rewrite answer name regex", "kubernetes: {enabled: false}\nrewrite: [{field: name, from: a, to: b, answerName: [{from: \"(\", to: x}]}]\n",
			"rewrite[0].answerName[0].from"},
		{"rewrite answer value group", "kubernetes: {enabled: false}\nrewrite: [{field: name, from: a, to: b, answerValue: [{from: \"(a)\", to: \"{2}.x\"}]}]\n",
			`rewrite[0].answerValue[0].to: uses group {2}, but "(a)" has 1`},
		{"rewrite answer on a type rule", "kubernetes: {enabled: false}\nrewrite: [{field: type, from: A, to: AAAA, answerName: [{from: a, to: b}]}]\n",
			`rewrite[0].answerName: only name rules rewrite answers (field is "type")`},
	} {
		t.Run(c.name, func(t *testing.T) {
			_, err := Parse([]byte(c.yaml))
			if err == nil || !strings.Contains(err.Error(), c.want) {
				t.Fatalf("error %v, want %q", err, c.want)
			}
		})
	}
}
