package nodetier

// The way back and forth between CoreDNS and shardns on the node, as
// deploy/overlays/replace-coredns/README.md tells a user: CoreDNS installed
// as kubeadm installs it, the rollback to it, and the migration to shardns,
// each while a pod resolves without pause.

import (
	"bufio"
	"context"
	"fmt"
	"os"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/miekg/dns"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/discovery"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/rest"

	"github.com/shardns/shardns/integration/kubenode"
)

// replaceCoreDNSReadme is the migration and rollback a user follows.
const replaceCoreDNSReadme = replaceCoreDNS + "/README.md"

// testRollBackToCoreDNS starts from shardns serving kube-dns, with CoreDNS
// installed as kubeadm installs it and scaled to zero, as step 4 of the
// migration leaves a cluster. It runs the README's rollback commands, read
// from the README, while a pod resolves without pause: no answer may fail
// or be wrong, kube-dns stays the same Service at the same address, its
// endpoints end up being the CoreDNS pods only, and nothing of shardns is
// left in the cluster.
func (c *nodeCluster) testRollBackToCoreDNS(t *testing.T) {
	c.kubeadmPodSecurity(t)
	c.waitReplicas(t, 3)
	kubeDNS := c.kubeDNSService(t)
	c.installCoreDNS(t, 0)

	names := c.queryFixtures(t, "back")
	q := c.startQuerier(t, "back0", "querier", names)
	q.waitAnswers(t, 2*len(names), "shardns alone")

	start := time.Now()
	c.rollBack(t, func(cmd string) {
		q.waitAnswers(t, len(names), "after `"+cmd+"`")
	})
	t.Logf("rollback done after %v", time.Since(start).Round(time.Second))

	c.waitKubeDNSEndpoints(t, "coredns-", nil)
	c.checkKubeDNSKept(t, kubeDNS)
	c.eventually(t, podTimeout, func() error {
		if left := c.shardnsLeftovers(t); len(left) > 0 {
			return fmt.Errorf("the rollback left %s", strings.Join(left, ", "))
		}
		return nil
	})
	q.waitAnswers(t, 2*len(names), "CoreDNS alone")
	q.finish(t)
}

