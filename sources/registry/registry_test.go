package registry

import (
	"fmt"
	"io/fs"
	"maps"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"

	"sigs.k8s.io/yaml"

	"github.com/shardns/shardns/sources"
)

func TestSpecsAreComplete(t *testing.T) {
	seen := map[string]bool{}
	watchers := 0
	for _, s := range Sources {
		if s.Name == "" || s.Enabled == nil || s.Build == nil {
			t.Errorf("source %q: a spec needs a name, Enabled and Build", s.Name)
		}
		if seen[s.Name] {
			t.Errorf("source %q is registered twice", s.Name)
		}
		seen[s.Name] = true
		if s.Watcher {
			watchers++
		}
		if len(s.Resources) > 0 && len(s.RBAC) == 0 {
			t.Errorf("source %q reads the API and declares no ClusterRole rule", s.Name)
		}
	}
	if watchers > 1 {
		t.Errorf("%d sources are the Watcher: at most one may be", watchers)
	}
}

// clusterRole is the part of a manifest this test reads.
type clusterRole struct {
	Kind     string `json:"kind"`
	Metadata struct {
		Name string `json:"name"`
	} `json:"metadata"`
	Rules []sources.Rule `json:"rules"`
}

// templateLine is a line of a Helm template holding only an action;
// templateAction is an action inside a line.
var (
	templateLine   = regexp.MustCompile(`^\s*\{\{.*\}\}\s*$`)
	templateAction = regexp.MustCompile(`\{\{.*?\}\}`)
)

// replicaRoles reads the ClusterRoles named shardns (the replicas') of
// every manifest and Helm template under deploy/.
func replicaRoles(t *testing.T) map[string]clusterRole {
	t.Helper()
	roles := map[string]clusterRole{}
	root := filepath.Join("..", "..", "deploy")
	err := filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() || !strings.HasSuffix(path, ".yaml") {
			return err
		}
		data, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		var lines []string
		for _, l := range strings.Split(string(data), "\n") {
			if templateLine.MatchString(l) {
				continue
			}
			lines = append(lines, templateAction.ReplaceAllString(l, "templated"))
		}
		for i, doc := range strings.Split(strings.Join(lines, "\n"), "\n---") {
			var r clusterRole
			if err := yaml.Unmarshal([]byte(doc), &r); err != nil {
				continue // not a manifest this test reads (values, notes)
			}
			if r.Kind == "ClusterRole" && r.Metadata.Name == "shardns" {
				roles[fmt.Sprintf("%s (document %d)", path, i+1)] = r
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return roles
}

// grants reports whether one of rules grants every verb of want on every
// resource of want.
func grants(rules []sources.Rule, want sources.Rule) bool {
	for _, g := range want.APIGroups {
		for _, res := range want.Resources {
			for _, v := range want.Verbs {
				if !slices.ContainsFunc(rules, func(r sources.Rule) bool {
					return slices.Contains(r.APIGroups, g) && (slices.Contains(r.Resources, res) || slices.Contains(r.Resources, "*")) &&
						(slices.Contains(r.Verbs, v) || slices.Contains(r.Verbs, "*"))
				}) {
					return false
				}
			}
		}
	}
	return true
}

// The replicas' ClusterRole, in deploy/base and in the Helm chart, grants
// every rule a registered source declares, so a source's needs and what
// an install grants cannot drift apart.
func TestDeployGrantsWhatSourcesNeed(t *testing.T) {
	roles := replicaRoles(t)
	var base, chart bool
	for path := range roles {
		base = base || strings.Contains(path, filepath.Join("deploy", "base"))
		chart = chart || strings.Contains(path, filepath.Join("deploy", "helm"))
	}
	if !base || !chart {
		t.Fatalf("found the replicas' ClusterRole in %v: want deploy/base and deploy/helm", slices.Collect(maps.Keys(roles)))
	}
	for path, role := range roles {
		for _, s := range Sources {
			for _, rule := range s.RBAC {
				if !grants(role.Rules, rule) {
					t.Errorf("%s does not grant source %s %v %v %v", path, s.Name, rule.APIGroups, rule.Resources, rule.Verbs)
				}
			}
		}
	}
}
