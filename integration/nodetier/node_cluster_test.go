package nodetier

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/miekg/dns"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/client-go/kubernetes"

	"github.com/shardns/shardns/httpapi"
	"github.com/shardns/shardns/integration/kubenode"
	"github.com/shardns/shardns/internal/testutil"
)

// nodeCluster is the one-node cluster of TestNode with deploy/ applied,
// and what its tests share.
type nodeCluster struct {
	node *kubenode.Node
	// coreDNSImage is the CoreDNS image imported into the node, once a
	// test needed it (coreDNSImageOnNode).
	coreDNSImage string
	// explained is the test whose failure explainFailure logged.
	explained string
}

// explainFailure logs, once per test, what the replicas logged and their
// rings (replicaWarnings): a failed answer is explained by the replica
// that gave it or forwarded it, and TestNode's own diagnose shows only
// their last lines, which a phase's later work pushes out.
func (c *nodeCluster) explainFailure(t *testing.T) {
	t.Helper()
	if c.explained == t.Name() {
		return
	}
	c.explained = t.Name()
	c.replicaWarnings(t)
}

func (c *nodeCluster) client() kubernetes.Interface { return c.node.Client }

// eventually is testutil.Eventually that first fails t if a component of
// the node has died, so the failure names the cause.
func (c *nodeCluster) eventually(t *testing.T, timeout time.Duration, check func() error) {
	t.Helper()
	testutil.Eventually(t, timeout, func() error {
		c.node.Check(t)
		return check()
	})
}

// replicaSelector selects the StatefulSet's pods.
const replicaSelector = "app.kubernetes.io/name=shardns"

// waitReplicas waits until the StatefulSet has want replicas, all ready,
// no other pod of it exists, and every replica's /debug/ring lists
// exactly those, each an owner. It returns the pods by name.
func (c *nodeCluster) waitReplicas(t *testing.T, want int) []corev1.Pod {
	t.Helper()
	var names []string
	for i := range want {
		names = append(names, fmt.Sprintf("shardns-%d", i))
	}
	var pods []corev1.Pod
	start := time.Now()
	c.eventually(t, replicasTimeout, func() error {
		list, err := c.client().CoreV1().Pods("kube-system").List(context.Background(), metav1.ListOptions{LabelSelector: replicaSelector})
		if err != nil {
			return err
		}
		pods = list.Items
		var got []string
		for _, p := range pods {
			got = append(got, p.Name)
			if !podReady(&p) {
				return fmt.Errorf("replica %s is not ready (%s)", p.Name, podState(&p))
			}
		}
		if slices.Sort(got); !slices.Equal(got, names) {
			return fmt.Errorf("replica pods %v, want %v", got, names)
		}
		for _, p := range pods {
			ring, err := replicaRing(p.Status.PodIP)
			if err != nil {
				return fmt.Errorf("%s: %w", p.Name, err)
			}
			members, err := ownerMembers(ring)
			if err != nil {
				return fmt.Errorf("%s: %w", p.Name, err)
			}
			if !slices.Equal(members, names) {
				return fmt.Errorf("%s sees members %v, want %v", p.Name, members, names)
			}
		}
		return nil
	})
	slices.SortFunc(pods, func(a, b corev1.Pod) int { return strings.Compare(a.Name, b.Name) })
	t.Logf("%d replicas ready, each sees %d members, after %v", want, want, time.Since(start).Round(time.Second))
	return pods
}

var nodeHTTP = &http.Client{Timeout: 5 * time.Second}

// replicaRing reads a replica's /debug/ring through its pod address.
func replicaRing(podIP string) (httpapi.Ring, error) {
	var ring httpapi.Ring
	resp, err := nodeHTTP.Get("http://" + net.JoinHostPort(podIP, "8080") + "/debug/ring")
	if err != nil {
		return ring, err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return ring, fmt.Errorf("/debug/ring: %s", resp.Status)
	}
	return ring, json.NewDecoder(resp.Body).Decode(&ring)
}

