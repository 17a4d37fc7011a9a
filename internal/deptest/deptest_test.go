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

// The binary must not link client-go's generated clientset, informers or
// discovery client: their packages register every built-in API group
// when the process starts, which cost each replica about 19 MB of
// resident memory (and doubled the binary) for kinds shardns never reads.
func TestBinaryLinksNoClientset(t *testing.T) {
	out, err := exec.Command("go", "list", "-deps", "github.com/shardns/shardns/cmd/shardns").Output()
	if err != nil {
		t.Fatal(err)
	}
	deps := strings.Fields(string(out))
	if len(deps) < 100 {
		t.Fatalf("only %d dependencies listed", len(deps))
	}
	for _, d := range deps {
		switch d {
		case "k8s.io/client-go/kubernetes", "k8s.io/client-go/kubernetes/scheme",
			"k8s.io/client-go/informers", "k8s.io/client-go/discovery":
			t.Errorf("cmd/shardns links %s", d)
		}
	}
}
