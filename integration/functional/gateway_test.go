package functional

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/miekg/dns"
	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/dynamic"
	"sigs.k8s.io/yaml"

	"github.com/shardns/shardns/cluster"
	"github.com/shardns/shardns/integration/harness"
	"github.com/shardns/shardns/integration/kubeapi"
	"github.com/shardns/shardns/internal/testutil"
)

// The Gateway API source against a real apiserver with the Gateway API's
// own CRDs (the standard channel of sigs.k8s.io/gateway-api, from the
// module cache): no Gateway controller runs, the test writes the
// Gateways' and Ingresses' status addresses itself, as a controller
// would. shardns serves a Corefile with k8s_gateway, on two replicas
// that each own half of the zones, and is asked as a client would.

// gatewayKinds are the Gateway API resources the test installs.
var gatewayKinds = map[string]schema.GroupVersionResource{
	"Gateway":   {Group: "gateway.networking.k8s.io", Version: "v1", Resource: "gateways"},
	"HTTPRoute": {Group: "gateway.networking.k8s.io", Version: "v1", Resource: "httproutes"},
	"GRPCRoute": {Group: "gateway.networking.k8s.io", Version: "v1", Resource: "grpcroutes"},
	"TLSRoute":  {Group: "gateway.networking.k8s.io", Version: "v1", Resource: "tlsroutes"},
}

// installGatewayCRDs installs the standard channel's CRDs of the kinds
// shardns reads and returns a dynamic client.
func installGatewayCRDs(t *testing.T, cp *kubeapi.ControlPlane) dynamic.Interface {
	t.Helper()
	out, err := exec.Command("go", "list", "-m", "-f", "{{.Dir}}", "sigs.k8s.io/gateway-api").Output()
	if err != nil {
		t.Fatalf("locating sigs.k8s.io/gateway-api in the module cache: %v", err)
	}
	dir := filepath.Join(strings.TrimSpace(string(out)), "config", "crd", "standard")
	var dyn dynamic.Interface
	for _, gvr := range gatewayKinds {
		data, err := os.ReadFile(filepath.Join(dir, gvr.Group+"_"+gvr.Resource+".yaml"))
		if err != nil {
			t.Fatal(err)
		}
		crd := &unstructured.Unstructured{}
		if err := yaml.Unmarshal(data, &crd.Object); err != nil {
			t.Fatal(err)
		}
		dyn = installCRD(t, cp, crd, gvr)
	}
	return dyn
}

// mkGatewayObject creates the object of kind written in YAML in ns, then
// writes status when there is one, as a controller does.
func mkGatewayObject(t *testing.T, dyn dynamic.Interface, ns, kind, text, status string) {
	t.Helper()
	gvr := gatewayKinds[kind]
	u := &unstructured.Unstructured{}
	if err := yaml.Unmarshal([]byte(text), &u.Object); err != nil {
		t.Fatal(err)
	}
	u.SetAPIVersion(gvr.GroupVersion().String())
	u.SetKind(kind)
	u.SetNamespace(ns)
	created, err := dyn.Resource(gvr).Namespace(ns).Create(ctx, u, metav1.CreateOptions{})
	if err != nil {
		t.Fatalf("%s %s: %v", kind, u.GetName(), err)
	}
	if status == "" {
		return
	}
	var st map[string]any
	if err := yaml.Unmarshal([]byte(status), &st); err != nil {
		t.Fatal(err)
	}
	created.Object["status"] = st
	if _, err := dyn.Resource(gvr).Namespace(ns).UpdateStatus(ctx, created, metav1.UpdateOptions{}); err != nil {
		t.Fatalf("%s %s status: %v", kind, u.GetName(), err)
	}
}

// gatewayStatus is a Gateway's status with addresses.
func gatewayStatus(addrs ...string) string {
	var b strings.Builder
	b.WriteString("addresses:\n")
	for _, a := range addrs {
		fmt.Fprintf(&b, "- {type: IPAddress, value: %q}\n", a)
	}
	return b.String()
}