func podReady(p *corev1.Pod) bool {
	for _, c := range p.Status.Conditions {
		if c.Type == corev1.PodReady {
			return c.Status == corev1.ConditionTrue
		}
	}
	return false
}

// podState says in a few words why a pod is where it is.
func podState(p *corev1.Pod) string {
	s := string(p.Status.Phase)
	for _, cs := range append(p.Status.InitContainerStatuses, p.Status.ContainerStatuses...) {
		switch {
		case cs.State.Waiting != nil:
			s += fmt.Sprintf(", %s waiting: %s %s", cs.Name, cs.State.Waiting.Reason, cs.State.Waiting.Message)
		case cs.State.Terminated != nil:
			s += fmt.Sprintf(", %s terminated: %s (exit %d)", cs.Name, cs.State.Terminated.Reason, cs.State.Terminated.ExitCode)
		}
		if cs.RestartCount > 0 {
			s += fmt.Sprintf(", %s restarted %d times", cs.Name, cs.RestartCount)
		}
	}
	return s
}

// record is an answer every replica must give: the first answer record's
// data (an address, SRV target, PTR name) as dns.RR prints it.
type record struct {
	name  string
	qtype uint16
	data  string
}

// waitRecords waits until every replica answers every record, asked
// directly at its pod address.
func (c *nodeCluster) waitRecords(t *testing.T, records []record) {
	t.Helper()
	c.waitRecordsAt(t, c.replicaPods(t), records)
}

// waitRecordsAt waits until every one of pods answers every record, asked
// directly at its pod address.
func (c *nodeCluster) waitRecordsAt(t *testing.T, pods []corev1.Pod, records []record) {
	t.Helper()
	c.eventually(t, recordsTimeout, func() error {
		for _, p := range pods {
			for _, r := range records {
				if err := askRecord(net.JoinHostPort(p.Status.PodIP, "53"), r); err != nil {
					return fmt.Errorf("%s: %w", p.Name, err)
				}
			}
		}
		return nil
	})
}

// askRecord asks one question and checks the answer holds r.
func askRecord(addr string, r record) error {
	m, err := testutil.Exchange(addr, "udp", dns.Fqdn(r.name), r.qtype)
	if err != nil {
		return err
	}
	var got []string
	for _, rr := range m.Answer {
		data := strings.TrimPrefix(rr.String(), rr.Header().String())
		if data == r.data {
			return nil
		}
		got = append(got, data)
	}
	return fmt.Errorf("%s %s: %s %v, want %s", r.name, dns.TypeToString[r.qtype], dns.RcodeToString[m.Rcode], got, r.data)
}

// dnsPods lists the ready pods that kube-dns selects (k8s-app: kube-dns):
// the replicas, and CoreDNS's where it runs.
func (c *nodeCluster) dnsPods(t *testing.T) []corev1.Pod {
	t.Helper()
	list, err := c.client().CoreV1().Pods("kube-system").List(context.Background(), metav1.ListOptions{LabelSelector: "k8s-app=kube-dns"})
	if err != nil {
		t.Fatal(err)
	}
	var ready []corev1.Pod
	for _, p := range list.Items {
		if p.DeletionTimestamp == nil && podReady(&p) {
			ready = append(ready, p)
		}
	}
	return ready
}

// replicaPods lists the StatefulSet's pods.
func (c *nodeCluster) replicaPods(t *testing.T) []corev1.Pod {
	t.Helper()
	list, err := c.client().CoreV1().Pods("kube-system").List(context.Background(), metav1.ListOptions{LabelSelector: replicaSelector})
	if err != nil {
		t.Fatal(err)
	}
	return list.Items
}

// createNamespace creates ns and waits for its default ServiceAccount,
// without which the ServiceAccount admission plugin refuses pods.
func (c *nodeCluster) createNamespace(t *testing.T, ns string) {
	t.Helper()
	ctx := context.Background()
	if _, err := c.client().CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	c.eventually(t, podTimeout, func() error {
		_, err := c.client().CoreV1().ServiceAccounts(ns).Get(ctx, "default", metav1.GetOptions{})
		return err
	})
}

