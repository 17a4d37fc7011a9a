package nodetier

// The node-local cache of deploy/overlays/nodelocal on the node, as a
// cluster admin runs it: applied over the running base, pods pointed at
// its link-local address with the kube-dns address second, and its pod
// replaced while they resolve.

import (
	"context"
	"encoding/json"
	"fmt"
	"net"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/miekg/dns"
	appsv1 "k8s.io/api/apps/v1"
	authorizationv1 "k8s.io/api/authorization/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"

	"github.com/shardns/shardns/config"
	"github.com/shardns/shardns/httpapi"
	"github.com/shardns/shardns/integration/harness"
	"github.com/shardns/shardns/integration/kubenode"
)

const (
	nodeLocalOverlay = "../../deploy/overlays/nodelocal"
	// nodeLocalSelector selects the DaemonSet's pods.
	nodeLocalSelector = "app.kubernetes.io/name=shardns-nodelocal"
)

// testNodeLocal applies deploy/overlays/nodelocal over the running base,
// as `kubectl apply -k deploy/overlays/nodelocal` does, into a
// kube-system relabelled for it as deploy/README.md says, and resolves
// from pods whose resolv.conf is what kubelet writes with clusterDNS
// [169.254.20.10, 10.96.0.10]: the answers are the API's and come from
// the node-local process, names it has not cached are asked of their
// owners, and its pod is replaced (as an upgrade does) while a pod
// resolves without a failed or wrong answer. It removes the component
// afterwards, so that the base runs alone again.
func (c *nodeCluster) testNodeLocal(t *testing.T) {
	ctx := context.Background()
	objs := render(t, nodeLocalOverlay)
	var ds appsv1.DaemonSet
	find(t, objs, "DaemonSet", "shardns-nodelocal", &ds)
	text, _, _ := unstructured.NestedString(find(t, objs, "ConfigMap", "shardns-nodelocal-", nil).Object, "data", "shardns.yaml")
	cfg, err := config.Parse([]byte(text))
	if err != nil {
		t.Fatal(err)
	}
	// The address the process listens on and pods are pointed at.
	linkLocal, _, err := net.SplitHostPort(cfg.DNS.Listen[0])
	if err != nil {
		t.Fatal(err)
	}
	_, metricsPort, err := net.SplitHostPort(cfg.HTTP.Listen)
	if err != nil {
		t.Fatal(err)
	}

	// The init container's image as the manifest names it, from the
	// node's busybox (as `kind load docker-image busybox:1.36` would).
	for _, ic := range ds.Spec.Template.Spec.InitContainers {
		c.node.TagImage(t, kubenode.BusyboxImage, ic.Image)
	}
	if c.node.PrepareNodeLocalLink(t) {
		t.Logf("this kernel has no dummy interface driver: %s made as an empty bridge for the init container to use", kubenode.NodeLocalLink)
	}

	// Pod Security: the DaemonSet's pod (host network and ports, uid 0,
	// NET_ADMIN) passes neither baseline (tried with dryRun, as the
	// DaemonSet controller would create it) nor restricted, which
	// ApplyAndResolve set: applied there, the DaemonSet makes no pod and
	// says why. Labelled privileged, as deploy/README.md tells admins,
	// kube-system gets the pod.
	previous := c.podSecurityLevel(t)
	t.Cleanup(func() { c.enforcePodSecurity(t, previous) })
	c.enforcePodSecurity(t, "baseline")
	if err := c.tryDaemonPod(&ds); !refusedByPodSecurity(err) {
		t.Errorf("kube-system enforcing baseline: the DaemonSet's pod got %v, want it refused by Pod Security", err)
	}
	c.enforcePodSecurity(t, "restricted")

	// Names of six namespaces, which the replicas already answer, and
	// the component over the running base.
	names := c.queryFixtures(t, "nl")
	component := componentObjects(t, objs)
	t.Cleanup(func() {
		if t.Failed() {
			c.diagnoseNodeLocal(t)
		}
		c.removeNodeLocal(t, component)
	})
	newApplierFor(t, c.node.RESTConfig(), true).applyAll(t, allowNodeDebug(t, objs))
	if t.Failed() {
		t.FailNow()
	}
	refusal := c.waitPodSecurityRefusal(t)
	t.Logf("kube-system enforcing restricted: %s", refusal)
	c.enforcePodSecurity(t, "privileged")
	start := time.Now()
	pod := c.waitNodeLocal(t, "")
	t.Logf("kube-system enforcing privileged: %s ready after %v", pod.Name, time.Since(start).Round(time.Second))
	// On the host network the pod's address is the node's.
	metrics := net.JoinHostPort(pod.Status.PodIP, metricsPort)
	c.waitNodeLocalRing(t, metrics, pod.Status.PodIP)
	c.checkNodeLocalSecrets(t)
	server := net.JoinHostPort(linkLocal, "53")

	// Asked at its address, it gives the replicas' answers.
	var records []record
	for _, q := range names {
		records = append(records, record{q.name + ".svc.cluster.local", dns.TypeA, q.address})
	}
	c.eventually(t, recordsTimeout, func() error {
		for _, r := range records {
			if err := askRecord(server, r); err != nil {
				return fmt.Errorf("%s: %w", server, err)
			}
		}
		return nil
	})

	// A Service made now is in no cache: the node-local process asks an
	// owner of its zone, a replica, then answers the repeat itself.
	late := c.createService(t, "nl2", "late", "http", 80, nil, false)
	lateRecord := record{"late.nl2.svc.cluster.local", dns.TypeA, late.Spec.ClusterIP}
	c.waitRecords(t, []record{lateRecord})
	before := harness.MustMetrics(t, metrics)
	if err := askRecord(server, lateRecord); err != nil {
		t.Fatalf("%s, a Service made after the node-local process started: %v", server, err)
	}
	after := harness.MustMetrics(t, metrics)
	if d := after.Sum("shardns_cluster_cache_misses_total") - before.Sum("shardns_cluster_cache_misses_total"); d < 1 {
		t.Errorf("a name never asked before: shardns_cluster_cache_misses_total rose by %v, want at least 1", d)
	}
	asked := after.ByLabel("shardns_cluster_owner_dispatches_total", "owner", `result="ok"`)
	askedBefore := before.ByLabel("shardns_cluster_owner_dispatches_total", "owner", `result="ok"`)
	replicas := replicaNames(c.replicaPods(t))
	var owners []string
	for owner, n := range asked {
		if n > askedBefore[owner] {
			owners = append(owners, owner)
		}
	}
	if len(owners) == 0 {
		t.Errorf("a name never asked before: no owner was asked (shardns_cluster_owner_dispatches_total %v)", asked)
	}
	for _, o := range owners {
		if !slices.Contains(replicas, o) {
			t.Errorf("the node-local process asked %q, which is not a replica (%v)", o, replicas)
		}
	}
	if err := askRecord(server, lateRecord); err != nil {
		t.Fatalf("%s, asked again: %v", server, err)
	}
	if d := harness.MustMetrics(t, metrics).Sum("shardns_cluster_cache_hits_total") - after.Sum("shardns_cluster_cache_hits_total"); d < 1 {
		t.Errorf("a name asked twice: shardns_cluster_cache_hits_total rose by %v, want the repeat answered from the cache", d)
	}
	t.Logf("%s asked of %v, then answered from the cache", lateRecord.name, owners)

	// Pods as kubelet makes them with clusterDNS [169.254.20.10,
	// 10.96.0.10] (deploy/README.md): both nameservers, the search path
	// of the pod's namespace and ndots:5.
	const ns = "nl0"
	dnsConfig := &corev1.PodDNSConfig{
		Nameservers: []string{linkLocal, kubenode.ClusterDNS},
		Searches:    []string{ns + ".svc.cluster.local", "svc.cluster.local", "cluster.local"},
		Options:     []corev1.PodDNSConfigOption{{Name: "ndots", Value: harness.Ptr("5")}},
	}
	c.runChecks(t, ns, "nlchecker", []podCheck{
		{"resolv.conf", "cat /etc/resolv.conf", []string{
			"nameserver " + linkLocal, "nameserver " + kubenode.ClusterDNS,
			"search " + ns + ".svc.cluster.local svc.cluster.local cluster.local", "options ndots:5"}},
		{"getent name.namespace", "getent hosts svc.nl1", []string{names[1].address + " svc.nl1.svc.cluster.local"}},
		{"getent a Service made after the DaemonSet", "getent hosts late.nl2", []string{late.Spec.ClusterIP + " late.nl2.svc.cluster.local"}},
		{"getent unknown name", "getent hosts nosuchname || echo not found", []string{"not found"}},
	}, withDNSConfig(dnsConfig))

	// A pod resolving without pause: every answer right, and given by the
	// node-local process (its NOERROR answers grow with the pod's, which
	// they would not if the pod got them from the second nameserver).
	q := c.startQuerier(t, ns, "nlquerier", names, withDNSConfig(dnsConfig))
	c.checkServedByNodeLocal(t, q, metrics, 3*len(names), "through the node-local process")

	// Rolled three times in a row, as `kubectl rollout restart
	// daemonset` does, while a pod whose resolv.conf lists 169.254.20.10
	// alone resolves without pause: not one lookup fails (maxSurge 1,
	// maxUnavailable 0, the address shared and handed over).
	c.testNodeLocalRollouts(t, ns, names, linkLocal, metricsPort)

	// Its pod deleted outright, the path of clusters that roll with
	// maxUnavailable: the pod's glibc turns to 10.96.0.10 while
	// 169.254.20.10 does not answer (the kernel refuses the port), and
	// back once the new pod does. Without the second nameserver an answer fails here. The
	// replicas' count of questions tells how many the pod asked them
	// meanwhile (none come from it while the node-local process
	// answers); the gap between the old process's exit and the new one's
	// start can be shorter than one lookup, so it is only logged.
	asked0 := c.replicaQuestions(t)
	pod = c.waitNodeLocal(t, "")
	if err := c.client().CoreV1().Pods("kube-system").Delete(ctx, pod.Name, metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	start = time.Now()
	replaced := c.waitNodeLocal(t, pod.UID)
	t.Logf("%s deleted, %s ready after %v", pod.Name, replaced.Name, time.Since(start).Round(time.Second))
	q.waitAnswers(t, len(names), "while the node-local pod was replaced")
	t.Logf("while the node-local pod was replaced, the pod asked the replicas %v questions through %s",
		c.replicaQuestions(t)-asked0, kubenode.ClusterDNS)
	c.waitNodeLocalRing(t, metrics, replaced.Status.PodIP)
	c.checkServedByNodeLocal(t, q, metrics, 3*len(names), "through the new node-local pod")
	q.finish(t)

	// The base alone again: kube-system as it was, the component's
	// objects and pod gone, the replicas' ring theirs only.
	c.removeNodeLocal(t, component)
	c.enforcePodSecurity(t, previous)
	c.waitReplicas(t, 3)
}

// podSecurityLevel is the Pod Security level kube-system enforces, ""
// if none.
func (c *nodeCluster) podSecurityLevel(t *testing.T) string {
	t.Helper()
	ns, err := c.client().CoreV1().Namespaces().Get(context.Background(), "kube-system", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	return ns.Labels[podSecurityEnforce]
}

// tryDaemonPod creates a pod of the DaemonSet's template in kube-system
// with dryRun=All and returns the apiserver's refusal, if any. It runs
// under the namespace's default ServiceAccount, since the DaemonSet's
// is not applied yet; Pod Security does not look at it.
func (c *nodeCluster) tryDaemonPod(ds *appsv1.DaemonSet) error {
	pod := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{GenerateName: ds.Name + "-", Namespace: ds.Namespace, Labels: ds.Spec.Template.Labels},
		Spec:       *ds.Spec.Template.Spec.DeepCopy(),
	}
	pod.Spec.ServiceAccountName = ""
	_, err := c.client().CoreV1().Pods(ds.Namespace).Create(context.Background(), pod, metav1.CreateOptions{DryRun: []string{metav1.DryRunAll}})
	return err
}

// refusedByPodSecurity reports whether err is Pod Security admission's
// refusal.
func refusedByPodSecurity(err error) bool {
	return apierrors.IsForbidden(err) && strings.Contains(err.Error(), "violates PodSecurity")
}

// waitPodSecurityRefusal waits until the DaemonSet shardns-nodelocal
// reports that Pod Security refused its pod, as `kubectl describe
// daemonset` shows it, checks that it has no pod, and returns the
// event's message.
func (c *nodeCluster) waitPodSecurityRefusal(t *testing.T) string {
	t.Helper()
	ctx := context.Background()
	var msg string
	c.eventually(t, podTimeout, func() error {
		ds, err := c.client().AppsV1().DaemonSets("kube-system").Get(ctx, "shardns-nodelocal", metav1.GetOptions{})
		if err != nil {
			return err
		}
		events, err := c.client().CoreV1().Events("kube-system").List(ctx, metav1.ListOptions{
			FieldSelector: "involvedObject.kind=DaemonSet,involvedObject.uid=" + string(ds.UID) + ",reason=FailedCreate"})
		if err != nil {
			return err
		}
		for _, e := range events.Items {
			if strings.Contains(e.Message, "violates PodSecurity") {
				msg = e.Message
				return nil
			}
		}
		return fmt.Errorf("DaemonSet shardns-nodelocal: no FailedCreate event from Pod Security yet (%d FailedCreate events)", len(events.Items))
	})
	pods, err := c.client().CoreV1().Pods("kube-system").List(ctx, metav1.ListOptions{LabelSelector: nodeLocalSelector})
	if err != nil {
		t.Fatal(err)
	}
	if len(pods.Items) > 0 {
		t.Fatalf("kube-system enforcing restricted admitted the node-local pod %s", pods.Items[0].Name)
	}
	return msg
}

// componentObjects are the objects of the node-local overlay that the
// base does not create: the component's.
func componentObjects(t *testing.T, overlay []*unstructured.Unstructured) []*unstructured.Unstructured {
	t.Helper()
	base := map[string]bool{}
	for _, o := range render(t, deployDir) {
		base[o.GetKind()+"/"+o.GetNamespace()+"/"+o.GetName()] = true
	}
	var objs []*unstructured.Unstructured
	for _, o := range overlay {
		if !base[o.GetKind()+"/"+o.GetNamespace()+"/"+o.GetName()] {
			objs = append(objs, o)
		}
	}
	return objs
}

// waitNodeLocal waits until the DaemonSet is rolled out on the node and
// its one pod, other than the pod of UID old if given, is ready, and
// returns that pod.
func (c *nodeCluster) waitNodeLocal(t *testing.T, old types.UID) *corev1.Pod {
	t.Helper()
	ctx := context.Background()
	var pod *corev1.Pod
	c.eventually(t, replicasTimeout, func() error {
		ds, err := c.client().AppsV1().DaemonSets("kube-system").Get(ctx, "shardns-nodelocal", metav1.GetOptions{})
		if err != nil {
			return err
		}
		pods, err := c.client().CoreV1().Pods("kube-system").List(ctx, metav1.ListOptions{LabelSelector: nodeLocalSelector})
		if err != nil {
			return err
		}
		var states []string
		for _, p := range pods.Items {
			states = append(states, p.Name+": "+podState(&p))
		}
		st := ds.Status
		if st.ObservedGeneration < ds.Generation || st.DesiredNumberScheduled != 1 || st.UpdatedNumberScheduled != 1 ||
			st.NumberReady != 1 || len(pods.Items) != 1 || pods.Items[0].UID == old || !podReady(&pods.Items[0]) {
			return fmt.Errorf("DaemonSet shardns-nodelocal: %d desired, %d updated, %d ready; pods %v",
				st.DesiredNumberScheduled, st.UpdatedNumberScheduled, st.NumberReady, states)
		}
		pod = &pods.Items[0]
		return nil
	})
	return pod
}

// waitNodeLocalRing waits until the node-local process whose HTTP
// listens on metrics reads the ring from the replicas: it lists every
// replica pod and nothing else, while no replica lists it (it does not
// gossip, and owns nothing).
func (c *nodeCluster) waitNodeLocalRing(t *testing.T, metrics, addr string) {
	t.Helper()
	c.eventually(t, recordsTimeout, func() error {
		// Listed each time: a replica replaced meanwhile has a new address.
		replicas := c.replicaPods(t)
		var ring httpapi.Ring
		resp, err := nodeHTTP.Get("http://" + metrics + "/debug/ring")
		if err != nil {
			return err
		}
		err = json.NewDecoder(resp.Body).Decode(&ring)
		resp.Body.Close()
		if err != nil {
			return err
		}
		var names []string
		for _, m := range ring.Members {
			names = append(names, m.Name)
		}
		slices.Sort(names)
		want := replicaNames(replicas)
		slices.Sort(want)
		if !slices.Equal(names, want) {
			return fmt.Errorf("the node-local process's ring lists %v, want the replicas %v", names, want)
		}
		for _, r := range replicas {
			rr, err := replicaRing(r.Status.PodIP)
			if err != nil {
				return fmt.Errorf("%s: %w", r.Name, err)
			}
			for _, m := range rr.Members {
				if host, _, _ := net.SplitHostPort(m.Remote); host == addr {
					t.Fatalf("%s lists the node-local process at %s as a member: %+v", r.Name, addr, m)
				}
			}
		}
		return nil
	})
}

// checkNodeLocalSecrets asks the API, as `kubectl auth can-i --as` does,
// what the node-local ServiceAccount may read: its credential, never the
// replicas' key.
func (c *nodeCluster) checkNodeLocalSecrets(t *testing.T) {
	t.Helper()
	for secret, want := range map[string]bool{"shardns-gossip": false, "shardns-nodelocal-credential": true} {
		review := &authorizationv1.SubjectAccessReview{Spec: authorizationv1.SubjectAccessReviewSpec{
			User:   "system:serviceaccount:kube-system:shardns-nodelocal",
			Groups: []string{"system:serviceaccounts", "system:serviceaccounts:kube-system", "system:authenticated"},
			ResourceAttributes: &authorizationv1.ResourceAttributes{Namespace: "kube-system", Verb: "get",
				Resource: "secrets", Name: secret}}}
		got, err := c.client().AuthorizationV1().SubjectAccessReviews().Create(context.Background(), review, metav1.CreateOptions{})
		if err != nil {
			t.Fatal(err)
		}
		if got.Status.Allowed != want {
			t.Errorf("the node-local ServiceAccount may get secret %s: %v, want %v", secret, got.Status.Allowed, want)
		}
	}
}

// diagnoseNodeLocal logs what TestNode's diagnose cannot see once the
// component is removed: the end of each node-local pod's log, and the
// members and refusals of each replica's ring.
func (c *nodeCluster) diagnoseNodeLocal(t *testing.T) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	pods, err := c.client().CoreV1().Pods("kube-system").List(ctx, metav1.ListOptions{LabelSelector: nodeLocalSelector})
	if err != nil {
		t.Logf("diagnose: %v", err)
		return
	}
	tailLines := int64(40)
	for _, p := range pods.Items {
		for _, ct := range append(p.Spec.InitContainers, p.Spec.Containers...) {
			b, err := c.client().CoreV1().Pods("kube-system").GetLogs(p.Name, &corev1.PodLogOptions{Container: ct.Name, TailLines: &tailLines}).DoRaw(ctx)
			t.Logf("last lines of %s/%s (%v):\n%s", p.Name, ct.Name, err, b)
		}
	}
	for _, r := range c.replicaPods(t) {
		c.diagnoseReplica(t, ctx, r)
	}
	c.nodeWarnings(t, ctx)
}

