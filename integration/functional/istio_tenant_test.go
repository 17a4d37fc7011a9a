package functional

import (
	"fmt"
	"testing"
	"time"

	"github.com/miekg/dns"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/dynamic"

	"github.com/shardns/shardns/integration/harness"
	"github.com/shardns/shardns/integration/kubeapi"
	"github.com/shardns/shardns/internal/testutil"
)

// A user who may create ServiceEntries in its own namespace tries to take
// names of the whole cluster: *.com and api.github.com. Under the default
// istio.zones ([global], the zone istio-coredns was delegated) neither
// changes an answer: forwarded names keep the upstream's, while the
// admin's mesh entry in default still answers in its zone. Each refused
// host is counted.
func TestIstioTenantEntriesChangeNoAnswer(t *testing.T) {
	cp := kubeapi.Shared(t)
	se := installServiceEntryCRD(t, cp)
	ensureNamespace(t, cp, "tenant-a")
	up := harness.StartUnbound(t,
		"example.com. 300 IN A 93.184.216.34",
		"www.example.com. 300 IN A 93.184.216.35",
		"api.github.com. 300 IN A 140.82.112.5",
		"other.global. 300 IN A 192.0.2.80",
	)
	mkOwnServiceEntry(t, se, "default", "tenant-test-global", map[string]any{
		"hosts": list("*.test.global"), "addresses": list("127.255.0.2")})
	n := harness.StartNodeYAML(t, fmt.Sprintf(`
dns: {listen: ["127.0.0.1:0"]}
http: {listen: "127.0.0.1:0"}
kubernetes: {enabled: true, kubeconfig: %q}
istio: {enabled: true}
cluster: {replicationFactor: 0}
forward: {upstreams: [%q]}
`, cp.Kubeconfig, up.Addr), true)
	eventually := func(name string, fromMesh bool, want string) {
		t.Helper()
		testutil.Eventually(t, 10*time.Second, func() error { return meshAnswers(n.Addr, name, dns.TypeA, fromMesh, want) })
	}
	eventually("service1.test.global", true, "127.255.0.2")
	eventually("example.com", false, "93.184.216.34")

	mkOwnServiceEntry(t, se, "tenant-a", "everything-com", map[string]any{
		"hosts": list("*.com"), "addresses": list("6.6.6.6")})
	mkOwnServiceEntry(t, se, "tenant-a", "github", map[string]any{
		"hosts": list("api.github.com"), "addresses": list("6.6.6.7")})
	mkOwnServiceEntry(t, se, "tenant-a", "everything-global", map[string]any{
		"hosts": list("*.global"), "addresses": list("6.6.6.8")})
	// The counter says the node has seen every entry of the tenant.
	skipped := func(why string) float64 {
		return harness.MetricSum(t, n.HTTPAddr(), "shardns_istio_skipped_hosts_total", fmt.Sprintf("why=%q", why))
	}
	testutil.Eventually(t, 10*time.Second, func() error {
		if o, p := skipped("outside_zones"), skipped("public_suffix"); o != 2 || p != 1 {
			return fmt.Errorf("skipped: outside_zones %v, public_suffix %v; want 2 and 1", o, p)
		}
		return nil
	})
	for _, c := range []struct {
		name     string
		fromMesh bool
		want     string
	}{
		{"example.com", false, "93.184.216.34"},
		{"www.example.com", false, "93.184.216.35"},
		{"api.github.com", false, "140.82.112.5"},
		{"other.global", false, "192.0.2.80"},
		{"service1.test.global", true, "127.255.0.2"},
	} {
		if err := meshAnswers(n.Addr, c.name, dns.TypeA, c.fromMesh, c.want); err != nil {
			t.Error(err)
		}
	}
}

// ensureNamespace creates namespace name in cp unless it exists: the
// shared control plane keeps it for the process's next tests.
func ensureNamespace(t *testing.T, cp *kubeapi.ControlPlane, name string) {
	t.Helper()
	_, err := cp.Client.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: name}}, metav1.CreateOptions{})
	if err != nil && !apierrors.IsAlreadyExists(err) {
		t.Fatal(err)
	}
}

// mkOwnServiceEntry creates a v1 ServiceEntry that is deleted when the
// test ends, so the shared control plane's other tests never see it.
func mkOwnServiceEntry(t *testing.T, dyn dynamic.Interface, ns, name string, spec map[string]any) {
	t.Helper()
	mkServiceEntry(t, dyn, "v1", ns, name, spec)
	t.Cleanup(func() {
		err := dyn.Resource(serviceEntries).Namespace(ns).Delete(ctx, name, metav1.DeleteOptions{})
		if err != nil && !apierrors.IsNotFound(err) {
			t.Errorf("deleting ServiceEntry %s/%s: %v", ns, name, err)
		}
	})
}
