package deptest

import (
	"os/exec"
	"strings"
	"testing"
)

// config owns every settings type and what a valid value is; the parts
// that act on the settings import config, never the other way, so a
// plugin's settings are read in one place and config builds alone.
func TestConfigImportsNoPlugin(t *testing.T) {
	out, err := exec.Command("go", "list", "-deps", "github.com/shardns/shardns/config").Output()
	if err != nil {
		t.Fatal(err)
	}
	deps := strings.Fields(string(out))
	if len(deps) < 10 {
		t.Fatalf("only %d dependencies listed", len(deps))
	}
	const module = "github.com/shardns/shardns/"
	for _, d := range deps {
		rest, ok := strings.CutPrefix(d, module)
		if !ok {
			continue
		}
		top, _, _ := strings.Cut(rest, "/")
		switch top {
		case "template", "acl", "rewrite", "forward", "cache", "hosts", "query", "zone", "node", "actors",
			"sources", "cluster", "listeners", "httpapi", "corefile", "metrics":
			t.Errorf("config imports %s", d)
		}
	}
}
