package functional

import (
	"bytes"
	"encoding/json"
	"fmt"
	"os/exec"
	"testing"
	"time"

	"github.com/miekg/dns"
	discoveryv1 "k8s.io/api/discovery/v1"
	"k8s.io/apimachinery/pkg/runtime"

	"github.com/shardns/shardns/integration/harness"
	"github.com/shardns/shardns/integration/kubeapi"
	"github.com/shardns/shardns/internal/testutil"
)

// A relist after an apiserver restart that brings back objects changed,
// while it was down, into what DNS cannot serve (a Service whose cluster
// IP is not an address, an EndpointSlice with a bad address: written to
// etcd past the API's validation, as a faulty writer of storage could
// leave them) skips them and counts them in
// shardns_kubernetes_skipped_total, and their last good versions keep
// answering.
func TestRelistSkipsMalformed(t *testing.T) {
	if _, err := exec.LookPath("etcdctl"); err != nil {
		t.Skip("etcdctl not found (Debian package etcd-client)")
	}
	cp := kubeapi.Start(t)
	c := cp.Client
	harness.CreateNamespace(t, c, "relist", nil)
	web := harness.CreateService(t, c, harness.ClusterIPService("relist", "web"))
	harness.CreateService(t, c, harness.HeadlessService("relist", "db"))
	slice := harness.CreateEndpointSlice(t, c, "relist", "db", "db-1", discoveryv1.AddressTypeIPv4, harness.Endpoint{IP: "10.1.2.3", Hostname: "host-0"})
	n := harness.StartKubeNode(t, cp, "", true)
	n.Eventually(t, "web.relist.svc.cluster.local", dns.TypeA, dns.RcodeSuccess, web.Spec.ClusterIP)
	n.Eventually(t, "host-0.db.relist.svc.cluster.local", dns.TypeA, dns.RcodeSuccess, "10.1.2.3")

	cp.StopAPIServer(t)
	bad := web.DeepCopy()
	bad.APIVersion, bad.Kind = "v1", "Service"
	bad.Spec.ClusterIP, bad.Spec.ClusterIPs = "not-an-ip", []string{"not-an-ip"}
	putInEtcd(t, cp, "/registry/services/specs/relist/web", bad)
	badSlice := slice.DeepCopy()
	badSlice.APIVersion, badSlice.Kind = "discovery.k8s.io/v1", "EndpointSlice"
	badSlice.Endpoints[0].Addresses = []string{"10.1.2.999"}
	putInEtcd(t, cp, "/registry/endpointslices/relist/db-1", badSlice)
	cp.StartAPIServer(t)

	// A service made after the restart answers once the watches are back,
	// past the relist.
	added := harness.CreateService(t, c, harness.ClusterIPService("relist", "added"))
	n.Eventually(t, "added.relist.svc.cluster.local", dns.TypeA, dns.RcodeSuccess, added.Spec.ClusterIP)
	testutil.Eventually(t, 30*time.Second, func() error {
		for _, kind := range []string{"Service", "EndpointSlice"} {
			label := fmt.Sprintf(`kind="%s",what="object"`, kind)
			if got := harness.ScrapeLabelled(t, n.HTTPAddr(), "shardns_kubernetes_skipped_total", label); got < 1 {
				return fmt.Errorf("shardns_kubernetes_skipped_total{%s} = %v, want at least 1", label, got)
			}
		}
		return nil
	})
	for _, check := range []struct{ name, want string }{
		{"web.relist.svc.cluster.local", web.Spec.ClusterIP},
		{"host-0.db.relist.svc.cluster.local", "10.1.2.3"},
		{"db.relist.svc.cluster.local", "10.1.2.3"},
	} {
		if err := n.Answers(check.name, dns.TypeA, dns.RcodeSuccess, check.want); err != nil {
			t.Errorf("after the relist: %v", err)
		}
	}
}

// putInEtcd writes obj as JSON at key in cp's etcd, which the apiserver
// reads as it reads its own protobuf.
func putInEtcd(t *testing.T, cp *kubeapi.ControlPlane, key string, obj runtime.Object) {
	t.Helper()
	value, err := json.Marshal(obj)
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command("etcdctl", "--endpoints="+cp.EtcdURL(), "put", key)
	cmd.Env = append(cmd.Environ(), "ETCDCTL_API=3")
	cmd.Stdin = bytes.NewReader(value)
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("etcdctl put %s: %v\n%s", key, err, out)
	}
}
