// Package deptest checks the import rules of the repository: API client
// types stay at the edge, in sources/.
package deptest

import (
	"encoding/json"
	"io"
	"os/exec"
	"strings"
	"testing"
)

type pkg struct {
	ImportPath string
	Imports    []string
}

// Only sources/ may import client-go or the Kubernetes API types; every
// other package sees slim model structs.
func TestOnlySourcesImportKubernetes(t *testing.T) {
	cmd := exec.Command("go", "list", "-json", "github.com/shardns/shardns/...")
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	dec := json.NewDecoder(out)
	checked := 0
	for {
		var p pkg
		if err := dec.Decode(&p); err == io.EOF {
			break
		} else if err != nil {
			t.Fatal(err)
		}
		checked++
		if strings.HasPrefix(p.ImportPath, "github.com/shardns/shardns/sources/") ||
			strings.HasPrefix(p.ImportPath, "github.com/shardns/shardns/integration") {
			continue
		}
		for _, imp := range p.Imports {
			if strings.HasPrefix(imp, "k8s.io/client-go") || strings.HasPrefix(imp, "k8s.io/api/") ||
				strings.HasPrefix(imp, "k8s.io/apimachinery") {
				t.Errorf("%s imports %s: only sources/ may", p.ImportPath, imp)
			}
		}
	}
	if err := cmd.Wait(); err != nil {
		t.Fatal(err)
	}
	if checked < 10 {
		t.Fatalf("only %d packages listed", checked)
	}
}
