// Package deptest checks the import rules of the repository: API client
// types stay at the edge, in sources/; no source imports another; the
// answers and the query path import no actors.
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
		if p.ImportPath == "github.com/shardns/shardns/sources" ||
			strings.HasPrefix(p.ImportPath, "github.com/shardns/shardns/sources/") ||
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

const module = "github.com/shardns/shardns/"

// sharedBySources are the packages under sources/ that are not a source:
// what sources share, and the registry that lists them.
var sharedBySources = map[string]bool{
	"sources": true, "sources/kubeclient": true, "sources/kubeobj": true, "sources/crdsource": true,
}

// sourceOf returns the source package p is or is inside ("sources/istio"
// for sources/istio/...), or "" when p is no source.
func sourceOf(p string) string {
	rel, ok := strings.CutPrefix(p, module)
	if !ok || !strings.HasPrefix(rel, "sources/") {
		return ""
	}
	parts := strings.SplitN(rel, "/", 3)
	top := parts[0] + "/" + parts[1]
	if sharedBySources[top] || top == "sources/registry" {
		return ""
	}
	return top
}

// listImports returns the imports of every package of the module,
// test imports included.
func listImports(t *testing.T) map[string][]string {
	t.Helper()
	out, err := exec.Command("go", "list", "-json=ImportPath,Imports,TestImports,XTestImports", module+"...").Output()
	if err != nil {
		t.Fatal(err)
	}
	imports := map[string][]string{}
	dec := json.NewDecoder(strings.NewReader(string(out)))
	for {
		var p struct {
			ImportPath                         string
			Imports, TestImports, XTestImports []string
		}
		if err := dec.Decode(&p); err == io.EOF {
			break
		} else if err != nil {
			t.Fatal(err)
		}
		imports[p.ImportPath] = append(append(p.Imports, p.TestImports...), p.XTestImports...)
	}
	if len(imports) < 10 {
		t.Fatalf("only %d packages listed", len(imports))
	}
	return imports
}

// No source imports another: what several need lives in sources,
// sources/kubeclient, sources/kubeobj or sources/crdsource, so a source
// can be added, changed or removed on its own.
func TestNoSourceImportsAnother(t *testing.T) {
	sources := 0
	for p, imps := range listImports(t) {
		from := sourceOf(p)
		if from == "" {
			continue
		}
		sources++
		for _, imp := range imps {
			if to := sourceOf(imp); to != "" && to != from {
				t.Errorf("%s imports %s: a source imports no other source", p, imp)
			}
		}
	}
	if sources < 5 {
		t.Fatalf("only %d source packages listed", sources)
	}
}

// The answers (zone) and the query path (query) are plain code the
// actors drive: they import no actors package.
func TestZoneAndQueryImportNoActors(t *testing.T) {
	imports := listImports(t)
	for p, imps := range imports {
		rel := strings.TrimPrefix(p, module)
		if rel != "zone" && rel != "query" && !strings.HasPrefix(rel, "zone/") && !strings.HasPrefix(rel, "query/") {
			continue
		}
		for _, imp := range imps {
			if imp == module+"actors" || strings.HasPrefix(imp, module+"actors/") {
				t.Errorf("%s imports %s: zone and query import no actors", p, imp)
			}
		}
	}
	for _, p := range []string{"zone", "query"} {
		if _, ok := imports[module+p]; !ok {
			t.Fatalf("package %s not listed", p)
		}
	}
}
