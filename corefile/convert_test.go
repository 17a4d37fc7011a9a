package corefile

import (
	"flag"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/shardns/shardns/config"
)

var update = flag.Bool("update", false, "rewrite the golden .yaml files of testdata from the converter's output")

// Every testdata/NAME.Corefile converts to testdata/NAME.yaml, and that
// YAML is a valid shardns configuration.
func TestConvertGolden(t *testing.T) {
	inputs, err := filepath.Glob("testdata/*.Corefile")
	if err != nil || len(inputs) == 0 {
		t.Fatalf("no testdata Corefiles: %v", err)
	}
	for _, in := range inputs {
		name := strings.TrimSuffix(filepath.Base(in), ".Corefile")
		t.Run(name, func(t *testing.T) {
			got := convertFile(t, in)
			if _, err := config.Parse(got); err != nil {
				t.Fatalf("converted configuration does not validate: %v\n%s", err, got)
			}
			golden := strings.TrimSuffix(in, ".Corefile") + ".yaml"
			if *update {
				if err := os.WriteFile(golden, got, 0o644); err != nil {
					t.Fatal(err)
				}
			}
			want, err := os.ReadFile(golden)
			if err != nil {
				t.Fatal(err)
			}
			if string(got) != string(want) {
				t.Errorf("%s converts to:\n%s\nwant (%s):\n%s", in, got, golden, want)
			}
		})
	}
}

func convertFile(t *testing.T, path string) []byte {
	t.Helper()
	src, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	cf, err := Parse("Corefile", src, Options{})
	if err != nil {
		t.Fatal(err)
	}
	res, err := Convert(cf)
	if err != nil {
		t.Fatal(err)
	}
	out, err := res.YAML()
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// convert parses and converts src, failing the test on an error.
func convert(t *testing.T, src string) *Result {
	t.Helper()
	cf, err := Parse("Corefile", []byte(src), Options{})
	if err != nil {
		t.Fatal(err)
	}
	res, err := Convert(cf)
	if err != nil {
		t.Fatal(err)
	}
	return res
}

// findings renders the findings as the command prints them.
func findings(r *Result) []string {
	var out []string
	for _, f := range r.Findings {
		out = append(out, f.Format("Corefile"))
	}
	return out
}

func hasFinding(r *Result, want string) bool {
	for _, f := range findings(r) {
		if f == want {
			return true
		}
	}
	return false
}

// mustYAML renders res's configuration, failing the test on an error.
func mustYAML(t *testing.T, res *Result) []byte {
	t.Helper()
	y, err := res.YAML()
	if err != nil {
		t.Fatal(err)
	}
	return []byte(y)
}

// convertCase is a row of the converter's table tests: a Corefile, what
// the part T of its configuration must hold and the findings it must
// produce, each written whole as the command prints it.
type convertCase[T any] struct {
	name  string
	src   string
	check func(t *testing.T, v T) // nil: only the findings matter
	want  []string                // findings that must be among the result's
	clean bool                    // no unmapped finding
}

// runConvertCases converts each case's Corefile and requires what a user
// runs to load: the YAML must parse as a shardns configuration. Then the
// part pick takes from the result is checked, and the findings.
func runConvertCases[T any](t *testing.T, cases []convertCase[T], pick func(t *testing.T, res *Result) T) {
	t.Helper()
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			res := convert(t, c.src)
			out := mustYAML(t, res)
			if _, err := config.Parse(out); err != nil {
				t.Fatalf("the converted configuration does not load: %v\n%s", err, out)
			}
			if c.check != nil {
				c.check(t, pick(t, res))
			}
			all := strings.Join(findings(res), "\n")
			for _, w := range c.want {
				if !hasFinding(res, w) {
					t.Errorf("missing finding %s\ngot:\n%s", w, all)
				}
			}
			if c.clean && res.Unmapped() > 0 {
				t.Errorf("unmapped findings:\n%s", all)
			}
		})
	}
}

// wholeConfig picks the whole configuration for a case's check.
func wholeConfig(_ *testing.T, res *Result) *config.Config { return res.Config }

// errorWanted fails the test unless err is as the case wants: one holding
// want, or none when want is empty. It reports whether an error was
// wanted, after which the case has nothing more to check.
func errorWanted(t *testing.T, err error, want string) bool {
	t.Helper()
	if want == "" {
		if err != nil {
			t.Fatal(err)
		}
		return false
	}
	if err == nil || !strings.Contains(err.Error(), want) {
		t.Fatalf("error %v, want one holding %q", err, want)
	}
	return true
}
