package config

import (
	"strings"
	"testing"
)

func TestParseViews(t *testing.T) {
	cfg, err := Parse([]byte(`
views:
- name: internal
  expr: ["incidr(client_ip(), '10.0.0.0/8')", "type() in ['A', 'AAAA']"]
  hosts: {entries: ["10.1.1.1 db.corp"]}
  forward: {upstreams: ["10.0.0.53"]}
`))
	if err != nil {
		t.Fatal(err)
	}
	v := cfg.Views[0]
	if v.Name != "internal" || len(v.Expr) != 2 || v.Hosts.TTL != 3600 || v.Hosts.Interval <= 0 {
		t.Errorf("view %+v, want the hosts defaults filled", v)
	}
	r := cfg.Resolved(v)
	if len(r.Hosts.Entries) != 1 || r.Forward.Upstreams[0] != "10.0.0.53" || r.Forward.Policy != "random" ||
		r.Forward.Timeout != cfg.Forward.Timeout || r.Views != nil {
		t.Errorf("resolved %+v %+v", r.Hosts, r.Forward)
	}
}

func TestParseViewsErrorsNameTheKey(t *testing.T) {
	for _, c := range []struct{ yaml, want string }{
		{"views: [{name: a, expr: ['name(']}]", "views[0].expr[0]: expression \"name(\""},
		{"views: [{name: a, expr: ['name()']}]", "views[0].expr[0]"}, // not a boolean
		{"views: [{name: a}]", "views[0].expr: needs at least one expression"},
		{"views: [{name: a, expr: ['true']}, {name: a, expr: ['true']}]", "views[1].name"},
		{"views: [{name: a, expr: ['true'], hosts: {entries: ['nonsense']}}]", "views[0].hosts.entries[0]"},
		{"views: [{name: a, expr: ['true'], template: [{type: NOPE}]}]", "views[0].template[0]"},
		{"views: [{name: a, expr: ['true'], forward: {policy: fastest}}]", "views[0].forward.policy"},
		{"views: [{name: a, expr: ['true'], nosuch: 1}]", "unknown field"},
	} {
		_, err := Parse([]byte(c.yaml))
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: %v, want an error with %q", c.yaml, err, c.want)
		}
	}
}
