package template

import (
	"github.com/shardns/shardns/config"
)

// Compile compiles the configured templates, in order; nil when there
// are none, so the query path pays nothing without them. An error names
// the key, e.g. template[0].match[1] (config.ParseTemplates).
func Compile(cfgs []config.Template) (*Templates, error) {
	if len(cfgs) == 0 {
		return nil, nil
	}
	parsed, err := config.ParseTemplates(cfgs)
	if err != nil {
		return nil, err
	}
	ts := &Templates{}
	for _, p := range parsed {
		t := compiled{class: p.Class, qtype: p.Type, zones: p.Zones, regex: p.Match, answer: p.Answer,
			additional: p.Additional, authority: p.Authority, rcode: p.Rcode, ede: p.ExtendedError,
			fall: p.Fallthrough, conds: p.Expr}
		for _, v := range p.Vars {
			t.vars = append(t.vars, variable{name: v.Name, value: v.Value})
		}
		ts.list = append(ts.list, &t)
		ts.zones = append(ts.zones, t.zones...)
	}
	return ts, nil
}

// Check checks one template alone, for the Corefile converter, whose
// errors name the template's line instead of its index.
func Check(c config.Template) error {
	_, err := config.ParseTemplate(c)
	return err
}
