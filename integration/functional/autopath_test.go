package functional

import (
	"fmt"
	"testing"
	"time"

	"github.com/miekg/dns"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/shardns/shardns/integration/harness"
	"github.com/shardns/shardns/integration/kubeapi"
	"github.com/shardns/shardns/internal/testutil"
)

// Autopath, as a pod sees it: the test client's address (127.0.0.1) is
// the IP of a pod in namespace "ap"; the first search-path expansion of a
// name comes back as CNAME+A in one answer, from the cluster or from a real
// upstream.
func TestAutopathForAPod(t *testing.T) {
	cp := kubeapi.Shared(t)
	c := cp.Client
	harness.CreateNamespace(t, c, "ap", nil)
	web := harness.CreateService(t, c, harness.ClusterIPService("ap", "web"))
	pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "ap", Name: "client"},
		Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "c", Image: "none"}}}}
	pod, err := c.CoreV1().Pods("ap").Create(ctx, pod, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	pod.Status = corev1.PodStatus{Phase: corev1.PodRunning, PodIP: "127.0.0.1", PodIPs: []corev1.PodIP{{IP: "127.0.0.1"}}}
	if _, err := c.CoreV1().Pods("ap").UpdateStatus(ctx, pod, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	u := harness.StartUnbound(t, "www.example.test. 300 IN A 192.0.2.1")

	n := harness.StartNodeYAML(t, fmt.Sprintf(`
dns: {listen: ["127.0.0.1:0"]}
http: {listen: ""}
kubernetes: {enabled: true, kubeconfig: %q, pods: verified}
autopath: {enabled: true}
forward: {upstreams: [%q]}
`, cp.Kubeconfig, u.Addr), true)
	addr := n.Addr
	cases := []struct {
		qname string
		want  []string
	}{
		{"www.example.test.ap.svc.cluster.local.", []string{
			"www.example.test.ap.svc.cluster.local.\tCNAME\twww.example.test.", "www.example.test.\tA\t192.0.2.1"}},
		{"web.ap.ap.svc.cluster.local.", []string{
			"web.ap.ap.svc.cluster.local.\tCNAME\tweb.ap.svc.cluster.local.", "web.ap.svc.cluster.local.\tA\t" + web.Spec.ClusterIP}},
	}
	for _, tc := range cases {
		testutil.Eventually(t, 10*time.Second, func() error {
			r, err := testutil.Exchange(addr, "udp", tc.qname, dns.TypeA)
			if err != nil {
				return err
			}
			if r.Rcode != dns.RcodeSuccess || len(r.Answer) != len(tc.want) {
				return fmt.Errorf("%s: %s %v", tc.qname, dns.RcodeToString[r.Rcode], r.Answer)
			}
			for i, rr := range r.Answer {
				h := rr.Header()
				got := fmt.Sprintf("%s\t%s\t%s", h.Name, dns.TypeToString[h.Rrtype], rr.String()[len(h.String()):])
				if got != tc.want[i] {
					return fmt.Errorf("%s: answer[%d] = %q, want %q", tc.qname, i, got, tc.want[i])
				}
			}
			return nil
		})
	}
}