// mkGatewayCluster writes, in namespace ns, two Gateways with addresses
// and routes of each kind, an Ingress and a LoadBalancer Service.
func mkGatewayCluster(t *testing.T, cp *kubeapi.ControlPlane, dyn dynamic.Interface, ns string) {
	t.Helper()
	harness.CreateNamespace(t, cp.Client, ns, nil)
	gw := func(name string) string {
		return "metadata: {name: " + name + "}\nspec:\n  gatewayClassName: example\n  listeners:\n  - {name: http, port: 80, protocol: HTTP}\n"
	}
	mkGatewayObject(t, dyn, ns, "Gateway", gw("public"), gatewayStatus("198.51.100.4", "2001:db8::4"))
	mkGatewayObject(t, dyn, ns, "Gateway", gw("internal"), gatewayStatus("198.51.100.5"))
	mkGatewayObject(t, dyn, ns, "HTTPRoute", `metadata: {name: web}
spec:
  hostnames: [web.gw.example.com]
  parentRefs: [{name: public, sectionName: http}]`, "")
	mkGatewayObject(t, dyn, ns, "HTTPRoute", `metadata: {name: both}
spec:
  hostnames: [both.gw.example.com, "*.apps.example.com"]
  parentRefs: [{name: public}, {name: internal, namespace: `+ns+`}]`, "")
	mkGatewayObject(t, dyn, ns, "GRPCRoute", `metadata: {name: grpc}
spec:
  hostnames: [grpc.example.com]
  parentRefs: [{name: internal}]`, "")
	mkGatewayObject(t, dyn, ns, "TLSRoute", `metadata: {name: tls}
spec:
  hostnames: [tls.example.com]
  parentRefs: [{name: public}]
  rules: [{backendRefs: [{name: backend, port: 443}]}]`, "")

	in, err := cp.Client.NetworkingV1().Ingresses(ns).Create(ctx, &networkingv1.Ingress{
		ObjectMeta: metav1.ObjectMeta{Name: "shop"},
		Spec: networkingv1.IngressSpec{
			DefaultBackend: &networkingv1.IngressBackend{Service: &networkingv1.IngressServiceBackend{Name: "shop",
				Port: networkingv1.ServiceBackendPort{Number: 80}}},
			Rules: []networkingv1.IngressRule{{Host: "shop.example.com"}},
		},
	}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	in.Status.LoadBalancer.Ingress = []networkingv1.IngressLoadBalancerIngress{{IP: "198.51.100.0"}}
	if _, err := cp.Client.NetworkingV1().Ingresses(ns).UpdateStatus(ctx, in, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}

	svc, err := cp.Client.CoreV1().Services(ns).Create(ctx, &corev1.Service{
		ObjectMeta: metav1.ObjectMeta{Name: "lb"},
		Spec: corev1.ServiceSpec{Type: corev1.ServiceTypeLoadBalancer,
			Ports: []corev1.ServicePort{{Name: "dns", Port: 53, Protocol: corev1.ProtocolUDP}}},
	}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	svc.Status.LoadBalancer.Ingress = []corev1.LoadBalancerIngress{{IP: "198.51.100.3"}}
	if _, err := cp.Client.CoreV1().Services(ns).UpdateStatus(ctx, svc, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
}

// gatewayCorefile answers example.com and example.org with k8s_gateway
// (every resource, ttl 30), and forwards the rest nowhere.
const gatewayCorefile = `example.com:{{dns}} example.org:{{dns}} {
    bind 127.0.0.1
    k8s_gateway example.com example.org {
        ttl 30
        secondary dns2.kube-system
        kubeconfig {{kubeconfig}}
    }
}
.:{{dns}} {
    bind 127.0.0.1
    health 127.0.0.1:{{health}}
    ready 127.0.0.1:{{ready}}
    forward . {{upstream}}
}
`

// gatewayAnswer asks addr and describes the response as a user reads it:
// rcode, then the answer and authority records (TTLs dropped: a remote
// owner's answer may come from a cache, counting down), sorted.
func gatewayAnswer(addr, name string, qtype uint16) (string, error) {
	r, err := testutil.Exchange(addr, "udp", name, qtype)
	if err != nil {
		return "", err
	}
	lines := []string{dns.RcodeToString[r.Rcode]}
	var rrs []string
	for _, sec := range [][]dns.RR{r.Answer, r.Ns} {
		for _, rr := range sec {
			f := strings.Split(rr.String(), "\t")
			if rr.Header().Ttl > 60 {
				f = append(f, "(TTL over 60)")
			}
			if soa, ok := rr.(*dns.SOA); ok {
				soa := *soa
				soa.Serial = 0 // each replica counts its own
				f = strings.Split(soa.String(), "\t")
			}
			rrs = append(rrs, strings.Join(append(f[:1:1], f[2:]...), " "))
		}
	}
	slices.Sort(rrs)
	return strings.Join(append(lines, rrs...), "\n"), nil
}

const (
	gatewaySOA = "example.com. IN SOA dns1.kube-system.example.com. hostmaster.dns1.kube-system.example.com. 0 7200 1800 86400 60"
	gatewayNS1 = "example.com. IN NS dns1.kube-system.example.com."
	gatewayNS2 = "example.com. IN NS dns2.kube-system.example.com."
)

// HTTPRoute, GRPCRoute and TLSRoute hostnames answer their Gateways'
// addresses, Ingress hosts and LoadBalancer Services their load
// balancers', from either replica; the zones answer as authoritative
// ones (SOA and NS at the apex, NXDOMAIN and NODATA with the SOA); a
// route deleted is a name gone.
func TestGateway(t *testing.T) {
	cp := kubeapi.Shared(t)
	dyn := installGatewayCRDs(t, cp)
	const ns = "gatewayapi"
	mkGatewayCluster(t, cp, dyn, ns)

	a := harness.StartCorefileReplica(t, cp, "gw0", "", gatewayCorefile)
	b := harness.StartCorefileReplica(t, cp, "gw1", a.Gossip, gatewayCorefile)
	rs := []*harness.Replica{a, b}
	harness.Settled(t, rs, 2)

	// A positive answer carries the zone's NS records in its authority
	// section, as authoritative servers (CoreDNS's file plugin, BIND) do.
	found := func(zone string, records ...string) []string {
		return append(append([]string{"NOERROR"}, records...),
			zone+". IN NS dns1.kube-system."+zone+".", zone+". IN NS dns2.kube-system."+zone+".")
	}
	cases := []struct {
		name  string
		qtype uint16
		want  []string
	}{
		{"web.gw.example.com.", dns.TypeA, found("example.com", "web.gw.example.com. IN A 198.51.100.4")},
		{"web.gw.example.com.", dns.TypeAAAA, found("example.com", "web.gw.example.com. IN AAAA 2001:db8::4")},
		{"Both.GW.example.com.", dns.TypeA, found("example.com", "Both.GW.example.com. IN A 198.51.100.4", "Both.GW.example.com. IN A 198.51.100.5")},
		{"anything.apps.example.com.", dns.TypeA, found("example.com", "anything.apps.example.com. IN A 198.51.100.4", "anything.apps.example.com. IN A 198.51.100.5")},
		{"grpc.example.com.", dns.TypeA, found("example.com", "grpc.example.com. IN A 198.51.100.5")},
		{"grpc.example.com.", dns.TypeAAAA, []string{"NOERROR", gatewaySOA}},
		{"tls.example.com.", dns.TypeA, found("example.com", "tls.example.com. IN A 198.51.100.4")},
		{"shop.example.com.", dns.TypeA, found("example.com", "shop.example.com. IN A 198.51.100.0")},
		{"lb." + ns + ".example.com.", dns.TypeA, found("example.com", "lb."+ns+".example.com. IN A 198.51.100.3")},
		{"lb." + ns + ".example.org.", dns.TypeA, found("example.org", "lb."+ns+".example.org. IN A 198.51.100.3")},
		{"nothing.example.com.", dns.TypeA, []string{"NXDOMAIN", gatewaySOA}},
		{"example.com.", dns.TypeSOA, found("example.com", gatewaySOA)},
		{"example.com.", dns.TypeNS, []string{"NOERROR", gatewayNS1, gatewayNS2}},
		{"example.com.", dns.TypeA, []string{"NOERROR", gatewaySOA}},
	}
	check := func(r *harness.Replica, name string, qtype uint16, want []string) error {
		got, err := gatewayAnswer(r.Addr, name, qtype)
		if err != nil {
			return err
		}
		w := append([]string{want[0]}, slices.Sorted(slices.Values(want[1:]))...)
		if got != strings.Join(w, "\n") {
			return fmt.Errorf("%s %s from %s:\n%s\nwant\n%s", name, dns.TypeToString[qtype], r.Addr, got, strings.Join(w, "\n"))
		}
		return nil
	}
	testutil.Eventually(t, 30*time.Second, func() error {
		for _, r := range rs {
			for _, c := range cases {
				if err := check(r, c.name, c.qtype, c.want); err != nil {
					return err
				}
			}
		}
		return nil
	})

	// Each zone has one owner: the other replica answered it through it.
	ring := cluster.NewRing("", []cluster.Member{{Name: "gw0", Owner: true}, {Name: "gw1", Owner: true}}, 1)
	for _, z := range []string{"example.com.", "example.org."} {
		t.Logf("%s is owned by gw0: %v, by gw1: %v", z, ring.Owns("gw0", z), ring.Owns("gw1", z))
	}

	if err := dyn.Resource(gatewayKinds["HTTPRoute"]).Namespace(ns).Delete(ctx, "web", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	testutil.Eventually(t, 30*time.Second, func() error {
		for _, r := range rs {
			if err := check(r, "web.gw.example.com.", dns.TypeA, []string{"NXDOMAIN", gatewaySOA}); err != nil {
				return err
			}
		}
		return nil
	})
	for _, r := range rs {
		if err := check(r, "Both.GW.example.com.", dns.TypeA, cases[2].want); err != nil {
			t.Error(err)
		}
	}
}
