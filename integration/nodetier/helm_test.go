package nodetier

// The Helm chart (deploy/helm/shardns) against the kustomize tree it
// mirrors: for each choice the chart offers, `helm template` must render
// the objects `kubectl apply -k` applies for the matching overlay or
// components, and values.schema.json must refuse a wrong value before
// anything reaches a cluster. The helm CLI is the real one, built once by
// integration/scripts/build-helm.sh.

import (
	"bufio"
	"bytes"
	"context"
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

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	"sigs.k8s.io/yaml"

	"github.com/shardns/shardns/integration/kubeapi"
)

// chartDir is the chart, as a user gives it to `helm install`.
const chartDir = "../../deploy/helm/shardns"

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
	script := filepath.Join(filepath.Dir(file), "..", "scripts", "build-helm.sh")
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

// TestHelmSchemaRefusesWrongValues gives the chart wrong values, as
// --set and a values file would, and requires `helm template` and `helm
// install` (client-side dry run: the same checks, before any object
// reaches a cluster) to refuse each with a message naming the value.
func TestHelmSchemaRefusesWrongValues(t *testing.T) {
	cases := []struct {
		what string
		args []string
		want []string // in the error message
	}{
		{"replicas as a word", []string{"--set-string", "replicas=three"}, []string{"/replicas", "want integer"}},
		{"replicationFactor 0", []string{"--set", "replicationFactor=0"}, []string{"/replicationFactor", "minimum"}},
		{"an unknown top-level key", []string{"--set", "replica=3"}, []string{"'replica'", "not allowed"}},
		{"an unknown nested key", []string{"--set", "nodeLocal.cidr=10.1.0.0/16"}, []string{"/nodeLocal", "'cidr'"}},
		{"an unknown Corefile source", []string{"--set", "corefile.source=configmap"}, []string{"/corefile/source", "'none', 'cluster', 'inline'"}},
		{"an inline Corefile without one", []string{"--set", "corefile.source=inline"}, []string{"/corefile/inline"}},
		{"a kube-dns address out of range", []string{"--set", "kubeDNS.clusterIP=10.96.0.300"}, []string{"/kubeDNS/clusterIP", "10.96.0.300"}},
		{"a node CIDR without its length", []string{"--set", "nodeLocal.nodeCIDR=10.0.0.0"}, []string{"/nodeLocal/nodeCIDR", "10.0.0.0"}},
		{"a CPU limit that is no quantity", []string{"--set", "resources.limits.cpu=lots"}, []string{"/resources/limits/cpu", "lots"}},
		{"replicas as a string in a values file", []string{"-f", writeValues(t, "replicas: \"3\"\n")}, []string{"/replicas", "want integer"}},
		{"the node tier switch as a string", []string{"-f", writeValues(t, "nodeLocal:\n  enabled: \"yes\"\n")}, []string{"/nodeLocal/enabled", "want boolean"}},
	}
	for _, tc := range cases {
		t.Run(tc.what, func(t *testing.T) {
			for _, cmd := range [][]string{
				{"template", "shardns", chartDir, "-n", "kube-system"},
				{"install", "shardns", chartDir, "-n", "kube-system", "--dry-run=client"},
			} {
				// No cluster: a command that tried one would fail on
				// that instead, and the message check would say so.
				_, err := runHelm(t, []string{"KUBECONFIG=" + filepath.Join(t.TempDir(), "none")}, append(cmd, tc.args...)...)
				if err == nil {
					t.Errorf("helm %s %s: accepted", cmd[0], strings.Join(tc.args, " "))
					continue
				}
				for _, w := range tc.want {
					if !strings.Contains(err.Error(), w) {
						t.Errorf("helm %s %s: the error does not say %q:\n%v", cmd[0], strings.Join(tc.args, " "), w, err)
					}
				}
			}
		})
	}
	t.Run("another namespace", func(t *testing.T) {
		_, err := runHelm(t, nil, "template", "shardns", chartDir, "-n", "dns")
		if err == nil || !strings.Contains(err.Error(), "install with -n kube-system") {
			t.Errorf("helm template -n dns: want a refusal that says to install into kube-system, got %v", err)
		}
	})
}

