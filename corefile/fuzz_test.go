package corefile

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/shardns/shardns/config"
)

// FuzzParse feeds arbitrary Corefiles through the parser and the
// converter: neither may panic, a syntax error names a line of the input,
// and whatever converts gives YAML that config.Parse accepts.
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
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, src []byte) {
		cf, err := Parse("Corefile", src, Options{})
		if err != nil {
			var e *Error
			if !errors.As(err, &e) || e.Line < 1 || e.Line > strings.Count(string(src), "\n")+1 {
				t.Fatalf("error %v does not name a line of the input", err)
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
	})
}
