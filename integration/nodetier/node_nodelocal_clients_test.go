package nodetier

// The node-local process as the directory of its node's clients, on the
// node: replicas that watch no Pod (kubernetes.pods: disabled), the
// node-local DaemonSet with autopath, and a glibc resolver in a pod whose
// resolv.conf is kubelet's, pointed at the node-local address.

import (
	"context"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/miekg/dns"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/shardns/shardns/config"
	"github.com/shardns/shardns/integration/harness"
	"github.com/shardns/shardns/integration/kubenode"
)

// nodeLocalClientsNS is the namespace of the client pod.
const nodeLocalClientsNS = "nlc0"

// testNodeLocalClients applies deploy/overlays/nodelocal through an
// overlay that sets the replicas to kubernetes.pods: disabled and turns
// autopath on in the node-local process, as deploy/components/nodelocal
// tells admins to. Then a pod with kubelet's search path and ndots:5,
// resolving with glibc's getaddrinfo (getent ahosts), gets an external
// name in one question per type and a short name of its namespace right;
// the replicas received no Pod, and the node-local process holds the
// pods of its node and no other. The base is applied again afterwards.
func (c *nodeCluster) testNodeLocalClients(t *testing.T) {
	ctx := context.Background()
	objs := render(t, nodeLocalClientsOverlay(t))
	var ds appsv1.DaemonSet
	find(t, objs, "DaemonSet", "shardns-nodelocal", &ds)
	linkLocal, metricsPort := nodeLocalAddresses(t, objs)
	for _, ic := range ds.Spec.Template.Spec.InitContainers {
		c.node.TagImage(t, kubenode.BusyboxImage, ic.Image)
	}
	c.node.PrepareNodeLocalLink(t)

	sts, err := c.client().AppsV1().StatefulSets("kube-system").Get(ctx, "shardns", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	previous := c.podSecurityLevel(t)
	component := componentObjects(t, objs)
	t.Cleanup(func() {
		if t.Failed() {
			c.diagnoseNodeLocal(t)
		}
		c.restoreBase(t, sts.Status.CurrentRevision)
		c.removeNodeLocal(t, component)
		c.enforcePodSecurity(t, previous)
	})
	c.enforcePodSecurity(t, "privileged")
	newApplierFor(t, c.node.RESTConfig(), true).applyAll(t, allowNodeDebug(t, objs))
	if t.Failed() {
		t.FailNow()
	}
	c.waitRollout(t, sts.Status.CurrentRevision)
	replicas := c.waitReplicas(t, 3)
	pod := c.waitNodeLocal(t, "")
	metrics := net.JoinHostPort(pod.Status.PodIP, metricsPort)
	c.waitNodeLocalRing(t, metrics, pod.Status.PodIP)
	checkNoPodWatched(t, replicas)
	c.createNamespace(t, nodeLocalClientsNS)
	c.checkClientPodsHeld(t, metrics, pod.Spec.NodeName)
	c.checkClientSearches(t, linkLocal, metrics)
}

// nodeLocalClientsOverlay writes an overlay of deploy/overlays/nodelocal
// that merges the replicas' shardns.yaml with kubernetes.pods: disabled
// and the node-local process's with autopath enabled, with the component
// that lets node-local processes read pods, as a user's overlay does, and
// returns its folder.
func nodeLocalClientsOverlay(t *testing.T) string {
	t.Helper()
	replica := editDeployFile(t, "base/shardns.yaml", "\n  pods: insecure ", "\n  pods: disabled ")
	nodeLocal := editDeployFile(t, "components/nodelocal/nodelocal.yaml", "\nlog:\n", "\nautopath:\n  enabled: true\nlog:\n")
	dir := t.TempDir()
	abs, err := filepath.Abs(nodeLocalOverlay)
	if err != nil {
		t.Fatal(err)
	}
	rel, err := filepath.Rel(dir, abs) // kustomize takes relative paths only
	if err != nil {
		t.Fatal(err)
	}
	clients, err := filepath.Abs("../../deploy/components/nodelocal-clients")
	if err != nil {
		t.Fatal(err)
	}
	if clients, err = filepath.Rel(dir, clients); err != nil {
		t.Fatal(err)
	}
	kustomization := fmt.Sprintf(`apiVersion: kustomize.config.k8s.io/v1beta1
kind: Kustomization
resources:
  - %s
components:
  - %s
configMapGenerator:
  - name: shardns
    namespace: kube-system
    behavior: merge
    files:
      - shardns.yaml
  - name: shardns-nodelocal
    namespace: kube-system
    behavior: merge
    files:
      - shardns.yaml=nodelocal.yaml
`, rel, clients)
	for name, content := range map[string]string{"kustomization.yaml": kustomization, "shardns.yaml": replica, "nodelocal.yaml": nodeLocal} {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	return dir
}

// editDeployFile returns the file of deploy/ with old replaced by new,
// and fails if it has no old to replace.
func editDeployFile(t *testing.T, name, old, new string) string {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(deployDir, name))
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(b), old) {
		t.Fatalf("deploy/%s has no %q to change", name, old)
	}
	return strings.Replace(string(b), old, new, 1)
}

