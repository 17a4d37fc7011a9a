package nodetier

// The Helm chart on the real node: a release takes over the shardns that
// `kubectl apply -k` put there, is upgraded to a new image and a changed
// configuration, and rolled back, while a pod resolves cluster names
// through kube-dns without pause.

import (
	"context"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/miekg/dns"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/yaml"

	"github.com/shardns/shardns/integration/kubenode"
	"github.com/shardns/shardns/internal/testutil"
)

// testHelm starts from the replicas of deploy/ (or of
// overlays/replace-coredns) serving kube-dns and runs what deploy/helm/README.md
// tells a user: `helm install --take-ownership --force-conflicts` with
// the values that describe what runs (so only the configuration changes),
// `helm upgrade` to a new image tag and an inline Corefile with another
// record TTL, and `helm rollback` to the first revision. Each step rolls
// the StatefulSet one pod at a time while a pod resolves names of several
// zones through kube-dns: no lookup may fail, and after each step every
// replica runs the build and answers with the TTL that step asked for.
func (c *nodeCluster) testHelm(t *testing.T) {
	sts := c.statefulSet(t)
	// The values of what runs: the cluster's Corefile if the replicas
	// serve it, and /debug/ring for the test's address, as the node tests
	// give it (allowNodeDebug).
	first := map[string]any{"config": map[string]any{"http": map[string]any{"debug": []string{kubeNodeAddr}}}}
	if slices.Contains(sts.Spec.Template.Spec.Containers[0].Command, "--corefile") {
		first["corefile"] = map[string]any{"source": "cluster"}
	}
	// The upgrade: another build, and a Corefile of the release's own,
	// kubeadm's with ttl 10.
	const version, ttl = "helm-rolled", 10
	image := buildImageVersion(t, fmt.Sprintf("%sshardns-%s-%d", kubenode.ImageDomain, version, os.Getpid()), version)
	c.node.ImportDockerImage(t, image, "shardns:"+version)
	var kubeadm corev1.ConfigMap
	decodeManifest(t, kubeadmCoreDNSConfigMap, &kubeadm)
	corefile := strings.Replace(kubeadm.Data["Corefile"], "ttl 30", fmt.Sprintf("ttl %d", ttl), 1)
	if corefile == kubeadm.Data["Corefile"] {
		t.Fatal("kubeadm's Corefile has no `ttl 30` to change")
	}
	upgrade := map[string]any{
		"config":   first["config"],
		"image":    map[string]any{"tag": version},
		"corefile": map[string]any{"source": "inline", "inline": corefile},
	}

	names := c.queryFixtures(t, "helm")
	q := c.startQuerier(t, "helm0", "querier", names)
	defer func() {
		if t.Failed() {
			c.explainFailure(t)
		}
	}()
	q.waitAnswers(t, 2*len(names), "before helm install")

	steps := []struct {
		what    string
		args    []string
		version string // the build every replica must run after the step
		// After the step a new name's answers have a TTL in (above, atMost]:
		// the step's, or less where a replica that owns no zone cached it
		// counting down, but above the other steps' TTL.
		above, atMost uint32
	}{
		{"helm install", append([]string{"install", "shardns", chartDir, "--take-ownership", "--force-conflicts"}, c.valuesFile(t, first)...),
			buildVersion, ttl, 30},
		{"helm upgrade", append([]string{"upgrade", "shardns", chartDir, "--force-conflicts"}, c.valuesFile(t, upgrade)...),
			version, 0, ttl},
		{"helm rollback", []string{"rollback", "shardns", "1", "--force-conflicts"},
			buildVersion, ttl, 30},
	}
	total := time.Now()
	for i, s := range steps {
		from := c.statefulSet(t).Status.CurrentRevision
		start := time.Now()
		c.helm(t, s.args...)
		c.waitRollout(t, from)
		pods := c.waitReplicas(t, 3)
		t.Logf("%s: rolled out after %v", s.what, time.Since(start).Round(time.Second))
		q.waitAnswers(t, 2*len(names), "after "+s.what)
		c.checkReplicasServe(t, pods, fmt.Sprintf("helmfresh%d", i), s.version, s.above, s.atMost)
	}
	q.finish(t)
	t.Logf("install, upgrade and rollback in %v", time.Since(total).Round(time.Second))
	out := c.helm(t, "history", "shardns")
	if !strings.Contains(out, "Rollback to 1") {
		t.Errorf("helm history shows no rollback:\n%s", out)
	}
}

// checkReplicasServe checks that every replica runs the build version and
// answers for a new Service (in namespace ns, so that no cache held it
// before) with a TTL in (above, atMost].
func (c *nodeCluster) checkReplicasServe(t *testing.T, pods []corev1.Pod, ns, version string, above, atMost uint32) {
	t.Helper()
	c.createNamespace(t, ns)
	svc := c.createService(t, ns, "fresh", "http", 80, nil, false)
	fresh := record{"fresh." + ns + ".svc.cluster.local", dns.TypeA, svc.Spec.ClusterIP}
	c.waitRecords(t, []record{fresh})
	for _, p := range pods {
		if err := checkBuildVersion(p.Status.PodIP, version); err != nil {
			t.Errorf("%s: %v", p.Name, err)
		}
		m, err := testutil.Exchange(net.JoinHostPort(p.Status.PodIP, "53"), "udp", dns.Fqdn(fresh.name), dns.TypeA)
		if err != nil {
			t.Errorf("%s: %v", p.Name, err)
			continue
		}
		if len(m.Answer) == 0 {
			t.Errorf("%s: no answer for %s", p.Name, fresh.name)
		}
		for _, rr := range m.Answer {
			if got := rr.Header().Ttl; got <= above || got > atMost {
				t.Errorf("%s answers %s with TTL %d, want more than %d and at most %d", p.Name, fresh.name, got, above, atMost)
			}
		}
	}
}

// statefulSet reads the replicas' StatefulSet.
func (c *nodeCluster) statefulSet(t *testing.T) *appsv1.StatefulSet {
	t.Helper()
	s, err := c.client().AppsV1().StatefulSets("kube-system").Get(context.Background(), "shardns", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// valuesFile writes values into a file and returns the arguments that
// give it to helm.
func (c *nodeCluster) valuesFile(t *testing.T, values map[string]any) []string {
	t.Helper()
	y, err := yaml.Marshal(values)
	if err != nil {
		t.Fatal(err)
	}
	f, err := os.CreateTemp(t.TempDir(), "values-*.yaml")
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if _, err := f.Write(y); err != nil {
		t.Fatal(err)
	}
	return []string{"-f", filepath.Clean(f.Name())}
}

// helm runs the helm CLI against the node's cluster in kube-system and
// returns its output.
func (c *nodeCluster) helm(t *testing.T, args ...string) string {
	t.Helper()
	args = append(args, "-n", "kube-system", "--kubeconfig", c.node.Kubeconfig)
	out, err := runHelm(t, nil, args...)
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("ran `helm %s`", strings.Join(args[:2], " "))
	return out
}