// writeValues writes a values file and returns its path.
func writeValues(t *testing.T, text string) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), "values.yaml")
	if err := os.WriteFile(p, []byte(text), 0o644); err != nil {
		t.Fatal(err)
	}
	return p
}

// TestHelmValues sets each value an operator changes and checks the
// rendered objects carry it, where the pods read it.
func TestHelmValues(t *testing.T) {
	objs := helmTemplate(t, "-f", writeValues(t, `
replicas: 5
replicationFactor: 1
image: {repository: registry.example.com/dns/shardns, tag: v1.2.3}
resources: {requests: {cpu: 200m, memory: 100Mi}, limits: {cpu: "1", memory: 300Mi}}
config:
  kubernetes: {ttl: 10}
  cache: {enabled: false}
kubeDNS: {clusterIP: 10.0.0.10, clusterIPs: [10.0.0.10, "fd00::a"]}
nodeLocal:
  enabled: true
  address: 169.254.25.10
  nodeCIDR: 192.168.0.0/16
  config: {cache: {size: 500}}
serviceMonitor: {enabled: true, labels: {release: kube-prometheus-stack}, interval: 15s}
`))
	sts := find(t, objs, "StatefulSet", "shardns", nil)
	ds := find(t, objs, "DaemonSet", "shardns-nodelocal", nil)
	checks := []struct {
		what string
		obj  *unstructured.Unstructured
		path []string
		want any
	}{
		{"replicas", sts, []string{"spec", "replicas"}, int64(5)},
		{"image", sts, []string{"spec", "template", "spec", "containers", "0", "image"}, "registry.example.com/dns/shardns:v1.2.3"},
		{"node-local image", ds, []string{"spec", "template", "spec", "containers", "0", "image"}, "registry.example.com/dns/shardns:v1.2.3"},
		{"CPU limit", sts, []string{"spec", "template", "spec", "containers", "0", "resources", "limits", "cpu"}, "1"},
		{"memory request", sts, []string{"spec", "template", "spec", "containers", "0", "resources", "requests", "memory"}, "100Mi"},
		{"kube-dns address", find(t, objs, "Service", "kube-dns", nil), []string{"spec", "clusterIP"}, "10.0.0.10"},
		{"node CIDR", find(t, objs, "NetworkPolicy", "shardns-from-nodelocal", nil),
			[]string{"spec", "ingress", "0", "from", "0", "ipBlock", "cidr"}, "192.168.0.0/16"},
		{"ServiceMonitor label", find(t, objs, "ServiceMonitor", "shardns", nil), []string{"metadata", "labels", "release"}, "kube-prometheus-stack"},
		{"ServiceMonitor interval", find(t, objs, "ServiceMonitor", "shardns", nil), []string{"spec", "endpoints", "0", "interval"}, "15s"},
	}
	for _, c := range checks {
		if got := nested(c.obj.Object, c.path...); !reflect.DeepEqual(got, c.want) {
			t.Errorf("%s: %s is %v, want %v", c.what, strings.Join(c.path, "."), got, c.want)
		}
	}
	if init := nested(ds.Object, "spec", "template", "spec", "initContainers", "0", "command", "2"); !strings.Contains(fmt.Sprint(init), "ip addr add 169.254.25.10/32") {
		t.Errorf("the link-local init container does not add nodeLocal.address:\n%v", init)
	}

	// The configurations, as the processes read them: the values merged
	// over the shipped files, false and all, every other key kept.
	replica := configOf(t, objs, "shardns-")
	for path, want := range map[string]any{
		"kubernetes.ttl": float64(10), "cache.enabled": false, "cluster.replicationFactor": float64(1),
		"cache.maxTTL": float64(30), "cluster.joinService": "kube-system/shardns-peers",
	} {
		if got := nested(replica, strings.Split(path, ".")...); got != want {
			t.Errorf("replicas' shardns.yaml: %s is %v, want %v", path, got, want)
		}
	}
	nodeLocal := configOf(t, objs, "shardns-nodelocal-")
	for path, want := range map[string]any{
		"dns.listen.0": "169.254.25.10:53", "cache.size": float64(500), "cluster.replicationFactor": float64(1), "mode": "nodelocal",
	} {
		if got := nested(nodeLocal, strings.Split(path, ".")...); got != want {
			t.Errorf("node-local shardns.yaml: %s is %v, want %v", path, got, want)
		}
	}

	// A changed configuration is a ConfigMap of another name, which the
	// StatefulSet names: the replicas roll, as with kustomize.
	shipped := find(t, helmTemplate(t), "ConfigMap", "shardns-", nil).GetName()
	changed := find(t, objs, "ConfigMap", "shardns-", nil).GetName()
	if shipped == changed {
		t.Errorf("the changed configuration kept the ConfigMap name %s: the replicas would not roll", changed)
	}
	if got := nested(sts.Object, "spec", "template", "spec", "volumes", "0", "configMap", "name"); got != changed {
		t.Errorf("the StatefulSet mounts ConfigMap %v, want %s", got, changed)
	}
}