// nodeWarnings logs the node's conditions that are not as a healthy node
// has them (pressure of memory, disk or PIDs makes the kubelet evict
// pods) and the cluster's Warning events, to tell a replica evicted or
// killed from one that failed.
func (c *nodeCluster) nodeWarnings(t *testing.T, ctx context.Context) {
	t.Helper()
	nodes, err := c.client().CoreV1().Nodes().List(ctx, metav1.ListOptions{})
	if err != nil {
		t.Logf("diagnose: %v", err)
		return
	}
	for _, n := range nodes.Items {
		for _, cond := range n.Status.Conditions {
			healthy := corev1.ConditionFalse
			if cond.Type == corev1.NodeReady {
				healthy = corev1.ConditionTrue
			}
			if cond.Status != healthy {
				t.Logf("node %s: %s is %s: %s", n.Name, cond.Type, cond.Status, cond.Message)
			}
		}
	}
	events, err := c.client().CoreV1().Events("").List(ctx, metav1.ListOptions{FieldSelector: "type=Warning"})
	if err != nil {
		t.Logf("diagnose: %v", err)
		return
	}
	for _, e := range events.Items[max(0, len(events.Items)-30):] {
		t.Logf("event %s %s/%s: %s: %s (%d times, last %s)", e.InvolvedObject.Kind, e.InvolvedObject.Namespace,
			e.InvolvedObject.Name, e.Reason, e.Message, e.Count, e.LastTimestamp.Format(time.TimeOnly))
	}
}