// createService creates a Service with one TCP port selecting selector;
// headless if asked.
func (c *nodeCluster) createService(t *testing.T, ns, name, port string, number int32, selector map[string]string, headless bool) *corev1.Service {
	t.Helper()
	svc := &corev1.Service{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns},
		Spec: corev1.ServiceSpec{
			Selector: selector,
			Ports:    []corev1.ServicePort{{Name: port, Port: number, Protocol: corev1.ProtocolTCP, TargetPort: intstr.FromInt32(number)}},
		},
	}
	if headless {
		svc.Spec.ClusterIP = corev1.ClusterIPNone
	}
	svc, err := c.client().CoreV1().Services(ns).Create(context.Background(), svc, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	return svc
}

// podOption changes a pod runPod creates.
type podOption func(*corev1.Pod)

// withDNSConfig gives the pod dnsPolicy None and cfg as its resolv.conf,
// as kubelet would write it with another clusterDNS.
func withDNSConfig(cfg *corev1.PodDNSConfig) podOption {
	return func(p *corev1.Pod) {
		p.Spec.DNSPolicy = corev1.DNSNone
		p.Spec.DNSConfig = cfg
	}
}

// runPod creates a busybox pod with the default dnsPolicy running
// command, with the hostname and subdomain given if not empty, changed
// by opts, and returns its name.
func (c *nodeCluster) runPod(t *testing.T, ns, name string, labels map[string]string, hostname, subdomain string, command []string, opts ...podOption) string {
	t.Helper()
	zero := int64(0)
	pod := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns, Labels: labels},
		Spec: corev1.PodSpec{
			Hostname:                      hostname,
			Subdomain:                     subdomain,
			RestartPolicy:                 corev1.RestartPolicyNever,
			TerminationGracePeriodSeconds: &zero, // busybox as PID 1 ignores SIGTERM
			Containers: []corev1.Container{{
				Name:            "main",
				Image:           kubenode.BusyboxImage,
				ImagePullPolicy: corev1.PullNever,
				Command:         command,
			}},
		},
	}
	for _, o := range opts {
		o(pod)
	}
	if _, err := c.client().CoreV1().Pods(ns).Create(context.Background(), pod, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	return name
}

// waitRunning waits until the pod runs and returns it.
func (c *nodeCluster) waitRunning(t *testing.T, ns, name string) *corev1.Pod {
	t.Helper()
	var pod *corev1.Pod
	c.eventually(t, podTimeout, func() error {
		p, err := c.client().CoreV1().Pods(ns).Get(context.Background(), name, metav1.GetOptions{})
		if err != nil {
			return err
		}
		if pod = p; p.Status.Phase != corev1.PodRunning || p.Status.PodIP == "" {
			return fmt.Errorf("pod %s/%s: %s", ns, name, podState(p))
		}
		return nil
	})
	return pod
}

// logs returns a pod's log.
func (c *nodeCluster) logs(t *testing.T, ns, pod string) string {
	t.Helper()
	b, err := c.client().CoreV1().Pods(ns).GetLogs(pod, &corev1.PodLogOptions{}).DoRaw(context.Background())
	if err != nil {
		t.Fatalf("logs of %s/%s: %v", ns, pod, err)
	}
	return string(b)
}