// configOf parses the shardns.yaml of the one ConfigMap named prefix<hash>.
func configOf(t *testing.T, objs []*unstructured.Unstructured, prefix string) map[string]any {
	t.Helper()
	text, _, _ := unstructured.NestedString(find(t, objs, "ConfigMap", prefix, nil).Object, "data", "shardns.yaml")
	var m map[string]any
	if err := yaml.Unmarshal([]byte(text), &m); err != nil {
		t.Fatalf("ConfigMap %s: shardns.yaml: %v\n%s", prefix, err, text)
	}
	return m
}

// nested walks maps by key and lists by index ("0"); nil where the path
// leads nowhere.
func nested(v any, path ...string) any {
	for _, p := range path {
		switch c := v.(type) {
		case map[string]any:
			v = c[p]
		case []any:
			var i int
			if _, err := fmt.Sscan(p, &i); err != nil || i < 0 || i >= len(c) {
				return nil
			}
			v = c[i]
		default:
			return nil
		}
	}
	return v
}

// TestHelmMonitoring renders the PrometheusRule and the Grafana
// dashboard the chart makes from its files: the rule's groups are the
// rules file's, the dashboard is the JSON file as it is, labelled for
// Grafana's sidecar.
func TestHelmMonitoring(t *testing.T) {
	objs := helmTemplate(t, "--set", "prometheusRule.enabled=true", "--set", "prometheusRule.labels.release=prom",
		"--set", "dashboard.enabled=true", "--set", "dashboard.annotations.grafana_folder=DNS")
	rulesFile, err := os.ReadFile(chartDir + "/files/shardns.rules.yaml")
	if err != nil {
		t.Fatal(err)
	}
	var rules map[string]any
	if err := yaml.Unmarshal(rulesFile, &rules); err != nil {
		t.Fatal(err)
	}
	rule := find(t, objs, "PrometheusRule", "shardns", nil)
	if got := nested(rule.Object, "spec", "groups"); !reflect.DeepEqual(got, rules["groups"]) {
		t.Errorf("the PrometheusRule's groups differ from files/shardns.rules.yaml's:\n%s", strings.Join(diffValues("groups", rules["groups"], got), "\n"))
	}
	if n, _ := nested(rules, "groups").([]any); len(n) == 0 {
		t.Error("files/shardns.rules.yaml has no groups")
	}
	if got := rule.GetLabels()["release"]; got != "prom" {
		t.Errorf("PrometheusRule label release is %q, want prom", got)
	}

	dashboardFile, err := os.ReadFile(chartDir + "/files/shardns-dashboard.json")
	if err != nil {
		t.Fatal(err)
	}
	cm := find(t, objs, "ConfigMap", "shardns-dashboard", nil)
	if got, _, _ := unstructured.NestedString(cm.Object, "data", "shardns-dashboard.json"); strings.TrimSpace(got) != strings.TrimSpace(string(dashboardFile)) {
		t.Errorf("the dashboard ConfigMap's JSON is not files/shardns-dashboard.json (%d bytes, the file %d)", len(got), len(dashboardFile))
	}
	if l := cm.GetLabels(); l["grafana_dashboard"] != "1" {
		t.Errorf("dashboard ConfigMap labels %v: no grafana_dashboard: \"1\"", l)
	}
	if a := cm.GetAnnotations(); a["grafana_folder"] != "DNS" {
		t.Errorf("dashboard ConfigMap annotations %v: no grafana_folder", a)
	}
	// Both off by default: they need the Prometheus Operator and Grafana.
	for _, o := range helmTemplate(t) {
		if o.GetKind() == "PrometheusRule" || o.GetName() == "shardns-dashboard" {
			t.Errorf("the default values render %s", objectKey(o))
		}
	}
}

