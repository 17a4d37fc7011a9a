package nodetier

import (
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/miekg/dns"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/shardns/shardns/integration/harness"
	"github.com/shardns/shardns/integration/kubenode"
	"github.com/shardns/shardns/internal/testutil"
)

// What a user does with deploy/ on a real cluster: one node
// (integration/kubenode) with kubelet, containerd, kube-proxy and the
// control plane, built from the same Kubernetes release as the apiserver
// of the other tiers. `kubectl apply -k deploy/` as shipped, pods that
// resolve through kubelet's cluster DNS, scaling and a rolling update
// under queries, processes outside the StatefulSet that try to join, and
// the Helm chart taking over what runs (node_helm_test.go).

// nodeTestEnv gates the tier: it adds a bridge, iptables rules and
// mounts to the host while it runs, which `go test` should not do
// unasked. make integration (so make test) and make node-test set it.
const nodeTestEnv = "SHARDNS_NODE_TEST"

// Bounds of the waits on the node; a 2-core machine starting pods next
// to the control plane is slow, and these only bound polls.
const (
	replicasTimeout = 4 * time.Minute
	podTimeout      = 2 * time.Minute
	recordsTimeout  = time.Minute
)

func TestNode(t *testing.T) {
	if os.Getenv(nodeTestEnv) == "" {
		t.Skipf("set %s=1 to run the one-node cluster tier, as make integration and make node-test do (it needs root and Docker, and changes the host's network while it runs)", nodeTestEnv)
	}
	n := kubenode.Start(t)
	image := buildImage(t, fmt.Sprintf("%sshardns-%d", kubenode.ImageDomain, os.Getpid()))
	// The name deploy/ uses, imagePullPolicy IfNotPresent: as
	// `kind load docker-image shardns:latest` would.
	n.ImportDockerImage(t, image, "shardns:latest")
	c := &nodeCluster{node: n}
	t.Cleanup(func() {
		if t.Failed() {
			c.diagnose(t)
		}
	})
	if !t.Run("ApplyAndResolve", c.testApplyAndResolve) {
		return
	}
	t.Run("ScaleUnderQueries", c.testScaleUnderQueries)
	t.Run("RollingUpdate", c.testRollingUpdate)
	t.Run("StrangersCannotJoin", c.testStrangersCannotJoin)
	t.Run("NodeLocal", c.testNodeLocal)
	t.Run("NodeLocalClients", c.testNodeLocalClients)
	t.Run("RollBackToCoreDNS", c.testRollBackToCoreDNS)
	t.Run("ReplaceCoreDNS", c.testReplaceCoreDNS)
	t.Run("Helm", c.testHelm)
}