// testReplaceCoreDNS starts from a cluster that CoreDNS serves, kube-dns
// being the Service kubeadm writes, and follows the README's steps while
// a pod resolves without pause: the address of step 1 is the overlay's,
// step 2 applies the overlay (server-side, with --force-conflicts as the
// README says) and waits for the replicas, step 3 sees CoreDNS and shardns
// answer side by side, step 4 scales CoreDNS to zero. No answer may fail
// or be wrong, kube-dns keeps its address, and at the end its endpoints
// are the replicas only and pods resolve through it. The cluster is left
// with shardns serving and kube-system enforcing Pod Security
// "restricted" again.
func (c *nodeCluster) testReplaceCoreDNS(t *testing.T) {
	c.kubeadmPodSecurity(t)
	c.serveWithCoreDNS(t)
	c.kubeadmKubeDNS(t)
	kubeDNS := c.kubeDNSService(t)
	ctx := context.Background()

	names := c.queryFixtures(t, "repl")
	q := c.startQuerier(t, "repl0", "querier", names)
	q.waitAnswers(t, 2*len(names), "CoreDNS alone")
	// Prometheus scrapes kube-dns:9153, as scrape configurations and
	// ServiceMonitors of a CoreDNS cluster have it.
	c.runChecks(t, "repl0", "scrape-coredns", []podCheck{
		{"kube-dns:9153/metrics", scrapeCommand(kubeDNS.Spec.ClusterIP, "coredns_build_info"), []string{"coredns_build_info"}},
	})
	// The cluster's coredns-custom, as AKS and k3s clusters have it, and
	// the import of its overrides in the Corefile, as theirs has it: the
	// replicas will read both. (CoreDNS's Deployment here, as kubeadm's,
	// does not mount coredns-custom: its import matches nothing.)
	fqdn1 := names[1].name + ".svc.cluster.local"
	alias := "alias." + strings.TrimPrefix(fqdn1, "svc.")
	c.createCoreDNSCustom(t, map[string]string{
		"alias.override": fmt.Sprintf("rewrite name exact %s %s answer auto\n", alias, fqdn1),
	})
	c.importCoreDNSCustom(t)

	// Step 1: the address the overlay sets is the one kube-dns has.
	objs := render(t, replaceCoreDNS)
	var rendered corev1.Service
	find(t, objs, "Service", "kube-dns", &rendered)
	if rendered.Spec.ClusterIP != kubeDNS.Spec.ClusterIP {
		t.Fatalf("the overlay sets kube-dns clusterIP %s, the cluster's is %s", rendered.Spec.ClusterIP, kubeDNS.Spec.ClusterIP)
	}

	// Step 2: apply, then `rollout status statefulset shardns`.
	start := time.Now()
	newApplierFor(t, c.node.RESTConfig(), true).applyAll(t, allowNodeDebug(t, objs))
	if t.Failed() {
		t.FailNow()
	}
	c.waitReplicas(t, 3)
	t.Logf("overlay applied, 3 replicas ready after %v", time.Since(start).Round(time.Second))
	c.checkKubeDNSKept(t, kubeDNS)
	q.waitAnswers(t, len(names), "replicas joined")

	// Step 3: both answer. kube-dns's metrics port, now named, reaches
	// each server's own: 9153 in CoreDNS pods, 8080 in shardns pods.
	c.waitKubeDNSEndpoints(t, "", map[string]int32{"coredns-": 9153, "shardns-": 8080})
	records := make([]record, len(names))
	for i, n := range names {
		records[i] = record{n.name + ".svc.cluster.local", dns.TypeA, n.address}
	}
	both := c.dnsPods(t)
	c.waitRecordsAt(t, both, records)
	t.Logf("side by side: %d pods behind kube-dns answer", len(both))
	c.dnsCheck(t, "repl0", "dnscheck")
	q.waitAnswers(t, len(names), "side by side")

	// Step 4: retire CoreDNS, keeping its Deployment for a rollback.
	c.scaleDeployment(t, "kube-system", "coredns", 0)
	c.waitKubeDNSEndpoints(t, "shardns-", nil)
	c.eventually(t, podTimeout, func() error {
		pods, err := c.client().CoreV1().Pods("kube-system").List(ctx, metav1.ListOptions{LabelSelector: "k8s-app=kube-dns"})
		if err != nil {
			return err
		}
		for _, p := range pods.Items {
			if strings.HasPrefix(p.Name, "coredns-") {
				return fmt.Errorf("CoreDNS pod %s is still there (%s)", p.Name, podState(&p))
			}
		}
		return nil
	})
	// In about every other run, one lookup of thousands failed within
	// 3 s of the CoreDNS pods' network going away (once two, in the same
	// second), and the replicas logged no failed query: most likely
	// lookups that connection tracking still sent to a CoreDNS pod's
	// address, which no replica saw. One such incident from the scale-down
	// until 10 s after the pods are gone is excused; every other phase
	// allows none. The phase after the window is checked in full.
	gone := time.Now()
	q.excuseUntil(gone.Add(10*time.Second), 1, "CoreDNS pods exiting")
	c.dnsCheck(t, "repl0", "dnscheck-shardns")
	q.waitAnswers(t, 2*len(names), "shardns alone")
	// Answers after the window, which excuse nothing.
	c.eventually(t, podTimeout, func() error {
		if time.Now().Before(gone.Add(10 * time.Second)) {
			return fmt.Errorf("the excused window is open")
		}
		return nil
	})
	q.waitAnswers(t, 2*len(names), "shardns alone, after the window")
	q.finish(t)
	c.checkKubeDNSKept(t, kubeDNS)

	// Pods resolve through kube-dns, now shardns, as in ApplyAndResolve;
	// the replicas serve the cluster's own Corefile and its coredns-custom
	// override; kube-dns:9153 is scraped as before.
	fqdn := fqdn1
	c.runChecks(t, "repl0", "checker", []podCheck{
		{"getent name.namespace", "getent hosts " + names[1].name, []string{names[1].address + " " + fqdn}},
		{"the coredns-custom override", "getent hosts " + alias, []string{names[1].address + " " + alias}},
		{"kube-dns:9153/metrics", scrapeCommand(kubeDNS.Spec.ClusterIP, "shardns_zones_served"), []string{"shardns_zones_served"}},
		{"getent kubernetes.default", "getent hosts kubernetes.default", []string{"10.96.0.1 kubernetes.default.svc.cluster.local"}},
		{"name.namespace in full", "nslookup " + fqdn, []string{"Name: " + fqdn, "Address: " + names[1].address}},
		{"getent unknown name", "getent hosts nosuchname || echo not found", []string{"not found"}},
	})

	// kube-system as ApplyAndResolve left it: enforcing "restricted", which
	// the replicas' pods pass (CoreDNS's, at zero, has none left).
	c.enforcePodSecurity(t, "restricted")
	sts, err := c.client().AppsV1().StatefulSets("kube-system").Get(ctx, "shardns", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "shardns-restricted", Namespace: "kube-system", Labels: sts.Spec.Template.Labels},
		Spec: sts.Spec.Template.Spec}
	if _, err := c.client().CoreV1().Pods("kube-system").Create(ctx, pod, metav1.CreateOptions{DryRun: []string{metav1.DryRunAll}}); err != nil {
		t.Errorf("a replica's pod is refused by kube-system's Pod Security: %v", err)
	}
}