// TestHelmOverKubeadmKubeDNS installs the chart as deploy/helm/README.md
// says where CoreDNS runs, for real on an apiserver (no node: the objects
// are stored, no pod runs), over the kube-dns Service kubeadm created:
// without --take-ownership Helm refuses the Service, without
// --force-conflicts the apiserver refuses kubeadm's metrics port to be
// taken; with both, kube-dns keeps its address and selects the replicas'
// label, its metrics port named as theirs.
func TestHelmOverKubeadmKubeDNS(t *testing.T) {
	cp := kubeapi.Shared(t)
	createKubeadmKubeDNS(t, cp)
	env := []string{"KUBECONFIG=" + cp.Kubeconfig}
	install := []string{"install", "shardns", chartDir, "-n", "kube-system", "--set", "corefile.source=cluster",
		"--set", "kubeDNS.clusterIP=" + kubeDNSIP}
	t.Cleanup(func() {
		if _, err := runHelm(t, env, "uninstall", "shardns", "-n", "kube-system", "--ignore-not-found"); err != nil {
			t.Errorf("cleaning up: %v", err)
		}
	})
	refusals := []struct {
		args []string
		want string
	}{
		{nil, "kube-dns"},                          // exists and cannot be imported into the release
		{[]string{"--take-ownership"}, "conflict"}, // kubeadm's metrics target port
	}
	for _, r := range refusals {
		_, err := runHelm(t, env, append(install, r.args...)...)
		if err == nil {
			t.Fatalf("helm %s: accepted", strings.Join(append(install, r.args...), " "))
		}
		if !strings.Contains(strings.ToLower(err.Error()), r.want) {
			t.Errorf("helm install %s: the refusal does not mention %q: %v", strings.Join(r.args, " "), r.want, err)
		}
		// A failed install leaves a failed release; the documented
		// command is then run again from nothing.
		runHelm(t, env, "uninstall", "shardns", "-n", "kube-system", "--ignore-not-found")
		createKubeadmKubeDNSIfGone(t, cp)
	}
	if _, err := runHelm(t, env, append(install, "--take-ownership", "--force-conflicts")...); err != nil {
		t.Fatal(err)
	}
	svc, err := cp.Client.CoreV1().Services("kube-system").Get(context.Background(), "kube-dns", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if svc.Spec.ClusterIP != kubeDNSIP || fmt.Sprint(svc.Spec.Selector) != "map[k8s-app:kube-dns]" {
		t.Errorf("kube-dns after the install: clusterIP %s, selector %v; want %s and k8s-app=kube-dns", svc.Spec.ClusterIP, svc.Spec.Selector, kubeDNSIP)
	}
	for _, p := range svc.Spec.Ports {
		if p.Name == "metrics" && p.TargetPort.String() != "metrics" {
			t.Errorf("kube-dns's metrics port targets %s, want the named port metrics", p.TargetPort.String())
		}
	}
	if got := svc.Annotations["meta.helm.sh/release-name"]; got != "shardns" {
		t.Errorf("kube-dns is not the release's: meta.helm.sh/release-name %q", got)
	}
}

// createKubeadmKubeDNS again, if a failed install's uninstall took
// kube-dns with it.
func createKubeadmKubeDNSIfGone(t *testing.T, cp *kubeapi.ControlPlane) {
	t.Helper()
	_, err := cp.Client.CoreV1().Services("kube-system").Get(context.Background(), "kube-dns", metav1.GetOptions{})
	if apierrors.IsNotFound(err) {
		createKubeadmKubeDNS(t, cp)
	} else if err != nil {
		t.Fatal(err)
	}
}
