package corefile

import (
	"reflect"
	"strconv"
	"strings"
	"testing"
)

// render writes a parsed Corefile back in one line per block, to compare
// structures in tables. Lines are @LINE in the Corefile, @FILE:LINE in
// an imported file.
func render(cf *Corefile) string {
	at := func(file string, line int) string {
		if file != cf.File {
			return "@" + file + ":" + strconv.Itoa(line)
		}
		return "@" + strconv.Itoa(line)
	}
	var parts []string
	for _, b := range cf.Blocks {
		var ds []string
		for _, d := range b.Directives {
			ds = append(ds, canonical(d)+at(d.File, d.Line))
		}
		parts = append(parts, strings.Join(b.Keys, ",")+at(b.File, b.Line)+" {"+strings.Join(ds, "; ")+"}")
	}
	for _, d := range cf.Imports {
		parts = append(parts, canonical(d)+at(d.File, d.Line))
	}
	return strings.Join(parts, " | ")
}

func TestParseStructure(t *testing.T) {
	cases := []struct{ name, src, want string }{
		{"kubeadm shape", ".:53 {\n  errors\n  health {\n    lameduck 5s\n  }\n  cache 30\n}\n",
			".:53@1 {errors@2; health {lameduck 5s;}@3; cache 30@6}"},
		{"several keys, trailing comma continues on the next line", "a.example, b.example:1053,\n  c.example {\n whoami\n}",
			"a.example,b.example:1053,c.example@1 {whoami@3}"},
		{"brace on the line after the keys", "example.org\n{\n  whoami\n}",
			"example.org@1 {whoami@3}"},
		{"comments anywhere, # inside a word starts one", "# head\n. { # open\n  log a#b c # tail\n}\n",
			".@2 {log a@3}"},
		{"# inside quotes is kept", ". {\n  chaos \"v#1\"#x\n}\n", ".@1 {chaos v#1@2}"},
		{"quoted words keep spaces, braces and newlines", ". {\n  template IN A x {\n    answer \"{{ .Name }} 60 IN A 10.0.0.1\"\n  }\n  hosts \"a\nb\" c\n}",
			".@1 {template IN A x {answer {{ .Name }} 60 IN A 10.0.0.1;}@2; hosts a\nb c@5}"},
		{"escaped quote", `. { chaos "say \"hi\"" }`, `.@1 {chaos say "hi"@1}`},
		{"one-line block", ". { health { lameduck 5s } ready }", ".@1 {health {lameduck 5s;}@1; ready@1}"},
		{"nested blocks", ". {\n a {\n  b {\n   c 1\n  }\n }\n}", ".@1 {a {b {c 1;};}@2}"},
		{"empty block kept as a block", ". {\n reload {\n }\n}", ".@1 {reload {}@2}"},
		{"server block without braces", ".\nwhoami\nlog", ".@1 {whoami@2; log@3}"},
		{"snippet spliced with its own lines", "(snip) {\n  log\n  errors\n}\n. {\n  import snip\n  cache\n}",
			".@5 {log@2; errors@3; cache@7}"},
		{"snippet imported at the top level", "(blk) {\n  x.example {\n    whoami\n  }\n}\nimport blk\n",
			"x.example@2 {whoami@3}"},
		{"import of a file is kept", "import a/*.server\n. {\n import common.conf\n}",
			".@2 {import common.conf@3} | import a/*.server@1"},
		{"CRLF line ends", ". {\r\n  log\r\n}\r\n", ".@1 {log@2}"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			cf, err := Parse("Corefile", []byte(c.src), Options{})
			if err != nil {
				t.Fatal(err)
			}
			if got := render(cf); got != c.want {
				t.Errorf("got  %q\nwant %q", got, c.want)
			}
		})
	}
}

func TestParseErrorsNameTheLine(t *testing.T) {
	cases := []struct{ name, src, want string }{
		{"block never closed", ". {\n  log\n  health {\n    lameduck 5s\n}\n", `Corefile:1: "{" opened here is not closed`},
		{"plugin block never closed", ". {\n  log\n}\nx.example {\n  health {\n", `Corefile:5: "{" opened here is not closed`},
		{"extra closing brace", ". {\n  log\n}\n}\n", `Corefile:4: unexpected "}": no block is open`},
		{"closing brace in a braceless block", ".\nlog\n}\n", `Corefile:3: unexpected "}": no block is open`},
		{"quote never closed", ". {\n  chaos \"v1\n}\n", "Corefile:2: quoted string opened here is not closed"},
		{"brace alone on a line in a block", ". {\n  health\n  {\n  }\n}", `Corefile:3: "{" must end the line of the plugin or option it opens`},
		{"# in a word comments out the brace after it", ". {\n  forward . 10.0.0.1#853 {\n  }\n}\n", `Corefile:4: unexpected "}": no block is open`},
		{"brace without keys", "{\n log\n}", `Corefile:1: "{" without server block keys before it`},
		{"brace glued to the key", "example.org{\n log\n}", `Corefile:1: "example.org{": put a space before "{"`},
		{"snippet defined twice", "(a) {\n log\n}\n(a) {\n errors\n}", `Corefile:4: snippet "a" is defined twice`},
		{"snippet never closed", "(a) {\n log\n", `Corefile:1: "{" opened here is not closed`},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			_, err := Parse("Corefile", []byte(c.src), Options{})
			if err == nil || err.Error() != c.want {
				t.Fatalf("error %v, want %s", err, c.want)
			}
		})
	}
}