// scrapeCommand fetches /metrics from port 9153 of ip, as a Prometheus
// scrape of kube-dns does, and prints metric's name if it is there.
func scrapeCommand(ip, metric string) string {
	return fmt.Sprintf("wget -qO- http://%s:9153/metrics | grep -o -m1 '^%s'", ip, metric)
}

// createCoreDNSCustom creates kube-system's coredns-custom ConfigMap with
// files, as AKS and k3s users write it.
func (c *nodeCluster) createCoreDNSCustom(t *testing.T, files map[string]string) {
	t.Helper()
	cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "coredns-custom", Namespace: "kube-system"}, Data: files}
	if _, err := c.client().CoreV1().ConfigMaps("kube-system").Create(context.Background(), cm, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
}

// importCoreDNSCustom adds AKS's `import custom/*.override` to the main
// block of kube-system's coredns ConfigMap.
func (c *nodeCluster) importCoreDNSCustom(t *testing.T) {
	t.Helper()
	ctx := context.Background()
	cms := c.client().CoreV1().ConfigMaps("kube-system")
	cm, err := cms.Get(ctx, "coredns", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	core := cm.Data["Corefile"]
	end := strings.LastIndex(core, "}")
	if end < 0 {
		t.Fatalf("the coredns ConfigMap's Corefile has no block:\n%s", core)
	}
	cm.Data["Corefile"] = core[:end] + "    import custom/*.override\n" + core[end:]
	if _, err := cms.Update(ctx, cm, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
}

// kubeadmPodSecurity takes the Pod Security label of ApplyAndResolve off
// kube-system: kubeadm sets none there, so the cluster's default,
// "privileged", applies. kubeadm's CoreDNS pod does not pass
// "restricted" (it runs as root, without runAsNonRoot or a seccomp
// profile), and that is the pod a cluster has.
func (c *nodeCluster) kubeadmPodSecurity(t *testing.T) {
	t.Helper()
	c.enforcePodSecurity(t, "")
}

// serveWithCoreDNS brings the cluster to CoreDNS serving kube-dns alone.
// After RollBackToCoreDNS it is there already; run right after
// ApplyAndResolve, it installs CoreDNS and rolls back as the README says.
func (c *nodeCluster) serveWithCoreDNS(t *testing.T) {
	t.Helper()
	ctx := context.Background()
	_, err := c.client().AppsV1().StatefulSets("kube-system").Get(ctx, "shardns", metav1.GetOptions{})
	switch {
	case apierrors.IsNotFound(err):
	case err != nil:
		t.Fatal(err)
	default:
		if _, err := c.client().AppsV1().Deployments("kube-system").Get(ctx, "coredns", metav1.GetOptions{}); apierrors.IsNotFound(err) {
			c.installCoreDNS(t, 0)
		} else if err != nil {
			t.Fatal(err)
		}
		c.rollBack(t, func(string) {})
	}
	c.waitKubeDNSEndpoints(t, "coredns-", nil)
}

// rollBack runs the commands of the README's "Rollback" section, in
// order, calling after with each once it has done what kubectl would.
// Before the first that deletes, CoreDNS must be serving beside the
// replicas: the README's "Bring CoreDNS back
// first".
func (c *nodeCluster) rollBack(t *testing.T, after func(cmd string)) {
	t.Helper()
	deleted, both := false, false
	for _, cmd := range readmeCommands(t, "## Rollback") {
		if slices.Contains(cmd, "delete") && !both {
			both = true
			c.waitKubeDNSEndpoints(t, "", map[string]int32{"coredns-": 9153, "shardns-": 8080})
		}
		deleted = deleted || slices.Contains(cmd, "delete")
		c.kubectl(t, cmd)
		after(strings.Join(cmd, " "))
	}
	if !deleted {
		t.Fatal("the README's rollback deletes nothing")
	}
}

// readmeCommands returns the commands of the first sh block after heading
// in the overlay's README, each as its words, without comment lines.
func readmeCommands(t *testing.T, heading string) [][]string {
	t.Helper()
	f, err := os.Open(replaceCoreDNSReadme)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var cmds [][]string
	inSection, inBlock := false, false
	s := bufio.NewScanner(f)
	for s.Scan() {
		l := strings.TrimSpace(s.Text())
		switch {
		case l == heading:
			inSection = true
		case !inSection:
		case !inBlock && l == "```sh":
			inBlock = true
		case inBlock && l == "```":
			return cmds
		case inBlock && l != "" && !strings.HasPrefix(l, "#"):
			cmds = append(cmds, strings.Fields(l))
		}
	}
	t.Fatalf("%s: no sh block after %q", replaceCoreDNSReadme, heading)
	return nil
}

// readmeCommand returns the README's command line that starts with
// prefix, as its words.
func readmeCommand(t *testing.T, prefix string) []string {
	t.Helper()
	b, err := os.ReadFile(replaceCoreDNSReadme)
	if err != nil {
		t.Fatal(err)
	}
	for _, l := range strings.Split(string(b), "\n") {
		if l = strings.TrimSpace(l); strings.HasPrefix(l, prefix) {
			return strings.Fields(l)
		}
	}
	t.Fatalf("%s has no command %q", replaceCoreDNSReadme, prefix)
	return nil
}

// kubectl does what the kubectl command line cmd does, for the commands
// the README's rollback uses: scale, rollout status, and delete by label
// (which waits until what it deleted is gone, as kubectl delete does by
// default). It fails t on any other command, so that a README that
// changes is followed or the test says why not.
func (c *nodeCluster) kubectl(t *testing.T, cmd []string) {
	t.Helper()
	line := strings.Join(cmd, " ")
	if len(cmd) == 0 || cmd[0] != "kubectl" {
		t.Fatalf("the README runs `%s`: not a kubectl command", line)
	}
	ns, selector, replicas := "default", "", -1
	var words []string
	for i := 1; i < len(cmd); i++ {
		a := cmd[i]
		flag, value, hasValue := strings.Cut(a, "=")
		switch flag {
		case "-n", "--namespace", "-l", "--selector", "--replicas":
			if !hasValue {
				if i++; i == len(cmd) {
					t.Fatalf("`%s`: %s has no value", line, a)
				}
				value = cmd[i]
			}
		default:
			if strings.HasPrefix(a, "-") {
				t.Fatalf("the README runs `%s`: this test does not know the flag %s", line, a)
			}
			words = append(words, a)
			continue
		}
		switch flag {
		case "-n", "--namespace":
			ns = value
		case "-l", "--selector":
			selector = value
		case "--replicas":
			n, err := strconv.Atoi(value)
			if err != nil {
				t.Fatalf("`%s`: %v", line, err)
			}
			replicas = n
		}
	}
	switch {
	case len(words) == 3 && words[0] == "scale" && isDeployment(words[1]) && replicas >= 0:
		c.scaleDeployment(t, ns, words[2], int32(replicas))
	case len(words) == 4 && words[0] == "rollout" && words[1] == "status" && isDeployment(words[2]):
		c.rolloutStatus(t, ns, words[3])
	case len(words) == 2 && words[0] == "delete" && selector != "":
		c.deleteByLabel(t, ns, strings.Split(words[1], ","), selector)
	default:
		t.Fatalf("the README runs `%s`, which this test does not know how to do", line)
	}
	t.Logf("ran `%s`", line)
}

func isDeployment(kind string) bool {
	return kind == "deployment" || kind == "deployments" || kind == "deploy"
}

// scaleDeployment sets a Deployment's replicas through its scale
// subresource, as `kubectl scale deployment` does.
func (c *nodeCluster) scaleDeployment(t *testing.T, ns, name string, replicas int32) {
	t.Helper()
	ctx := context.Background()
	c.eventually(t, podTimeout, func() error {
		s, err := c.client().AppsV1().Deployments(ns).GetScale(ctx, name, metav1.GetOptions{})
		if err != nil {
			return err
		}
		s.Spec.Replicas = replicas
		_, err = c.client().AppsV1().Deployments(ns).UpdateScale(ctx, name, s, metav1.UpdateOptions{})
		return err // a conflict with the controller's status update is retried
	})
}

// rolloutStatus waits as `kubectl rollout status deployment` does: every
// replica updated and available, none of an older revision left.
func (c *nodeCluster) rolloutStatus(t *testing.T, ns, name string) {
	t.Helper()
	start := time.Now()
	c.eventually(t, replicasTimeout, func() error {
		d, err := c.client().AppsV1().Deployments(ns).Get(context.Background(), name, metav1.GetOptions{})
		if err != nil {
			return err
		}
		st, want := d.Status, int32(1)
		if d.Spec.Replicas != nil {
			want = *d.Spec.Replicas
		}
		if st.ObservedGeneration < d.Generation || st.UpdatedReplicas < want || st.Replicas > st.UpdatedReplicas || st.AvailableReplicas < st.UpdatedReplicas {
			return fmt.Errorf("deployment %s/%s: %d of %d updated, %d in all, %d available", ns, name, st.UpdatedReplicas, want, st.Replicas, st.AvailableReplicas)
		}
		return nil
	})
	t.Logf("deployment %s/%s rolled out after %v", ns, name, time.Since(start).Round(time.Second))
}

// deleteByLabel deletes the objects of kinds (kubectl's resource names,
// in its order) that selector selects, in ns for namespaced kinds, with
// kubectl's background propagation, then waits until they are gone.
func (c *nodeCluster) deleteByLabel(t *testing.T, ns string, kinds []string, selector string) {
	t.Helper()
	a := newApplierFor(t, c.node.RESTConfig(), true)
	ctx := context.Background()
	type deleted struct {
		r          dynamic.ResourceInterface
		what, name string
		uid        types.UID
	}
	var gone []deleted
	background := metav1.DeletePropagationBackground
	for _, kind := range kinds {
		gvr, err := a.mapper.ResourceFor(schema.GroupVersionResource{Resource: kind})
		if err != nil {
			t.Fatalf("kubectl delete %s: %v", kind, err)
		}
		gvk, err := a.mapper.KindFor(gvr)
		if err != nil {
			t.Fatal(err)
		}
		m, err := a.mapper.RESTMapping(gvk.GroupKind(), gvk.Version)
		if err != nil {
			t.Fatal(err)
		}
		var r dynamic.ResourceInterface = a.dyn.Resource(m.Resource)
		if m.Scope.Name() == meta.RESTScopeNameNamespace {
			r = a.dyn.Resource(m.Resource).Namespace(ns)
		}
		list, err := r.List(ctx, metav1.ListOptions{LabelSelector: selector})
		if err != nil {
			t.Fatal(err)
		}
		for _, o := range list.Items {
			what := gvk.Kind + " " + o.GetName()
			err := r.Delete(ctx, o.GetName(), metav1.DeleteOptions{PropagationPolicy: &background})
			if err != nil && !apierrors.IsNotFound(err) {
				t.Fatalf("deleting %s: %v", what, err)
			}
			t.Logf("deleted %s", what)
			gone = append(gone, deleted{r, what, o.GetName(), o.GetUID()})
		}
	}
	c.eventually(t, podTimeout, func() error {
		for _, d := range gone {
			o, err := d.r.Get(ctx, d.name, metav1.GetOptions{})
			if err == nil && o.GetUID() == d.uid {
				return fmt.Errorf("%s is not gone yet", d.what)
			}
			if err != nil && !apierrors.IsNotFound(err) {
				return err
			}
		}
		return nil
	})
}

// kubeDNSService returns kube-dns and fails t unless it has the address
// kubelet's clusterDNS names.
func (c *nodeCluster) kubeDNSService(t *testing.T) *corev1.Service {
	t.Helper()
	s, err := c.client().CoreV1().Services("kube-system").Get(context.Background(), "kube-dns", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if s.Spec.ClusterIP != kubenode.ClusterDNS {
		t.Fatalf("kube-dns has clusterIP %s, but kubelet's clusterDNS (every pod's nameserver) is %s", s.Spec.ClusterIP, kubenode.ClusterDNS)
	}
	return s
}

// checkKubeDNSKept checks that kube-dns is still the Service it was, at
// the same address: deleted and created again, even at that address,
// its endpoints would be gone for a while.
func (c *nodeCluster) checkKubeDNSKept(t *testing.T, before *corev1.Service) {
	t.Helper()
	now := c.kubeDNSService(t)
	if now.UID != before.UID {
		t.Fatalf("kube-dns was deleted and created again (uid %s, was %s)", now.UID, before.UID)
	}
}

// waitKubeDNSEndpoints waits until kube-dns's EndpointSlices hold the
// ready pods that kube-dns selects and nothing else (no pod terminating or
// not ready), and then, if only is not "", only pods whose names start
// with it, else a pod of each prefix in metrics, whose value is the
// port the slice gives the pod's metrics (the named target port).
func (c *nodeCluster) waitKubeDNSEndpoints(t *testing.T, only string, metrics map[string]int32) {
	t.Helper()
	ctx := context.Background()
	var got []string
	c.eventually(t, replicasTimeout, func() error {
		eps, err := c.client().DiscoveryV1().EndpointSlices("kube-system").List(ctx, metav1.ListOptions{LabelSelector: "kubernetes.io/service-name=kube-dns"})
		if err != nil {
			return err
		}
		got = nil
		seen := map[string]bool{}
		for _, s := range eps.Items {
			port := int32(0)
			for _, p := range s.Ports {
				if p.Name != nil && *p.Name == "metrics" && p.Port != nil {
					port = *p.Port
				}
			}
			for _, e := range s.Endpoints {
				if e.TargetRef == nil {
					return fmt.Errorf("kube-dns endpoint %v is no pod", e.Addresses)
				}
				name := e.TargetRef.Name
				if e.Conditions.Ready == nil || !*e.Conditions.Ready {
					return fmt.Errorf("kube-dns endpoint %s is not ready", name)
				}
				for prefix, want := range metrics {
					if strings.HasPrefix(name, prefix) && port != want {
						return fmt.Errorf("kube-dns's metrics port is %d for %s, want %d", port, name, want)
					}
				}
				got = append(got, name)
				seen[name] = true
			}
		}
		var want []string
		for _, p := range c.dnsPods(t) {
			want = append(want, p.Name)
		}
		slices.Sort(got)
		slices.Sort(want)
		if !slices.Equal(got, want) {
			return fmt.Errorf("kube-dns endpoints %v, want the ready pods it selects %v", got, want)
		}
		for _, name := range got {
			if only != "" && !strings.HasPrefix(name, only) {
				return fmt.Errorf("kube-dns endpoints %v, want only %s* pods", got, only)
			}
		}
		for prefix := range metrics {
			if !slices.ContainsFunc(got, func(n string) bool { return strings.HasPrefix(n, prefix) }) {
				return fmt.Errorf("kube-dns endpoints %v, none of them %s*", got, prefix)
			}
		}
		if len(got) == 0 {
			return fmt.Errorf("kube-dns has no endpoint")
		}
		return nil
	})
	t.Logf("kube-dns endpoints: %v", got)
}

// dnsCheck runs the check of the README's step 3 (its `kubectl run
// dnscheck ... -- COMMAND`) in a busybox pod, and fails t unless it
// printed the address of the name it asks.
func (c *nodeCluster) dnsCheck(t *testing.T, ns, name string) {
	t.Helper()
	cmd := readmeCommand(t, "kubectl run dnscheck")
	i := slices.Index(cmd, "--")
	if i < 0 || i == len(cmd)-1 {
		t.Fatalf("the README's `%s` runs no command", strings.Join(cmd, " "))
	}
	command := strings.Join(cmd[i+1:], " ")
	c.runChecks(t, ns, name, []podCheck{
		{"the README's dnscheck", command, []string{"Address: 10.96.0.1"}},
	})
}

// shardnsLeftovers lists what is left of deploy/ in the cluster: each
// object the overlay makes but kube-dns, and any object of any kind in
// kube-system or cluster-wide that carries the label of shardns's objects
// (pods, controller revisions, endpoint slices the controllers made for
// them), events aside.
func (c *nodeCluster) shardnsLeftovers(t *testing.T) []string {
	t.Helper()
	ctx := context.Background()
	// Listing every kind lists the deprecated ComponentStatus too, whose
	// warning would fill the log at every poll.
	cfg := c.node.RESTConfig()
	cfg.WarningHandler = rest.NoWarnings{}
	a := newApplierFor(t, cfg, true)
	var left []string
	for _, o := range render(t, replaceCoreDNS) {
		if o.GetKind() == "Service" && o.GetName() == "kube-dns" {
			continue
		}
		r, err := a.resource(o)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := r.Get(ctx, o.GetName(), metav1.GetOptions{}); err == nil {
			left = append(left, o.GetKind()+" "+o.GetName())
		} else if !apierrors.IsNotFound(err) {
			t.Fatal(err)
		}
	}
	disco, err := discovery.NewDiscoveryClientForConfig(cfg)
	if err != nil {
		t.Fatal(err)
	}
	lists, err := disco.ServerPreferredResources()
	if err != nil {
		t.Fatal(err)
	}
	for _, l := range lists {
		gv, err := schema.ParseGroupVersion(l.GroupVersion)
		if err != nil {
			t.Fatal(err)
		}
		for _, res := range l.APIResources {
			if strings.Contains(res.Name, "/") || res.Name == "events" || !slices.Contains(res.Verbs, "list") {
				continue
			}
			var r dynamic.ResourceInterface = a.dyn.Resource(gv.WithResource(res.Name))
			if res.Namespaced {
				r = a.dyn.Resource(gv.WithResource(res.Name)).Namespace("kube-system")
			}
			list, err := r.List(ctx, metav1.ListOptions{LabelSelector: replicaSelector})
			if err != nil {
				t.Fatalf("listing %s: %v", res.Name, err)
			}
			for _, o := range list.Items {
				if what := res.Kind + " " + o.GetName(); !slices.Contains(left, what) {
					left = append(left, what)
				}
			}
		}
	}
	return left
}

// The CoreDNS that kubeadm v1.31 installs (its addon phase:
// cmd/kubeadm/app/phases/addons/dns/manifests.go of k8s.io/kubernetes
// v1.31.4), for the cluster domain cluster.local and the control-plane
// taint, with two changes: the image (coreDNSImageOnNode) and the
// Corefile below.
const (
	kubeadmCoreDNSServiceAccount = `
apiVersion: v1
kind: ServiceAccount
metadata:
  name: coredns
  namespace: kube-system
`
	kubeadmCoreDNSClusterRole = `
apiVersion: rbac.authorization.k8s.io/v1
kind: ClusterRole
metadata:
  name: system:coredns
rules:
- apiGroups:
  - ""
  resources:
  - endpoints
  - services
  - pods
  - namespaces
  verbs:
  - list
  - watch
- apiGroups:
  - discovery.k8s.io
  resources:
  - endpointslices
  verbs:
  - list
  - watch
`
	kubeadmCoreDNSClusterRoleBinding = `
apiVersion: rbac.authorization.k8s.io/v1
kind: ClusterRoleBinding
metadata:
  name: system:coredns
roleRef:
  apiGroup: rbac.authorization.k8s.io
  kind: ClusterRole
  name: system:coredns
subjects:
- kind: ServiceAccount
  name: coredns
  namespace: kube-system
`
	// kubeadm's Corefile but for forward and loop. The tests ask only
	// cluster names, and no question of theirs may leave the node for a
	// resolver of the machine's; without forward none can. loop only
	// detects a forward that comes back to CoreDNS, so it goes too.
	kubeadmCoreDNSConfigMap = `
apiVersion: v1
kind: ConfigMap
metadata:
  name: coredns
  namespace: kube-system
data:
  Corefile: |
    .:53 {
        errors
        health {
           lameduck 5s
        }
        ready
        kubernetes cluster.local in-addr.arpa ip6.arpa {
           pods insecure
           fallthrough in-addr.arpa ip6.arpa
           ttl 30
        }
        prometheus :9153
        cache 30
        reload
        loadbalance
    }
`
	// kubeadmCoreDNSDeployment takes the image and the replicas.
	kubeadmCoreDNSDeployment = `
apiVersion: apps/v1
kind: Deployment
metadata:
  name: coredns
  namespace: kube-system
  labels:
    k8s-app: kube-dns
spec:
  replicas: %d
  strategy:
    type: RollingUpdate
    rollingUpdate:
      maxUnavailable: 1
  selector:
    matchLabels:
      k8s-app: kube-dns
  template:
    metadata:
      labels:
        k8s-app: kube-dns
    spec:
      priorityClassName: system-cluster-critical
      serviceAccountName: coredns
      affinity:
        podAntiAffinity:
          preferredDuringSchedulingIgnoredDuringExecution:
          - weight: 100
            podAffinityTerm:
              labelSelector:
                matchExpressions:
                - key: k8s-app
                  operator: In
                  values: ["kube-dns"]
              topologyKey: kubernetes.io/hostname
      tolerations:
      - key: CriticalAddonsOnly
        operator: Exists
      - key: node-role.kubernetes.io/control-plane
        effect: NoSchedule
      nodeSelector:
        kubernetes.io/os: linux
      containers:
      - name: coredns
        image: %s
        imagePullPolicy: IfNotPresent
        resources:
          limits:
            memory: 170Mi
          requests:
            cpu: 100m
            memory: 70Mi
        args: [ "-conf", "/etc/coredns/Corefile" ]
        volumeMounts:
        - name: config-volume
          mountPath: /etc/coredns
          readOnly: true
        ports:
        - containerPort: 53
          name: dns
          protocol: UDP
        - containerPort: 53
          name: dns-tcp
          protocol: TCP
        - containerPort: 9153
          name: metrics
          protocol: TCP
        livenessProbe:
          httpGet:
            path: /health
            port: 8080
            scheme: HTTP
          initialDelaySeconds: 60
          timeoutSeconds: 5
          successThreshold: 1
          failureThreshold: 5
        readinessProbe:
          httpGet:
            path: /ready
            port: 8181
            scheme: HTTP
        securityContext:
          allowPrivilegeEscalation: false
          capabilities:
            add:
            - NET_BIND_SERVICE
            drop:
            - ALL
          readOnlyRootFilesystem: true
      dnsPolicy: Default
      volumes:
        - name: config-volume
          configMap:
            name: coredns
            items:
            - key: Corefile
              path: Corefile
`
	// kubeadmKubeDNSService is kubeadm's kube-dns. The resourceVersion
	// "0" is kubeadm's: it makes its update unconditional.
	kubeadmKubeDNSService = `
apiVersion: v1
kind: Service
metadata:
  labels:
    k8s-app: kube-dns
    kubernetes.io/cluster-service: "true"
    kubernetes.io/name: "CoreDNS"
  name: kube-dns
  namespace: kube-system
  annotations:
    prometheus.io/port: "9153"
    prometheus.io/scrape: "true"
  resourceVersion: "0"
spec:
  clusterIP: %s
  ports:
  - name: dns
    port: 53
    protocol: UDP
    targetPort: 53
  - name: dns-tcp
    port: 53
    protocol: TCP
    targetPort: 53
  - name: metrics
    port: 9153
    protocol: TCP
    targetPort: 9153
  selector:
    k8s-app: kube-dns
`
)
