package functional

import (
	"errors"
	"fmt"
	"net"
	"slices"
	"testing"
	"time"

	"github.com/miekg/dns"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"

	"github.com/shardns/shardns/integration/harness"
	"github.com/shardns/shardns/integration/kubeapi"
	"github.com/shardns/shardns/internal/testutil"
)

// mkNodePod creates a pod bound to node (no scheduler needed) and, with
// ips, gives it those addresses as the kubelet would.
func mkNodePod(t *testing.T, c kubernetes.Interface, ns, name, node string, hostNetwork bool, ips ...string) {
	t.Helper()
	pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name},
		Spec: corev1.PodSpec{NodeName: node, HostNetwork: hostNetwork, Containers: []corev1.Container{{Name: "c", Image: "none"}}}}
	pod, err := c.CoreV1().Pods(ns).Create(ctx, pod, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if len(ips) == 0 {
		return
	}
	pod.Status = corev1.PodStatus{Phase: corev1.PodRunning, PodIP: ips[0]}
	for _, ip := range ips {
		pod.Status.PodIPs = append(pod.Status.PodIPs, corev1.PodIP{IP: ip})
	}
	if _, err := c.CoreV1().Pods(ns).UpdateStatus(ctx, pod, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
}

// A node-local process in front of a replica that watches no Pod
// (pods: disabled) knows the pods of its own node only, and walks their
// search paths: a pod's resolver gets the answer to the first expansion
// of a name in one question per type. Clients it does not know (pods of
// another node, host-network pods, deleted pods) get ordinary answers;
// IPv4-only pods get NODATA to AAAA.
func TestNodeLocalKnowsItsClients(t *testing.T) {
	cp := kubeapi.Shared(t)
	c := cp.Client
	harness.CreateNamespace(t, c, "nlc", nil)
	web := harness.CreateService(t, c, harness.ClusterIPService("nlc", "web"))
	const nodeA, nodeB = "nlc-node-a", "nlc-node-b"
	mkNodePod(t, c, "nlc", "client", nodeA, false, "127.0.0.51")
	mkNodePod(t, c, "nlc", "dual", nodeA, false, "127.0.0.52", "fd00:10:244::52")
	mkNodePod(t, c, "nlc", "elsewhere", nodeB, false, "127.0.0.53")
	mkNodePod(t, c, "nlc", "host", nodeA, true, "127.0.0.54")
	mkNodePod(t, c, "nlc", "gone", nodeA, false, "127.0.0.55")
	mkNodePod(t, c, "nlc", "pending", nodeA, false)
	u := harness.StartUnbound(t, "www.example.test. 300 IN A 192.0.2.1", "www.example.test. 300 IN AAAA 2001:db8::1")

	r := harness.StartReplica(t, cp, harness.ReplicaOptions{Name: "r0", RF: 2, Cluster: "gossip: fast", Kube: "pods: disabled"})
	harness.Settled(t, []*harness.Replica{r}, 1)
	p := harness.Start(t, harness.Options{Config: fmt.Sprintf(`
mode: nodelocal
dns: {listen: ["127.0.0.1:0"]}
http: {listen: "127.0.0.1:0", lameduck: 0s}
kubernetes: {kubeconfig: %q, pods: disabled}
autopath: {enabled: true}
nodeLocal: {nodeName: %s, aaaa: nodata}
forward: {upstreams: [%q]}
cluster:
  nodeName: nl-a
  replicas: [%q]
  remote: "127.0.0.1:%d"
  gossip: fast
`, cp.Kubeconfig, nodeA, u.Addr, harness.RemoteOf(t, r), harness.FreePort(t))})

	nl := &harness.Replica{Process: p, HTTP: p.HTTPAddr(t)}
	held := func(want float64) {
		t.Helper()
		testutil.Eventually(t, 20*time.Second, func() error {
			if got := harness.Scrape(t, nl.HTTP, "shardns_client_pods_held"); got != want {
				return fmt.Errorf("the node-local process holds %v pods, want %v (node A's)", got, want)
			}
			return nil
		})
	}
	held(5)

	cases := []struct {
		name, from, qname string
		qtype             uint16
		rcode             int
		want              []string
	}{
		{"external name, first expansion", "127.0.0.51", "www.example.test.nlc.svc.cluster.local.", dns.TypeA, dns.RcodeSuccess, []string{
			"www.example.test.nlc.svc.cluster.local.\tCNAME\twww.example.test.", "www.example.test.\tA\t192.0.2.1"}},
		{"short name of the namespace", "127.0.0.51", "web.nlc.svc.cluster.local.", dns.TypeA, dns.RcodeSuccess, []string{
			"web.nlc.svc.cluster.local.\tA\t" + web.Spec.ClusterIP}},
		{"service.namespace, first expansion", "127.0.0.51", "web.nlc.nlc.svc.cluster.local.", dns.TypeA, dns.RcodeSuccess, []string{
			"web.nlc.nlc.svc.cluster.local.\tCNAME\tweb.nlc.svc.cluster.local.", "web.nlc.svc.cluster.local.\tA\t" + web.Spec.ClusterIP}},
		{"IPv4-only pod: AAAA NODATA", "127.0.0.51", "www.example.test.nlc.svc.cluster.local.", dns.TypeAAAA, dns.RcodeSuccess, nil},
		{"dual-stack pod: AAAA answered", "127.0.0.52", "www.example.test.nlc.svc.cluster.local.", dns.TypeAAAA, dns.RcodeSuccess, []string{
			"www.example.test.nlc.svc.cluster.local.\tCNAME\twww.example.test.", "www.example.test.\tAAAA\t2001:db8::1"}},
		{"pod of another node: ordinary", "127.0.0.53", "web.nlc.nlc.svc.cluster.local.", dns.TypeA, dns.RcodeNameError, nil},
		{"pod of another node: AAAA answered", "127.0.0.53", "www.example.test.", dns.TypeAAAA, dns.RcodeSuccess, []string{
			"www.example.test.\tAAAA\t2001:db8::1"}},
		{"host-network pod: ordinary", "127.0.0.54", "web.nlc.nlc.svc.cluster.local.", dns.TypeA, dns.RcodeNameError, nil},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			// The first questions open the connection to the replica; on a
			// loaded machine one may miss its deadline and come back
			// SERVFAIL, which a stub resolver asks again. Any other
			// difference fails at once.
			deadline := time.Now().Add(10 * time.Second)
			for {
				err := answersFrom(nl.Addr, tc.from, tc.qname, tc.qtype, tc.rcode, tc.want)
				if err == nil {
					return
				}
				if !errors.Is(err, errServfail) || time.Now().After(deadline) {
					t.Fatal(err)
				}
			}
		})
	}

	t.Run("the replica watches no pod", func(t *testing.T) {
		if got := harness.ScrapeLabelled(t, r.HTTP, "shardns_kubernetes_events_total", `kind="Pod"`); got != 0 {
			t.Fatalf("the replica received %v Pod events, want none", got)
		}
	})

	t.Run("a deleted pod's address gets ordinary answers", func(t *testing.T) {
		if err := answersFrom(nl.Addr, "127.0.0.55", "web.nlc.nlc.svc.cluster.local.", dns.TypeA, dns.RcodeSuccess, []string{
			"web.nlc.nlc.svc.cluster.local.\tCNAME\tweb.nlc.svc.cluster.local.", "web.nlc.svc.cluster.local.\tA\t" + web.Spec.ClusterIP}); err != nil {
			t.Fatal(err)
		}
		if err := c.CoreV1().Pods("nlc").Delete(ctx, "gone", metav1.DeleteOptions{GracePeriodSeconds: new(int64)}); err != nil {
			t.Fatal(err)
		}
		held(4)
		if err := answersFrom(nl.Addr, "127.0.0.55", "web.nlc.nlc.svc.cluster.local.", dns.TypeA, dns.RcodeNameError, nil); err != nil {
			t.Fatal(err)
		}
	})
}

