package integration

// The Helm chart (deploy/helm/shardns) against the kustomize tree it
// mirrors: for each choice the chart offers, `helm template` must render
// the objects `kubectl apply -k` applies for the matching overlay or
// components, and values.schema.json must refuse a wrong value before
// anything reaches a cluster. The helm CLI is the real one, built once by
// integration/scripts/build-helm.sh.

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"runtime"
	"slices"
	"sort"
	"strings"
	"sync"
	"testing"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	"sigs.k8s.io/yaml"

	"github.com/shardns/shardns/integration/kubeapi"
)

// chartDir is the chart, as a user gives it to `helm install`.
const chartDir = "../deploy/helm/shardns"

// helmBin caches the binary's path: the build script takes a moment even
// when it has nothing to build.
var helmBin struct {
	mu   sync.Mutex
	path string
}

// helmBinary returns the path of the helm CLI: $SHARDNS_HELM, or what
// integration/scripts/build-helm.sh prints, building it first if needed.
func helmBinary(t *testing.T) string {
	t.Helper()
	if p := os.Getenv("SHARDNS_HELM"); p != "" {
		return p
	}
	helmBin.mu.Lock()
	defer helmBin.mu.Unlock()
	if helmBin.path != "" {
		return helmBin.path
	}
	_, file, _, ok := runtime.Caller(0)
	if !ok {
		t.Fatal("cannot locate the package source to find build-helm.sh")
	}
	script := filepath.Join(filepath.Dir(file), "scripts", "build-helm.sh")
	// Two test binaries may build at once; the script does not guard
	// against both writing the same file.
	unlock, err := kubeapi.LockFile(filepath.Join(os.TempDir(), "shardns-build-helm.lock"))
	if err != nil {
		t.Fatal(err)
	}
	defer unlock()
	cmd := exec.Command("bash", script)
	cmd.Stderr = os.Stderr // progress of a first, minutes-long build
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("%s: %v", script, err)
	}
	helmBin.path = strings.TrimSpace(string(out))
	if helmBin.path == "" {
		t.Fatalf("%s printed no path", script)
	}
	return helmBin.path
}

// runHelm runs helm with args and returns its standard output, or an
// error carrying its standard error.
func runHelm(t *testing.T, env []string, args ...string) (string, error) {
	t.Helper()
	cmd := exec.Command(helmBinary(t), args...)
	// Helm's own state (repositories, cache, plugins) in the test's
	// folder, never the user's.
	home := t.TempDir()
	cmd.Env = append(os.Environ(), "HELM_CACHE_HOME="+home+"/cache", "HELM_CONFIG_HOME="+home+"/config",
		"HELM_DATA_HOME="+home+"/data")
	cmd.Env = append(cmd.Env, env...)
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		return stdout.String(), fmt.Errorf("helm %s: %w\n%s", strings.Join(args, " "), err, stderr.String())
	}
	return stdout.String(), nil
}

// helmTemplate renders the chart as `helm template shardns
// deploy/helm/shardns -n kube-system` with args added.
func helmTemplate(t *testing.T, args ...string) []*unstructured.Unstructured {
	t.Helper()
	out, err := runHelm(t, nil, append([]string{"template", "shardns", chartDir, "-n", "kube-system"}, args...)...)
	if err != nil {
		t.Fatal(err)
	}
	objs, err := parseManifests(out)
	if err != nil {
		t.Fatalf("helm template printed what is not YAML objects: %v\n%s", err, out)
	}
	return objs
}

// parseManifests splits a multi-document YAML stream into objects,
// skipping empty documents.
func parseManifests(text string) ([]*unstructured.Unstructured, error) {
	r := utilyaml.NewYAMLReader(bufio.NewReader(strings.NewReader(text)))
	var objs []*unstructured.Unstructured
	for {
		doc, err := r.Read()
		if errors.Is(err, io.EOF) {
			return objs, nil
		}
		if err != nil {
			return nil, err
		}
		j, err := yaml.YAMLToJSON(doc)
		if err != nil {
			return nil, err
		}
		if s := strings.TrimSpace(string(j)); s == "null" || s == "{}" {
			continue // a document of comments only
		}
		u := &unstructured.Unstructured{}
		if err := u.UnmarshalJSON(j); err != nil {
			return nil, fmt.Errorf("%s: %w", doc, err)
		}
		objs = append(objs, u)
	}
}

// helmOwnLabels are the labels the chart adds to every object's metadata
// to say which chart and release made it; kustomize's objects lack them.
var helmOwnLabels = []string{"helm.sh/chart", "app.kubernetes.io/managed-by", "app.kubernetes.io/instance", "app.kubernetes.io/version"}

// withoutHelmMetadata returns a copy of o without what Helm adds to an
// object's metadata: the chart's labels and Helm's meta.helm.sh/ and
// helm.sh/ annotations.
func withoutHelmMetadata(o *unstructured.Unstructured) *unstructured.Unstructured {
	c := o.DeepCopy()
	if labels := c.GetLabels(); labels != nil {
		for _, k := range helmOwnLabels {
			delete(labels, k)
		}
		c.SetLabels(labels)
		if len(labels) == 0 {
			unstructured.RemoveNestedField(c.Object, "metadata", "labels")
		}
	}
	if ann := c.GetAnnotations(); ann != nil {
		for k := range ann {
			if strings.HasPrefix(k, "meta.helm.sh/") || strings.HasPrefix(k, "helm.sh/") {
				delete(ann, k)
			}
		}
		c.SetAnnotations(ann)
		if len(ann) == 0 {
			unstructured.RemoveNestedField(c.Object, "metadata", "annotations")
		}
	}
	return c
}