// diagnose logs what a failed test needs to be understood: every pod's
// state, the warnings among the events, and the end of each replica's log.
func (c *nodeCluster) diagnose(t *testing.T) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	pods, err := c.client().CoreV1().Pods("").List(ctx, metav1.ListOptions{})
	if err != nil {
		t.Logf("diagnose: %v", err)
		return
	}
	for _, p := range pods.Items {
		t.Logf("pod %s/%s on %q at %s: %s", p.Namespace, p.Name, p.Spec.NodeName, p.Status.PodIP, podState(&p))
	}
	if events, err := c.client().CoreV1().Events("").List(ctx, metav1.ListOptions{FieldSelector: "type=Warning"}); err == nil {
		for _, e := range events.Items {
			t.Logf("event %s %s/%s: %s: %s", e.Type, e.InvolvedObject.Kind, e.InvolvedObject.Name, e.Reason, e.Message)
		}
	}
	tailLines := int64(30)
	for _, p := range pods.Items {
		if p.Namespace != "kube-system" && !strings.HasPrefix(p.Name, "shardns") {
			continue
		}
		req := c.client().CoreV1().Pods(p.Namespace).GetLogs(p.Name, &corev1.PodLogOptions{TailLines: &tailLines})
		rc, err := req.Stream(ctx)
		if err != nil {
			if !apierrors.IsBadRequest(err) {
				t.Logf("logs of %s/%s: %v", p.Namespace, p.Name, err)
			}
			continue
		}
		b, _ := io.ReadAll(rc)
		rc.Close()
		t.Logf("last lines of %s/%s:\n%s", p.Namespace, p.Name, b)
	}
}

// grantReplicaRights gives the ServiceAccount shardns of ns what the
// replicas' has: reading the API cluster-wide and the gossip key.
func (c *nodeCluster) grantReplicaRights(t *testing.T, ns string) {
	t.Helper()
	ctx := context.Background()
	sa := &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Name: "shardns", Namespace: ns}}
	if _, err := c.client().CoreV1().ServiceAccounts(ns).Create(ctx, sa, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	subject := []rbacv1.Subject{{Kind: "ServiceAccount", Name: "shardns", Namespace: ns}}
	crb := &rbacv1.ClusterRoleBinding{
		ObjectMeta: metav1.ObjectMeta{Name: "shardns-" + ns},
		RoleRef:    rbacv1.RoleRef{APIGroup: "rbac.authorization.k8s.io", Kind: "ClusterRole", Name: "shardns"},
		Subjects:   subject,
	}
	if _, err := c.client().RbacV1().ClusterRoleBindings().Create(ctx, crb, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	rb := &rbacv1.RoleBinding{
		ObjectMeta: metav1.ObjectMeta{Name: "shardns-gossip-" + ns, Namespace: "kube-system"},
		RoleRef:    rbacv1.RoleRef{APIGroup: "rbac.authorization.k8s.io", Kind: "Role", Name: "shardns-gossip"},
		Subjects:   subject,
	}
	if _, err := c.client().RbacV1().RoleBindings("kube-system").Create(ctx, rb, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	// The replicas' configuration, under the name their pod spec mounts.
	sts, err := c.client().AppsV1().StatefulSets("kube-system").Get(ctx, "shardns", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	name := sts.Spec.Template.Spec.Volumes[0].ConfigMap.Name
	cm, err := c.client().CoreV1().ConfigMaps("kube-system").Get(ctx, name, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	cm = &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns}, Data: cm.Data}
	if _, err := c.client().CoreV1().ConfigMaps(ns).Create(ctx, cm, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
}

// strangerPod is a pod of the StatefulSet's template, in ns under name
// with labels.
func strangerPod(sts *appsv1.StatefulSet, ns, name string, labels map[string]string) *corev1.Pod {
	return &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns, Labels: labels},
		Spec:       *sts.Spec.Template.Spec.DeepCopy(),
	}
}

// podSecurityEnforce is the namespace label Pod Security admission
// enforces.
const podSecurityEnforce = "pod-security.kubernetes.io/enforce"

// enforcePodSecurity labels kube-system to enforce level, as `kubectl label
// namespace kube-system pod-security.kubernetes.io/enforce=level
// --overwrite` does; "" removes the label.
func (c *nodeCluster) enforcePodSecurity(t *testing.T, level string) {
	t.Helper()
	value := "null"
	if level != "" {
		value = strconv.Quote(level)
	}
	patch := fmt.Sprintf(`{"metadata":{"labels":{%q:%s}}}`, podSecurityEnforce, value)
	if _, err := c.client().CoreV1().Namespaces().Patch(context.Background(), "kube-system", types.MergePatchType, []byte(patch), metav1.PatchOptions{}); err != nil {
		t.Fatal(err)
	}
}
