package main

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/shardns/shardns/config"
)

const unmappedCorefile = ".:53 {\n  errors\n  dnssec\n  forward . 10.0.0.53\n}\n"

// A Corefile with a plugin shardns lacks: the line is reported, nothing
// is printed and the command fails, unless --allow-unmapped.
func TestConvertRefusesUnmappedUnlessAllowed(t *testing.T) {
	path := filepath.Join(t.TempDir(), "Corefile")
	if err := os.WriteFile(path, []byte(unmappedCorefile), 0o644); err != nil {
		t.Fatal(err)
	}
	var out, errs bytes.Buffer
	err := convert([]string{"--corefile", path}, nil, &out, &errs)
	if err == nil || !strings.Contains(err.Error(), "1 Corefile setting has no shardns equivalent") {
		t.Fatalf("error %v, want the count of unmapped settings", err)
	}
	if out.Len() != 0 {
		t.Errorf("printed a configuration although refusing:\n%s", out.String())
	}
	if want := path + `:3: plugin "dnssec" has no shardns equivalent`; !strings.Contains(errs.String(), want) {
		t.Errorf("stderr lacks %q:\n%s", want, errs.String())
	}

	out.Reset()
	errs.Reset()
	if err := convert([]string{"--corefile", path, "--allow-unmapped"}, nil, &out, &errs); err != nil {
		t.Fatal(err)
	}
	cfg, err := config.Parse(out.Bytes())
	if err != nil {
		t.Fatalf("printed configuration does not validate: %v\n%s", err, out.String())
	}
	if got := cfg.Forward.Upstreams; len(got) != 1 || got[0] != "10.0.0.53" {
		t.Errorf("forward.upstreams %q", got)
	}
}

func TestConvertReadsStdinAndExpandsEnv(t *testing.T) {
	t.Setenv("SHARDNS_TEST_UPSTREAM", "10.0.0.54")
	in := strings.NewReader(".:53 {\n  forward . {$SHARDNS_TEST_UPSTREAM}\n}\n")
	var out, errs bytes.Buffer
	if err := convert([]string{"--corefile", "-", "--expand-env"}, in, &out, &errs); err != nil {
		t.Fatalf("%v\n%s", err, errs.String())
	}
	if !strings.Contains(out.String(), "- 10.0.0.54") || !strings.Contains(out.String(), "converted from Corefile") {
		t.Errorf("output:\n%s", out.String())
	}
	err := convert([]string{"--corefile", "-"}, strings.NewReader(". {\n  log\n"), &out, &errs)
	if err == nil || err.Error() != `Corefile:1: "{" opened here is not closed` {
		t.Errorf("syntax error %v", err)
	}
	if err := convert(nil, nil, &out, &errs); err == nil {
		t.Error("no --corefile accepted")
	}
}