// replicaWarnings logs what each replica logged above INFO, or about its
// membership and ring, since it started, then diagnoseReplica's view of
// it, to say why an answer failed.
func (c *nodeCluster) replicaWarnings(t *testing.T) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	for _, p := range c.replicaPods(t) {
		b, err := c.client().CoreV1().Pods(p.Namespace).GetLogs(p.Name, &corev1.PodLogOptions{Container: "shardns"}).DoRaw(ctx)
		var lines []string
		for _, line := range strings.Split(string(b), "\n") {
			quiet := strings.Contains(line, `"level":"INFO"`) || strings.Contains(line, `"level":"DEBUG"`)
			if line != "" && (!quiet || strings.Contains(line, "membership") || strings.Contains(line, "ring")) {
				lines = append(lines, line)
			}
		}
		t.Logf("%s logged (%v):\n%s", p.Name, err, strings.Join(lines[max(0, len(lines)-60):], "\n"))
		c.diagnoseReplica(t, ctx, p)
	}
	c.nodeWarnings(t, ctx)
}

// diagnoseReplica logs a replica pod's ring, what its status says, and
// the last lines of a shardns container that restarted, from before its
// restart.
func (c *nodeCluster) diagnoseReplica(t *testing.T, ctx context.Context, p corev1.Pod) {
	t.Helper()
	ring, err := replicaRing(p.Status.PodIP)
	t.Logf("ring of %s (%v): members %+v, rejected %+v", p.Name, err, ring.Members, ring.Rejected)
	t.Logf("%s: phase %s (%s %s), IP %q, deleting %v", p.Name, p.Status.Phase, p.Status.Reason, p.Status.Message,
		p.Status.PodIP, p.DeletionTimestamp != nil)
	tailLines := int64(40)
	for _, cs := range p.Status.ContainerStatuses {
		t.Logf("%s/%s: ready %v, restarts %d, state %+v, last state %+v", p.Name, cs.Name, cs.Ready, cs.RestartCount, cs.State, cs.LastTerminationState)
		if cs.RestartCount > 0 {
			b, err := c.client().CoreV1().Pods(p.Namespace).GetLogs(p.Name, &corev1.PodLogOptions{Container: cs.Name, Previous: true, TailLines: &tailLines}).DoRaw(ctx)
			t.Logf("last lines of %s/%s before its restart (%v):\n%s", p.Name, cs.Name, err, b)
		}
	}
}