// objectKey names an object as kubectl does: kind.group/namespace/name.
func objectKey(o *unstructured.Unstructured) string {
	return fmt.Sprintf("%s %s/%s (%s)", o.GetKind(), o.GetNamespace(), o.GetName(), o.GetAPIVersion())
}

// diffObjects compares the objects kustomize renders with those helm
// renders, Helm's own labels and annotations aside, and returns one line
// per difference: objects only one side has, and each field whose value
// differs, by its path.
func diffObjects(kustomize, helm []*unstructured.Unstructured) []string {
	index := func(objs []*unstructured.Unstructured) map[string]*unstructured.Unstructured {
		m := map[string]*unstructured.Unstructured{}
		for _, o := range objs {
			m[objectKey(o)] = withoutHelmMetadata(o)
		}
		return m
	}
	k, h := index(kustomize), index(helm)
	var diffs []string
	for key, ko := range k {
		ho, ok := h[key]
		if !ok {
			diffs = append(diffs, "only kustomize renders "+key)
			continue
		}
		for _, d := range diffValues("", ko.Object, ho.Object) {
			diffs = append(diffs, key+": "+d)
		}
	}
	for key := range h {
		if _, ok := k[key]; !ok {
			diffs = append(diffs, "only helm renders "+key)
		}
	}
	sort.Strings(diffs)
	return diffs
}

// diffValues lists where a (kustomize's) and b (helm's) differ, by path.
func diffValues(path string, a, b any) []string {
	switch av := a.(type) {
	case map[string]any:
		bv, ok := b.(map[string]any)
		if !ok {
			break
		}
		var keys []string
		for k := range av {
			keys = append(keys, k)
		}
		for k := range bv {
			if _, ok := av[k]; !ok {
				keys = append(keys, k)
			}
		}
		slices.Sort(keys)
		var out []string
		for _, k := range keys {
			av, aok := av[k]
			bv, bok := bv[k]
			switch {
			case !aok:
				out = append(out, fmt.Sprintf("%s.%s: only helm has it: %s", path, k, brief(bv)))
			case !bok:
				out = append(out, fmt.Sprintf("%s.%s: only kustomize has it: %s", path, k, brief(av)))
			default:
				out = append(out, diffValues(path+"."+k, av, bv)...)
			}
		}
		return out
	case []any:
		bv, ok := b.([]any)
		if !ok || len(av) != len(bv) {
			break
		}
		var out []string
		for i := range av {
			out = append(out, diffValues(fmt.Sprintf("%s[%d]", path, i), av[i], bv[i])...)
		}
		return out
	}
	if reflect.DeepEqual(a, b) {
		return nil
	}
	return []string{fmt.Sprintf("%s: kustomize %s, helm %s", path, brief(a), brief(b))}
}

// brief prints a value as JSON, cut short if long.
func brief(v any) string {
	j, err := yaml.Marshal(v)
	s := strings.TrimSpace(string(j))
	if err != nil {
		s = fmt.Sprint(v)
	}
	if len(s) > 300 {
		s = s[:300] + "…"
	}
	return fmt.Sprintf("%q", s)
}

// TestHelmMatchesKustomize renders the chart with the values of each
// choice and the kustomize tree with the matching overlay or components,
// and requires the same objects: the same kinds and names (the
// configuration's ConfigMap under the same hash-suffixed name) with the
// same fields, Helm's own labels aside.
func TestHelmMatchesKustomize(t *testing.T) {
	const (
		base       = deployDir + "/base"
		components = deployDir + "/components/"
	)
	cases := []struct {
		name      string
		values    []string // helm template arguments
		kustomize func(t *testing.T) string
	}{
		{"defaults are deploy/", nil,
			func(*testing.T) string { return deployDir }},
		{"corefile.source=cluster is overlays/replace-coredns", []string{"--set", "corefile.source=cluster"},
			func(*testing.T) string { return replaceCoreDNS }},
		{"nodeLocal.enabled is overlays/nodelocal", []string{"--set", "nodeLocal.enabled=true"},
			func(*testing.T) string { return deployDir + "/overlays/nodelocal" }},
		{"nodeLocal.clients is components/nodelocal-clients", []string{"--set", "nodeLocal.enabled=true", "--set", "nodeLocal.clients=true"},
			func(t *testing.T) string {
				return overlayWith(t, base, components+"nodelocal", components+"nodelocal-clients")
			}},
		{"serviceMonitor.enabled is components/servicemonitor", []string{"--set", "serviceMonitor.enabled=true"},
			func(t *testing.T) string { return overlayWith(t, base, components+"servicemonitor") }},
		{"topology.enabled and federation.enabled are components/topology and federation",
			[]string{"--set", "topology.enabled=true", "--set", "federation.enabled=true"},
			func(t *testing.T) string { return overlayWith(t, base, components+"topology", components+"federation") }},
		{"every component over replace-coredns",
			[]string{"--set", "corefile.source=cluster", "--set", "nodeLocal.enabled=true", "--set", "nodeLocal.clients=true",
				"--set", "serviceMonitor.enabled=true", "--set", "topology.enabled=true", "--set", "federation.enabled=true"},
			func(t *testing.T) string {
				return overlayWith(t, replaceCoreDNS, components+"nodelocal", components+"nodelocal-clients",
					components+"servicemonitor", components+"topology", components+"federation")
			}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			want := render(t, tc.kustomize(t))
			got := helmTemplate(t, tc.values...)
			if diffs := diffObjects(want, got); len(diffs) > 0 {
				t.Errorf("helm template %s differs from kustomize in %d places:\n%s",
					strings.Join(tc.values, " "), len(diffs), strings.Join(diffs, "\n"))
			}
			t.Logf("%d objects alike", len(got))
		})
	}
}