// nodeLocalAddresses reads, from the node-local ConfigMap of objs, the
// address the process serves DNS on and its metrics port.
func nodeLocalAddresses(t *testing.T, objs []*unstructured.Unstructured) (linkLocal, metricsPort string) {
	t.Helper()
	text, _, _ := unstructured.NestedString(find(t, objs, "ConfigMap", "shardns-nodelocal-", nil).Object, "data", "shardns.yaml")
	cfg, err := config.Parse([]byte(text))
	if err != nil {
		t.Fatal(err)
	}
	if !cfg.Autopath.Enabled {
		t.Fatal("the overlay's node-local configuration has autopath off")
	}
	linkLocal, _, err = net.SplitHostPort(cfg.DNS.Listen[0])
	if err != nil {
		t.Fatal(err)
	}
	if _, metricsPort, err = net.SplitHostPort(cfg.HTTP.Listen); err != nil {
		t.Fatal(err)
	}
	return linkLocal, metricsPort
}

// restoreBase applies deploy/ as shipped and, if the replicas run another
// revision than base, waits until they are rolled back to it.
func (c *nodeCluster) restoreBase(t *testing.T, base string) {
	t.Helper()
	updated, err := c.client().AppsV1().StatefulSets("kube-system").Get(context.Background(), "shardns", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	newApplierFor(t, c.node.RESTConfig(), true).applyAll(t, allowNodeDebug(t, render(t, deployDir)))
	if updated.Status.UpdateRevision != base {
		c.waitRollout(t, updated.Status.UpdateRevision)
	}
	c.waitReplicas(t, 3)
}

// checkNoPodWatched checks, from each replica's
// shardns_kubernetes_events_total, that it received Services and no Pod.
func checkNoPodWatched(t *testing.T, replicas []corev1.Pod) {
	t.Helper()
	for _, r := range replicas {
		m := harness.MustMetrics(t, net.JoinHostPort(r.Status.PodIP, "8080"))
		services := m.SumWith("shardns_kubernetes_events_total", `kind="Service"`)
		pods := m.SumWith("shardns_kubernetes_events_total", `kind="Pod"`)
		if services == 0 || pods != 0 {
			t.Errorf("%s with kubernetes.pods: disabled received %v Service and %v Pod events, want Services and no Pod:\n%s",
				r.Name, services, pods, m.Series("shardns_kubernetes_events_total"))
		}
	}
}

// checkClientPodsHeld checks that the node-local process holds as many
// pods (shardns_client_pods_held) as the API lists on its node, while a
// pod bound to another node exists: the one-node cluster's only way to
// tell "its node's pods" from "every pod".
func (c *nodeCluster) checkClientPodsHeld(t *testing.T, metrics, node string) {
	t.Helper()
	ctx := context.Background()
	const ns, name = nodeLocalClientsNS, "on-another-node"
	foreign := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name},
		Spec: corev1.PodSpec{NodeName: node + "-other", Containers: []corev1.Container{{
			Name: "main", Image: kubenode.BusyboxImage, ImagePullPolicy: corev1.PullNever}}},
	}
	if _, err := c.client().CoreV1().Pods(ns).Create(ctx, foreign, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	// No kubelet runs there to finish a graceful deletion.
	defer func() {
		err := c.client().CoreV1().Pods(ns).Delete(ctx, name, metav1.DeleteOptions{GracePeriodSeconds: harness.Ptr(int64(0))})
		if err != nil && !apierrors.IsNotFound(err) {
			t.Error(err)
		}
	}()
	var held float64
	var onNode, all int
	c.eventually(t, recordsTimeout, func() error {
		pods, err := c.client().CoreV1().Pods("").List(ctx, metav1.ListOptions{})
		if err != nil {
			return err
		}
		all, onNode = len(pods.Items), 0
		for _, p := range pods.Items {
			if p.Spec.NodeName == node {
				onNode++
			}
		}
		m, err := harness.ScrapeMetrics(metrics)
		if err != nil {
			return err
		}
		if held = m.Sum("shardns_client_pods_held"); held != float64(onNode) || all == onNode {
			return fmt.Errorf("the node-local process holds %v pods; the API lists %d on node %s and %d in all", held, onNode, node, all)
		}
		return nil
	})
	t.Logf("the node-local process holds %v pods: those of node %s, of %d in the cluster", held, node, all)
}

