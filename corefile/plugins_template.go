package corefile

import (
	"strconv"
	"strings"

	"github.com/shardns/shardns/config"
	"github.com/shardns/shardns/template"
)

// templatePlugin maps `template CLASS TYPE [ZONES] {…}` to template[],
// its var and expr options (expressions in the expr language) included.
func (c *converter) templatePlugin(s *server, d *Directive) {
	if len(d.Args) < 2 {
		c.unmapped(d.place(), "template needs a class and a type")
		return
	}
	t := config.Template{Class: d.Args[0], Type: d.Args[1]}
	if err := template.Check(t); err != nil {
		c.unmapped(d.place(), "template %s %s: %v", d.Args[0], d.Args[1], strings.TrimPrefix(err.Error(), "."))
		return
	}
	zones := s.blockZones
	if len(d.Args) > 2 {
		zones = d.Args[2:]
	}
	t.Zones = c.zoneList(d, zones)
	ok := true
	c.options(d, func(o *Directive) bool {
		known, valid := c.templateOption(&t, o)
		ok = ok && valid
		return known
	})
	if !ok {
		return
	}
	c.cfg.Template = append(c.cfg.Template, t)
	c.global(s, d, "template[] applies to every query, in the order of the Corefile")
}

// templateOption reads one option of a template block into t; known is
// false for an option shardns does not have, valid false for one whose
// value is wrong (reported here).
func (c *converter) templateOption(t *config.Template, o *Directive) (known, valid bool) {
	// check reports what the template package says of the option alone.
	check := func(part config.Template) bool {
		part.Type = "ANY"
		if err := template.Check(part); err != nil {
			c.unmapped(o.place(), "template %s: %s", o.Name, strings.TrimPrefix(err.Error(), "."))
			return false
		}
		return true
	}
	needArgs := func() bool {
		if len(o.Args) == 0 {
			c.unmapped(o.place(), "template %s needs an argument", o.Name)
			return false
		}
		return true
	}
	switch o.Name {
	case "match":
		t.Match = append(t.Match, o.Args...)
		return true, needArgs() && check(config.Template{Match: o.Args})
	case "answer":
		t.Answer = append(t.Answer, o.Args...)
		return true, needArgs() && check(config.Template{Answer: o.Args})
	case "additional":
		t.Additional = append(t.Additional, o.Args...)
		return true, needArgs() && check(config.Template{Additional: o.Args})
	case "authority":
		t.Authority = append(t.Authority, o.Args...)
		return true, needArgs() && check(config.Template{Authority: o.Args})
	case "rcode":
		if len(o.Args) != 1 {
			c.unmapped(o.place(), "template rcode needs one response code")
			return true, false
		}
		t.Rcode = o.Args[0]
		return true, check(config.Template{Rcode: t.Rcode})
	case "ederror":
		return true, c.templateEDE(t, o)
	case "fallthrough":
		t.Fallthrough = []string{"."}
		if z := c.zoneList(o, o.Args); len(z) > 0 {
			t.Fallthrough = z
		}
		return true, true
	case "upstream":
		c.note(o.place(), "template upstream: CNAME targets are looked up through shardns itself, as CoreDNS does whether or not it is written")
		return true, true
	case "var":
		// The expression is the rest of the line, as CoreDNS joins it.
		if len(o.Args) < 2 {
			c.unmapped(o.place(), "template var needs a name and an expression")
			return true, false
		}
		t.Vars = append(t.Vars, config.TemplateVar{Name: o.Args[0], Expr: strings.Join(o.Args[1:], " ")})
		if !check(config.Template{Vars: t.Vars}) {
			t.Vars = t.Vars[:len(t.Vars)-1] // reported once, here
			return true, false
		}
		return true, true
	case "expr":
		if !needArgs() {
			return true, false
		}
		t.Expr = append(t.Expr, strings.Join(o.Args, " "))
		return true, check(config.Template{Vars: t.Vars, Expr: t.Expr})
	}
	return false, false
}

// templateEDE reads ederror CODE [REASON].
func (c *converter) templateEDE(t *config.Template, o *Directive) bool {
	if len(o.Args) != 1 && len(o.Args) != 2 {
		c.unmapped(o.place(), "template ederror needs a code and at most a reason")
		return false
	}
	code, err := strconv.ParseUint(o.Args[0], 10, 16)
	if err != nil {
		c.unmapped(o.place(), "template ederror %s: not a code from 0 to 65535", o.Args[0])
		return false
	}
	t.ExtendedError = &config.TemplateExtendedError{Code: int(code)}
	if len(o.Args) == 2 {
		t.ExtendedError.Text = o.Args[1]
	}
	return true
}