// answersFrom asks name of addr from the source address from, once, and
// says how the answer differs from rcode and want (owner, type, data).
func answersFrom(addr, from, name string, qtype uint16, rcode int, want []string) error {
	c := &dns.Client{Net: "udp", Timeout: 3 * time.Second, Dialer: dialerFrom(from)}
	m := new(dns.Msg)
	m.SetQuestion(name, qtype)
	r, _, err := c.Exchange(m, addr)
	if err != nil {
		return err
	}
	var got []string
	for _, rr := range r.Answer {
		h := rr.Header()
		got = append(got, fmt.Sprintf("%s\t%s\t%s", h.Name, dns.TypeToString[h.Rrtype], rr.String()[len(h.String()):]))
	}
	if r.Rcode != rcode || !slices.Equal(got, want) {
		err := fmt.Errorf("%s %s from %s: %s %q, want %s %q", name, dns.TypeToString[qtype], from,
			dns.RcodeToString[r.Rcode], got, dns.RcodeToString[rcode], want)
		if r.Rcode == dns.RcodeServerFailure {
			return fmt.Errorf("%w: %w", errServfail, err)
		}
		return err
	}
	return nil
}

// errServfail is an answer that came back SERVFAIL where another was
// wanted: a failure a client retries, unlike a wrong answer.
var errServfail = errors.New("SERVFAIL")

// dialerFrom sends from the loopback address from: another client.
func dialerFrom(from string) *net.Dialer {
	return &net.Dialer{LocalAddr: &net.UDPAddr{IP: net.ParseIP(from)}, Timeout: 3 * time.Second}
}