// testApplyAndResolve applies deploy/ as `kubectl apply -k deploy/` does,
// into a kube-system that enforces Pod Security "restricted", waits for
// the replicas, and resolves from a pod with the default
// dnsPolicy: short names, name.namespace, a headless pod's hostname, SRV
// and PTR, through kubelet's clusterDNS and the ndots:5 search path,
// with busybox's nslookup and glibc's getent.
func (c *nodeCluster) testApplyAndResolve(t *testing.T) {
	// kube-system enforces Pod Security "restricted", as a hardened
	// cluster's may: the StatefulSet's pods must pass it to exist.
	ctx := context.Background()
	c.enforcePodSecurity(t, "restricted")
	start := time.Now()
	newApplierFor(t, c.node.RESTConfig(), true).applyAll(t, allowNodeDebug(t, render(t, deployDir)))
	if t.Failed() {
		t.FailNow()
	}
	c.waitReplicas(t, 3)
	t.Logf("deploy/ applied, 3 replicas ready and joined after %v", time.Since(start).Round(time.Second))

	kubeDNS, err := c.client().CoreV1().Services("kube-system").Get(ctx, "kube-dns", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if kubeDNS.Spec.ClusterIP != kubenode.ClusterDNS {
		t.Fatalf("kube-dns got clusterIP %s, but kubelet's clusterDNS (every pod's nameserver) is %s: pods resolve nothing",
			kubeDNS.Spec.ClusterIP, kubenode.ClusterDNS)
	}

	const ns = "dnstest"
	c.createNamespace(t, ns)
	web := c.createService(t, ns, "web", "http", 80, map[string]string{"app": "web"}, false)
	c.createService(t, ns, "hl", "http", 80, map[string]string{"app": "web"}, true)
	alpha := c.runPod(t, ns, "alpha", map[string]string{"app": "web"}, "alpha", "hl", []string{"sleep", "3600"})
	alphaIP := c.waitRunning(t, ns, alpha).Status.PodIP
	alphaFQDN := "alpha.hl." + ns + ".svc.cluster.local"
	webFQDN := "web." + ns + ".svc.cluster.local"

	// The replicas learn of the objects through their watches; wait until
	// every replica answers, so that the pod below sees a settled state.
	c.waitRecords(t, []record{
		{webFQDN, dns.TypeA, web.Spec.ClusterIP},
		{alphaFQDN, dns.TypeA, alphaIP},
		{"_http._tcp.web." + ns + ".svc.cluster.local", dns.TypeSRV, "0 100 80 " + webFQDN + "."},
		{"_http._tcp.hl." + ns + ".svc.cluster.local", dns.TypeSRV, "0 100 80 " + alphaFQDN + "."},
		{harness.ReverseName(alphaIP), dns.TypePTR, alphaFQDN + "."},
		{harness.ReverseName(web.Spec.ClusterIP), dns.TypePTR, webFQDN + "."},
	})

	// busybox's nslookup tries the search path only for names without a
	// dot; glibc (getent, as most programs resolve) applies ndots:5 to
	// every name. So the search path of dotted names is checked with
	// getent, and nslookup asks them in full.
	checks := []podCheck{
		{"resolv.conf", "cat /etc/resolv.conf", []string{
			"nameserver " + kubenode.ClusterDNS, "search " + ns + ".svc.cluster.local svc.cluster.local cluster.local", "options ndots:5"}},
		{"short name", "nslookup web", []string{"Name: " + webFQDN, "Address: " + web.Spec.ClusterIP}},
		{"getent short name", "getent hosts web", []string{web.Spec.ClusterIP + " " + webFQDN}},
		{"getent name.namespace", "getent hosts web." + ns, []string{web.Spec.ClusterIP + " " + webFQDN}},
		{"getent kubernetes.default", "getent hosts kubernetes.default", []string{"10.96.0.1 kubernetes.default.svc.cluster.local"}},
		{"getent headless pod hostname", "getent hosts alpha.hl", []string{alphaIP + " " + alphaFQDN}},
		{"getent PTR of a ClusterIP", "getent hosts " + web.Spec.ClusterIP, []string{web.Spec.ClusterIP + " " + webFQDN}},
		{"getent unknown name", "getent hosts nosuchname || echo not found", []string{"not found"}},
		{"name.namespace in full", "nslookup " + webFQDN, []string{"Name: " + webFQDN, "Address: " + web.Spec.ClusterIP}},
		{"headless pod hostname in full", "nslookup " + alphaFQDN, []string{"Name: " + alphaFQDN, "Address: " + alphaIP}},
		{"SRV", "nslookup -type=SRV _http._tcp." + webFQDN, []string{"service = 0 100 80 " + webFQDN}},
		{"SRV of a headless Service", "nslookup -type=SRV _http._tcp.hl." + ns + ".svc.cluster.local", []string{"service = 0 100 80 " + alphaFQDN}},
		// alpha is an endpoint of both Services: a PTR for each, as
		// CoreDNS answers (the hostname under hl, the dashed address
		// under web).
		{"PTR of a pod", "nslookup " + alphaIP, []string{"name = " + alphaFQDN, "name = " + strings.ReplaceAll(alphaIP, ".", "-") + "." + webFQDN}},
		{"PTR of a ClusterIP", "nslookup " + web.Spec.ClusterIP, []string{"name = " + webFQDN}},
	}
	c.runChecks(t, ns, "checker", checks)
}

// podCheck is a command run in a busybox pod and the lines its output
// must hold: each wanted line is a whole line or the end of one after a
// blank (nslookup prints "5.0.244.10.in-addr.arpa<tab>name = ..."), with
// runs of blanks compared as one space.
type podCheck struct {
	what, command string
	want          []string
}

// runChecks runs every check in one pod, with the default dnsPolicy
// unless opts change it, and reports each one whose output lacks a
// wanted line.
func (c *nodeCluster) runChecks(t *testing.T, ns, name string, checks []podCheck, opts ...podOption) {
	t.Helper()
	var script strings.Builder
	for i, ck := range checks {
		fmt.Fprintf(&script, "echo '### %d'\n%s 2>&1\necho \"### rc=$?\"\n", i, ck.command)
	}
	out := c.runToCompletion(t, ns, name, script.String(), opts...)
	sections := splitSections(out)
	for i, ck := range checks {
		got, ok := sections[i]
		if !ok {
			t.Errorf("%s (%s): no output; the pod printed:\n%s", ck.what, ck.command, out)
			continue
		}
		for _, w := range ck.want {
			if !hasLine(got, w) {
				t.Errorf("%s: `%s` printed no line ending in %q:\n%s", ck.what, ck.command, w, got)
			}
		}
	}
}

var (
	blanks     = regexp.MustCompile(`[ \t]+`)
	sectionsRE = regexp.MustCompile(`(?m)^### (\d+)\n((?s:.*?))^### rc=\d+$`)
)

// hasLine reports whether out has a line that is want or ends in a blank
// and want.
func hasLine(out, want string) bool {
	for _, l := range strings.Split(out, "\n") {
		l = blanks.ReplaceAllString(strings.TrimSpace(l), " ")
		if l == want || strings.HasSuffix(l, " "+want) {
			return true
		}
	}
	return false
}

// splitSections cuts runChecks's output at its markers.
func splitSections(out string) map[int]string {
	s := map[int]string{}
	for _, m := range sectionsRE.FindAllStringSubmatch(out, -1) {
		var i int
		fmt.Sscan(m[1], &i)
		s[i] = m[2]
	}
	return s
}

// runToCompletion runs script in a busybox pod with the default
// dnsPolicy and returns its output once it has exited.
func (c *nodeCluster) runToCompletion(t *testing.T, ns, name, script string, opts ...podOption) string {
	t.Helper()
	pod := c.runPod(t, ns, name, nil, "", "", []string{"sh", "-c", script}, opts...)
	var phase corev1.PodPhase
	c.eventually(t, podTimeout, func() error {
		p, err := c.client().CoreV1().Pods(ns).Get(context.Background(), pod, metav1.GetOptions{})
		if err != nil {
			return err
		}
		if phase = p.Status.Phase; phase != corev1.PodSucceeded && phase != corev1.PodFailed {
			return fmt.Errorf("pod %s/%s is %s", ns, pod, phase)
		}
		return nil
	})
	return c.logs(t, ns, pod)
}

// testScaleUnderQueries scales the StatefulSet 3 → 5 → 3, as `kubectl
// scale` does, while a pod resolves names of several namespaces (so of
// several zones and owners) through the kube-dns ClusterIP without pause.
// Every answer is checked: none may fail or be wrong.
func (c *nodeCluster) testScaleUnderQueries(t *testing.T) {
	names := c.queryFixtures(t, "scale")
	q := c.startQuerier(t, "scale0", "querier", names)
	q.waitAnswers(t, 3*len(names), "before scaling")

	c.scale(t, 5)
	c.waitReplicas(t, 5)
	q.waitAnswers(t, 5*len(names), "after scaling to 5")

	c.scale(t, 3)
	c.waitReplicas(t, 3)
	q.waitAnswers(t, 5*len(names), "after scaling back to 3")
	q.finish(t)
}

// testRollingUpdate rolls the replicas to a new image tag and a changed
// configuration the way a user does: an overlay of deploy/ that sets the
// image tag and merges a new shardns.yaml into the generated ConfigMap
// (whose new hash-suffixed name changes the pod template), applied with
// `kubectl apply -k`. The StatefulSet replaces its pods one at a time while
// a pod resolves without pause: no answer may fail or be wrong, and then
// every replica runs the new build and answers with the new settings.
// Applying deploy/ again rolls them back.
func (c *nodeCluster) testRollingUpdate(t *testing.T) {
	names := c.queryFixtures(t, "roll")
	q := c.startQuerier(t, "roll0", "querier", names)
	defer func() {
		if t.Failed() {
			c.explainFailure(t)
		}
	}()
	q.waitAnswers(t, 3*len(names), "before the update")
	ctx := context.Background()
	before, err := c.client().AppsV1().StatefulSets("kube-system").Get(ctx, "shardns", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}

	// The new image: the same source built as another version, so that
	// the binary itself tells which build a replica runs.
	const version = "rolled"
	image := buildImageVersion(t, fmt.Sprintf("%sshardns-%s-%d", kubenode.ImageDomain, version, os.Getpid()), version)
	c.node.ImportDockerImage(t, image, "shardns:"+version)

	// The new configuration: deploy/'s shardns.yaml with another record TTL,
	// a change every answer shows.
	const ttl = 10
	base, err := os.ReadFile(deployDir + "/base/shardns.yaml")
	if err != nil {
		t.Fatal(err)
	}
	changed := strings.Replace(string(base), "\n  ttl: 30\n", fmt.Sprintf("\n  ttl: %d\n", ttl), 1)
	if changed == string(base) {
		t.Fatal("deploy/base/shardns.yaml has no `kubernetes.ttl: 30` line to change")
	}
	overlay := t.TempDir()
	// kustomize takes a relative path only, as an overlay in its own
	// folder beside deploy/ would have.
	abs, err := filepath.Abs(deployDir)
	if err != nil {
		t.Fatal(err)
	}
	deploy, err := filepath.Rel(overlay, abs)
	if err != nil {
		t.Fatal(err)
	}
	kustomization := fmt.Sprintf(`apiVersion: kustomize.config.k8s.io/v1beta1
kind: Kustomization
namespace: kube-system
resources:
  - %s
images:
  - name: shardns
    newTag: %s
configMapGenerator:
  - name: shardns
    behavior: merge
    files:
      - shardns.yaml
`, deploy, version)
	for name, content := range map[string]string{"kustomization.yaml": kustomization, "shardns.yaml": changed} {
		if err := os.WriteFile(filepath.Join(overlay, name), []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	start := time.Now()
	newApplierFor(t, c.node.RESTConfig(), true).applyAll(t, allowNodeDebug(t, render(t, overlay)))
	if t.Failed() {
		t.FailNow()
	}
	c.waitRollout(t, before.Status.CurrentRevision)
	t.Logf("rolling update done after %v", time.Since(start).Round(time.Second))
	pods := c.waitReplicas(t, 3)
	q.waitAnswers(t, 5*len(names), "after the update")
	q.finish(t)

	// A name no replica has answered yet, so that no cache holds it: its
	// first answer carries the configured TTL.
	svc := c.createService(t, "roll0", "fresh", "http", 80, nil, false)
	fresh := record{"fresh.roll0.svc.cluster.local", dns.TypeA, svc.Spec.ClusterIP}
	c.waitRecords(t, []record{fresh})
	for _, p := range pods {
		if img := p.Spec.Containers[0].Image; img != "shardns:"+version {
			t.Errorf("%s runs image %s, want shardns:%s", p.Name, img, version)
		}
		if err := checkBuildVersion(p.Status.PodIP, version); err != nil {
			t.Errorf("%s: %v", p.Name, err)
		}
		m, err := testutil.Exchange(net.JoinHostPort(p.Status.PodIP, "53"), "udp", dns.Fqdn(fresh.name), dns.TypeA)
		if err != nil {
			t.Errorf("%s: %v", p.Name, err)
			continue
		}
		for _, rr := range m.Answer {
			if got := rr.Header().Ttl; got > ttl {
				t.Errorf("%s answers %s with TTL %d, want at most the new kubernetes.ttl %d", p.Name, fresh.name, got, ttl)
			}
		}
	}

	// And back to deploy/ as shipped, as `kubectl apply -k deploy/` does
	// after a bad update, so that the later subtests start from there
	// (applying an overlay of deploy/ would roll the replicas again).
	updated, err := c.client().AppsV1().StatefulSets("kube-system").Get(ctx, "shardns", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	// An answer that failed above must not skip the wait: the subtests
	// after this one would run during the rollback.
	start = time.Now()
	failedBefore := t.Failed()
	newApplierFor(t, c.node.RESTConfig(), true).applyAll(t, allowNodeDebug(t, render(t, deployDir)))
	if t.Failed() && !failedBefore {
		t.FailNow() // deploy/ itself was refused
	}
	c.waitRollout(t, updated.Status.CurrentRevision)
	t.Logf("rolled back to deploy/ after %v", time.Since(start).Round(time.Second))
	for _, p := range c.waitReplicas(t, 3) {
		if err := checkBuildVersion(p.Status.PodIP, buildVersion); err != nil {
			t.Errorf("%s: %v", p.Name, err)
		}
	}
}

// waitRollout waits until the StatefulSet has left revision from and
// every replica runs the new one, ready.
func (c *nodeCluster) waitRollout(t *testing.T, from string) {
	t.Helper()
	c.eventually(t, replicasTimeout, func() error {
		s, err := c.client().AppsV1().StatefulSets("kube-system").Get(context.Background(), "shardns", metav1.GetOptions{})
		if err != nil {
			return err
		}
		st := s.Status
		if st.ObservedGeneration < s.Generation || st.UpdateRevision == from ||
			st.CurrentRevision != st.UpdateRevision || st.UpdatedReplicas != *s.Spec.Replicas || st.ReadyReplicas != *s.Spec.Replicas {
			return fmt.Errorf("rollout: revision %s → %s, %d updated, %d ready", st.CurrentRevision, st.UpdateRevision, st.UpdatedReplicas, st.ReadyReplicas)
		}
		return nil
	})
}

// buildVersionRE finds the version label of shardns_build_info.
var buildVersionRE = regexp.MustCompile(`(?m)^shardns_build_info\{[^}]*version="([^"]*)"`)

// checkBuildVersion reads the replica's /metrics and checks the version
// its binary reports.
func checkBuildVersion(podIP, want string) error {
	resp, err := http.Get("http://" + net.JoinHostPort(podIP, "8080") + "/metrics")
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		return err
	}
	m := buildVersionRE.FindSubmatch(body)
	if m == nil {
		return fmt.Errorf("/metrics has no shardns_build_info")
	}
	if string(m[1]) != want {
		return fmt.Errorf("runs shardns %s, want %s", m[1], want)
	}
	return nil
}

// testStrangersCannotJoin runs shardns outside the StatefulSet with
// everything a replica has but membership of the peers Service: the same
// image, pod spec and configuration, the replicas' RBAC and read access to
// the gossip key. One runs in another namespace labelled as a replica, one
// in kube-system under the replicas' own ServiceAccount but not selected
// by shardns-peers. The replicas must refuse both and never list them.
func (c *nodeCluster) testStrangersCannotJoin(t *testing.T) {
	ctx := context.Background()
	sts, err := c.client().AppsV1().StatefulSets("kube-system").Get(ctx, "shardns", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	const ns = "intruder"
	c.createNamespace(t, ns)
	c.grantReplicaRights(t, ns)
	intruder := strangerPod(sts, ns, "shardns-intruder", sts.Spec.Template.Labels)
	stranger := strangerPod(sts, "kube-system", "shardns-stranger", map[string]string{"app.kubernetes.io/name": "shardns-stranger"})
	strangers := map[string]string{} // pod IP → name
	for _, p := range []*corev1.Pod{intruder, stranger} {
		if _, err := c.client().CoreV1().Pods(p.Namespace).Create(ctx, p, metav1.CreateOptions{}); err != nil {
			t.Fatalf("creating %s/%s: %v", p.Namespace, p.Name, err)
		}
	}
	for _, p := range []*corev1.Pod{intruder, stranger} {
		strangers[c.waitRunning(t, p.Namespace, p.Name).Status.PodIP] = p.Namespace + "/" + p.Name
	}

	// Each poll checks that no replica lists a stranger as a member. The
	// strangers try again (their rejoin loop): wait until each has been
	// refused, then until each has been refused again, so that the
	// refusal is seen to last.
	replicas := c.replicaPods(t)
	reasons := map[string][]string{}
	var first map[string]uint64
	c.eventually(t, 2*time.Minute, func() error {
		refused, err := refusals(t, replicas, strangers, reasons, intruder.Name, stranger.Name)
		if err != nil {
			return err
		}
		if len(refused) < len(strangers) {
			return fmt.Errorf("refusals seen: %v; want one of each of %v", refused, strangers)
		}
		first = refused
		return nil
	})
	// A refused stranger tries again when it finds the replicas gone
	// (its probes go unanswered) or at its rejoin interval: 2 to 60
	// seconds here, longer on a loaded machine.
	c.eventually(t, 4*time.Minute, func() error {
		refused, err := refusals(t, replicas, strangers, reasons, intruder.Name, stranger.Name)
		if err != nil {
			return err
		}
		for who, n := range first {
			if refused[who] <= n {
				return fmt.Errorf("%s refused %d times, no new attempt refused since", who, refused[who])
			}
		}
		first = refused
		return nil
	})
	for who, n := range first {
		slices.Sort(reasons[who])
		t.Logf("%s: refused %d times (reasons %v), never a member", who, n, slices.Compact(reasons[who]))
	}
	c.waitReplicas(t, 3)
}

// refusals reads every replica's /debug/ring, fails t if one lists a
// stranger (by address or name) as a member, and returns how many times
// the replicas refused each stranger, by who (namespace/name).
// The reasons given are appended to reasons.
func refusals(t *testing.T, replicas []corev1.Pod, strangers map[string]string, reasons map[string][]string, names ...string) (map[string]uint64, error) {
	t.Helper()
	refused := map[string]uint64{}
	for _, r := range replicas {
		ring, err := replicaRing(r.Status.PodIP)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", r.Name, err)
		}
		for _, m := range ring.Members {
			host, _, _ := strings.Cut(m.Remote, ":")
			if who, ok := strangers[host]; ok || slices.Contains(names, m.Name) {
				t.Fatalf("%s lists a stranger as a member: %+v (%s)", r.Name, m, who)
			}
		}
		for _, rej := range ring.Rejected {
			if who, ok := strangers[rej.Addr]; ok {
				refused[who] += rej.Count
				reasons[who] = append(reasons[who], rej.Reason)
			}
		}
	}
	return refused, nil
}
