package corefile

import (
	"reflect"
	"strings"
	"testing"

	"github.com/shardns/shardns/config"
)

// CoreDNS's view README example: the blocks with a view become views in
// order, each with its hosts; the unfiltered block is the top level.
func TestConvertViewsCIDRSplit(t *testing.T) {
	res := convert(t, `. {
  view example1 {
    expr incidr(client_ip(), '127.0.0.0/24')
  }
  hosts {
    1.1.1.1 test
  }
}

. {
  view example2 {
    expr incidr(client_ip(), '192.168.0.0/16')
  }
  hosts {
    2.2.2.2 test
  }
}

. {
  hosts {
    3.3.3.3 test
  }
}
`)
	if len(res.Findings) > 0 && res.Unmapped() > 0 {
		t.Errorf("findings:\n%s", strings.Join(findings(res), "\n"))
	}
	views := res.Config.Views
	if len(views) != 2 || views[0].Name != "example1" || views[1].Name != "example2" {
		t.Fatalf("views %+v", views)
	}
	if got := views[0].Expr; !reflect.DeepEqual(got, []string{"incidr(client_ip(), '127.0.0.0/24')"}) {
		t.Errorf("expr %q", got)
	}
	if got := views[1].Hosts.Entries; !reflect.DeepEqual(got, []string{"2.2.2.2 test"}) {
		t.Errorf("view hosts %q", got)
	}
	if got := res.Config.Hosts.Entries; !reflect.DeepEqual(got, []string{"3.3.3.3 test"}) {
		t.Errorf("hosts %q", got)
	}
	if len(views[0].Forward.Upstreams) != 0 || len(res.Config.Forward.Upstreams) != 0 {
		t.Errorf("upstreams %v %v, want none", views[0].Forward.Upstreams, res.Config.Forward.Upstreams)
	}
	y, err := res.YAML()
	if err != nil {
		t.Fatal(err)
	}
	if _, err := config.Parse(y); err != nil {
		t.Fatalf("the YAML does not load: %v\n%s", err, y)
	}
}

// The type split: a view's forward is its own upstreams; what only the
// unfiltered block has (cache here) is reported.
func TestConvertViewsForwardSplit(t *testing.T) {
	res := convert(t, `. {
  view example {
    expr type() in ['A', 'AAAA']
    expr name() matches '^abc\\..*\\.example\\.com\\.$'
  }
  forward . 10.0.0.6
}

. {
  forward . 10.0.0.1
  cache 30
}
`)
	v := res.Config.Views
	if len(v) != 1 || !reflect.DeepEqual(v[0].Forward.Upstreams, []string{"10.0.0.6"}) ||
		!reflect.DeepEqual(res.Config.Forward.Upstreams, []string{"10.0.0.1"}) {
		t.Fatalf("views %+v, forward %v", v, res.Config.Forward.Upstreams)
	}
	if want := []string{"type() in ['A', 'AAAA']", `name() matches '^abc\\..*\\.example\\.com\\.$'`}; !reflect.DeepEqual(v[0].Expr, want) {
		t.Errorf("expr %q, want %q", v[0].Expr, want)
	}
	want := "Corefile:2: view example: its block has no cache, but the unfiltered block's (line 11) applies to the view's queries too in shardns"
	if !hasFinding(res, want) {
		t.Errorf("missing %s\ngot:\n%s", want, strings.Join(findings(res), "\n"))
	}
}

// A view whose expression does not compile stops the conversion at its
// line, as CoreDNS does not start; a view without an unfiltered block
// after it, or of another zone than the main block, is reported.
func TestConvertViewsBadInput(t *testing.T) {
	cf, err := Parse("Corefile", []byte(". {\n  view v {\n    expr name(\n  }\n}\n. {\n}\n"), Options{})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := Convert(cf); err == nil || !strings.HasPrefix(err.Error(), "Corefile:3: view v: expression") {
		t.Errorf("Convert = %v, want an error at Corefile:3", err)
	}
	res := convert(t, ". {\n  view v {\n    expr true\n  }\n  hosts {\n    1.1.1.1 a\n  }\n}\n")
	if len(res.Config.Views) != 0 || !strings.Contains(strings.Join(findings(res), "\n"), "Corefile:2: view: no later server block") {
		t.Errorf("views %+v, findings:\n%s", res.Config.Views, strings.Join(findings(res), "\n"))
	}
	res = convert(t, ". {\n  forward . 10.0.0.1\n}\nexample.org {\n  view v {\n    expr true\n  }\n}\nexample.org {\n}\n")
	if len(res.Config.Views) != 0 || !strings.Contains(strings.Join(findings(res), "\n"), "Corefile:5: view: shardns has views of the main server block's plane only") {
		t.Errorf("views %+v, findings:\n%s", res.Config.Views, strings.Join(findings(res), "\n"))
	}
}
