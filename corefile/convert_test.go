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