// removeNodeLocal deletes the component's objects, as `kubectl delete`
// of them does, and waits until the DaemonSet's pods are gone. Objects
// already gone are skipped, so it may run twice.
func (c *nodeCluster) removeNodeLocal(t *testing.T, objs []*unstructured.Unstructured) {
	t.Helper()
	a := newApplierFor(t, c.node.RESTConfig(), true)
	background := metav1.DeletePropagationBackground
	for _, o := range objs {
		r, err := a.resource(o)
		if err != nil {
			t.Fatal(err)
		}
		err = r.Delete(context.Background(), o.GetName(), metav1.DeleteOptions{PropagationPolicy: &background})
		if err != nil && !apierrors.IsNotFound(err) {
			t.Errorf("deleting %s %s/%s: %v", o.GetKind(), o.GetNamespace(), o.GetName(), err)
		}
	}
	c.eventually(t, podTimeout, func() error {
		pods, err := c.client().CoreV1().Pods("kube-system").List(context.Background(), metav1.ListOptions{LabelSelector: nodeLocalSelector})
		if err != nil {
			return err
		}
		if len(pods.Items) > 0 {
			return fmt.Errorf("node-local pod %s still there (%s)", pods.Items[0].Name, podState(&pods.Items[0]))
		}
		return nil
	})
}

