package corefile

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"testing/fstest"

	"github.com/shardns/shardns/config"
)

// fuzzFiles are the files fuzzed Corefiles may import: one to splice in
// a block, one with a server block, one importing itself.
var fuzzFiles = fstest.MapFS{
	"a.conf":   {Data: []byte("log\nerrors\n")},
	"b.server": {Data: []byte("x.example {\n whoami\n import a.conf\n}\n")},
	"c.conf":   {Data: []byte("import c.conf\n")},
}

// FuzzParse feeds arbitrary Corefiles through the parser and the
// converter, with imports of files left unread and read from fuzzFiles:
// neither may panic, a syntax error names a line of the input or of the
// imported file, and whatever converts gives YAML that config.Parse
// accepts.
func FuzzParse(f *testing.F) {
	seeds, _ := filepath.Glob("testdata/*.Corefile")
	for _, s := range seeds {
		b, err := os.ReadFile(s)
		if err != nil {
			f.Fatal(err)
		}
		f.Add(b)
	}
	for _, s := range []string{
		"",
		". {\n",
		". {\n}\n}\n",
		"(a) {\n import a\n}\n. {\n import a\n}\n",
		". { chaos \"x\n",
		"a, b,\n c:99 {\n whoami\n}\n",
		"10.0.0.0/9 fd00::/61 {\n kubernetes\n file db\n}\n",
		". {\n forward . {$X} {%Y%}\n}\n",
		"tls://.:853 https://.:443 {\n tls c k\n rewrite continue ttl prefix a -\n hosts {\n  ::1 h\n  fallthrough\n }\n}\n",
		"example.org {\n file db { transfer to * 1.2.3.4:53 }\n transfer example.org { to ::1 }\n cache 0 { success 1 2 3\n denial 4 5 6 }\n}\n",
		". {\n import a.conf\n}\nimport b.server\nimport none/*.server\n",
		". {\n import *.conf\n}\n",
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, src []byte) {
		for _, opts := range []Options{{}, {Files: fuzzFiles}} {
			checkParse(t, src, opts)
		}
	})
}

func checkParse(t *testing.T, src []byte, opts Options) {
	cf, err := Parse("Corefile", src, opts)
	if err != nil {
		var e *Error
		if !errors.As(err, &e) || !namesALine(e, src) {
			t.Fatalf("error %v does not name a line of the input or of an imported file", err)
		}
		return
	}
	res, err := Convert(cf)
	if err != nil {
		return // no server blocks, or a key CoreDNS rejects too
	}
	out, err := res.YAML()
	if err != nil {
		t.Fatalf("conversion gives an invalid configuration: %v", err)
	}
	if _, err := config.Parse(out); err != nil {
		t.Fatalf("YAML does not parse back: %v\n%s", err, out)
	}
}

// namesALine reports whether e is at a line of the Corefile src, or of
// the file of fuzzFiles it names.
func namesALine(e *Error, src []byte) bool {
	text := string(src)
	if e.File != "Corefile" {
		f, ok := fuzzFiles[e.File]
		if !ok {
			return false
		}
		text = string(f.Data)
	}
	return e.Line >= 1 && e.Line <= strings.Count(text, "\n")+1
}