// A snippet that imports itself stops at the splice bound instead of
// growing for ever; what is left is reported as an import.
func TestParseRecursiveSnippetIsBounded(t *testing.T) {
	cf, err := Parse("Corefile", []byte("(loop) {\n  log\n  import loop\n}\n. {\n  import loop\n}\n"), Options{})
	if err != nil {
		t.Fatal(err)
	}
	ds := cf.Blocks[0].Directives
	if n := len(ds); n != maxSpliced+1 || ds[n-1].Name != "import" {
		t.Fatalf("%d directives, last %q; want %d logs and the import left", n, ds[n-1].Name, maxSpliced)
	}
}

func TestParseEnvironment(t *testing.T) {
	env := map[string]string{"UPSTREAM": "10.0.0.53", "DOMAIN": "cluster.local", "PORT": "1053"}
	getenv := func(k string) (string, bool) { v, ok := env[k]; return v, ok }
	src := ".:{$PORT} {\n  kubernetes {$DOMAIN} {%DOMAIN%}\n  forward . {$UPSTREAM}:53\n}\n"
	cf, err := Parse("Corefile", []byte(src), Options{Getenv: getenv})
	if err != nil {
		t.Fatal(err)
	}
	want := ".:1053@1 {kubernetes cluster.local cluster.local@2; forward . 10.0.0.53:53@3}"
	if got := render(cf); got != want {
		t.Errorf("got %q, want %q", got, want)
	}
	_, err = Parse("Corefile", []byte(". {\n forward . {$NOPE}\n}"), Options{Getenv: getenv})
	if err == nil || err.Error() != "Corefile:2: environment variable NOPE is not set" {
		t.Errorf("unset variable: %v", err)
	}
	// Without Getenv the references stay, for the converter to report.
	cf, err = Parse("Corefile", []byte(src), Options{})
	if err != nil {
		t.Fatal(err)
	}
	if got := cf.Blocks[0].Directives[1].Args[1]; got != "{$UPSTREAM}:53" {
		t.Errorf("unexpanded argument %q", got)
	}
	if got := EnvRefs("a{$X}b{%Y%}{1}{$}"); !reflect.DeepEqual(got, []string{"X", "Y"}) {
		t.Errorf("EnvRefs = %q", got)
	}
}

func TestParseKey(t *testing.T) {
	cases := []struct {
		key  string
		want []Address
		err  string
	}{
		{key: ".", want: []Address{{"dns", ".", "53"}}},
		{key: ".:1053", want: []Address{{"dns", ".", "1053"}}},
		{key: "Example.ORG.:53", want: []Address{{"dns", "example.org", "53"}}},
		{key: "tls://.:853", want: []Address{{"tls", ".", "853"}}},
		{key: "tls://example.org", want: []Address{{"tls", "example.org", "853"}}},
		{key: "https://.", want: []Address{{"https", ".", "443"}}},
		{key: "dns://:5353", want: []Address{{"dns", ".", "5353"}}},
		{key: "10.0.0.0/8", want: []Address{{"dns", "10.in-addr.arpa", "53"}}},
		{key: "10.1.2.0/24:1053", want: []Address{{"dns", "2.1.10.in-addr.arpa", "1053"}}},
		{key: "10.0.0.0/23", want: []Address{{"dns", "0.0.10.in-addr.arpa", "53"}, {"dns", "1.0.10.in-addr.arpa", "53"}}},
		{key: "fd00:10:96::/112", want: []Address{{"dns", "0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.6.9.0.0.0.1.0.0.0.0.d.f.ip6.arpa", "53"}}},
		{key: "fd00::/7", want: []Address{{"dns", "c.f.ip6.arpa", "53"}, {"dns", "d.f.ip6.arpa", "53"}}},
		{key: "0.0.0.0/0", want: []Address{{"dns", "in-addr.arpa", "53"}}},
		{key: "example.org:99999", err: `"example.org:99999": port "99999" is not a number from 0 to 65535`},
		{key: "ftp://example.org", err: `"ftp://example.org": unknown scheme "ftp"`},
		{key: "a..b", err: `"a..b": "a..b" is not a domain name`},
	}
	for _, c := range cases {
		got, err := ParseKey(c.key)
		if c.err != "" {
			if err == nil || err.Error() != c.err {
				t.Errorf("ParseKey(%q) error %v, want %s", c.key, err, c.err)
			}
			continue
		}
		if err != nil || !reflect.DeepEqual(got, c.want) {
			t.Errorf("ParseKey(%q) = %v, %v; want %v", c.key, got, err, c.want)
		}
	}
}