// checkServedByNodeLocal waits until the querier has given n more
// answers, every one right, and checks that the node-local process at
// metrics gave them: glibc turns to the second nameserver when the first
// fails (no answer, SERVFAIL, a refused port), so a pod that silently
// resolved through 10.96.0.10, in whole or in part, would leave the
// node-local's count of NOERROR answers behind. getent asks AAAA, then A:
// each answer the querier prints takes two NOERROR answers (the AAAA
// without data, the A) besides the NXDOMAINs of the search path. The
// count is read before the querier's, and one answer in flight is
// allowed for.
func (c *nodeCluster) checkServedByNodeLocal(t *testing.T, q *querier, metrics string, n int, phase string) {
	t.Helper()
	var before harness.MetricSamples
	c.eventually(t, podTimeout, func() error {
		var err error
		before, err = harness.ScrapeMetrics(metrics)
		return err
	})
	first, _ := q.count(t)
	q.seen = first
	q.waitAnswers(t, n, phase)
	after := harness.MustMetrics(t, metrics)
	noerror := after.SumWith("shardns_dns_responses_total", `rcode="NOERROR"`) - before.SumWith("shardns_dns_responses_total", `rcode="NOERROR"`)
	if answers := q.seen - first; noerror < float64(2*(answers-1)) {
		t.Fatalf("%s: the pod got %d answers, the node-local process gave %v NOERROR answers, want two for each: the pod resolved elsewhere; its answers:\n%s",
			phase, answers, noerror, after.Series("shardns_dns_responses_total", "shardns_dns_requests_total"))
	}
	t.Logf("%s: %v NOERROR answers from the node-local process for %d of the pod's", phase, noerror, q.seen-first)
}

// replicaQuestions is how many DNS questions the replicas have been
// asked in all (shardns_dns_requests_total), through kube-dns or at their
// pod addresses; the node-local process asks them over the remote port,
// which this does not count.
func (c *nodeCluster) replicaQuestions(t *testing.T) float64 {
	t.Helper()
	total := 0.0
	for _, p := range c.replicaPods(t) {
		total += harness.MustMetrics(t, net.JoinHostPort(p.Status.PodIP, "8080")).Sum("shardns_dns_requests_total")
	}
	return total
}

func replicaNames(pods []corev1.Pod) []string {
	var names []string
	for _, p := range pods {
		names = append(names, p.Name)
	}
	return names
}