// checkClientSearches resolves, from a pod with kubelet's search path
// and ndots:5 and the node-local address its only nameserver, an external
// name and a short name of the pod's namespace with glibc's getaddrinfo
// (getent ahosts), and checks the answers and that the node-local process
// was asked one question per type for each: the first search-path
// expansion, which autopath answers. getaddrinfo asks AAAA only where the
// pod has an IPv6 address; A always.
//
// Until the node-local process has the pod's address from the API it
// cannot know the pod as a client, so the pod first asks, at most once a
// second, the first expansion of the external name as TXT (a type the
// count leaves out) until autopath answers it.
func (c *nodeCluster) checkClientSearches(t *testing.T, linkLocal, metrics string) {
	t.Helper()
	const ns = nodeLocalClientsNS
	web := c.createService(t, ns, "web", "http", 80, nil, false)
	webFQDN := "web." + ns + ".svc.cluster.local"
	c.waitRecords(t, []record{{webFQDN, dns.TypeA, web.Spec.ClusterIP}})

	firstExpansion := kubenode.ExternalName + "." + ns + ".svc.cluster.local."
	known := fmt.Sprintf("nslookup -type=txt %s %s", firstExpansion, linkLocal)
	wait := fmt.Sprintf("i=0; until %s | grep -q %s; do i=$((i+1)); [ $i -lt 60 ] || break; sleep 1; done; %s",
		known, kubenode.ExternalTXT, known)
	dnsConfig := &corev1.PodDNSConfig{
		Nameservers: []string{linkLocal},
		Searches:    []string{ns + ".svc.cluster.local", "svc.cluster.local", "cluster.local"},
		Options:     []corev1.PodDNSConfigOption{{Name: "ndots", Value: harness.Ptr("5")}},
	}
	before := harness.MustMetrics(t, metrics)
	c.runChecks(t, ns, "glibc", []podCheck{
		{"the node-local process knows the pod", wait, []string{
			"canonical name = " + kubenode.ExternalName, `text = "` + kubenode.ExternalTXT + `"`}},
		{"external name", "getent ahosts " + kubenode.ExternalName, []string{
			kubenode.ExternalIPv4 + " STREAM " + kubenode.ExternalName}},
		{"short name of the namespace", "getent ahosts web", []string{web.Spec.ClusterIP + " STREAM " + webFQDN}},
	}, withDNSConfig(dnsConfig))
	after := harness.MustMetrics(t, metrics)

	const names = 2
	asked := after.ByLabel("shardns_dns_requests_total", "type", "")
	for qtype, n := range before.ByLabel("shardns_dns_requests_total", "type", "") {
		asked[qtype] -= n
	}
	for qtype, n := range asked {
		ok := n == 0 // no other type
		switch qtype {
		case "A":
			ok = n == names
		case "AAAA": // where getaddrinfo asks it
			ok = n == 0 || n == names
		case "TXT": // the wait above
			ok = true
		}
		if !ok {
			t.Errorf("the node-local process was asked %v %s questions for %d names, want one each: the pod walked its search path (questions by type: %v)",
				n, qtype, names, asked)
		}
	}
	if asked["A"] == 0 {
		t.Errorf("the node-local process was asked no A question: the pod resolved elsewhere (questions by type: %v)", asked)
	}
	t.Logf("two names resolved by getaddrinfo with the node-local process asked A %v, AAAA %v times", asked["A"], asked["AAAA"])
}
