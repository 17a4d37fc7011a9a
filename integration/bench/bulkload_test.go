package bench

import (
	"encoding/json"
	"fmt"
	"net/netip"
	"testing"

	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	networkingv1 "k8s.io/api/networking/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/shardns/shardns/integration/harness"
	"github.com/shardns/shardns/integration/kubeapi"
)

// bulkTemplates is how many services loadBenchServices creates through
// the API before writing the rest into etcd: every shape
// harness.CreateBenchService makes (harness.BenchService: i%10 decides whether a
// service is headless), as the apiserver stores it.
const bulkTemplates = 10

// loadBenchServices makes services svc<from>…svc<to-1> with their
// EndpointSlices, as harness.CreateBenchService does, and returns their queries
// as it does. The first ten are created through the API; the rest are
// copies of them, with their own names, UIDs, ClusterIPs (and the
// IPAddress objects that allocate them) and endpoint addresses, written
// into etcd while the apiserver is stopped: objects the apiserver itself
// stored (defaults and managed fields included), at thousands a second
// where the API creates about a hundred. The apiserver is running again
// when it returns.
func loadBenchServices(t *testing.T, cp *kubeapi.ControlPlane, from, to, namespaces, endpoints int) []string {
	t.Helper()
	if to-from <= bulkTemplates {
		return harness.GenerateServices(t, cp.Client, from, to, namespaces, endpoints)
	}
	queries := harness.GenerateServices(t, cp.Client, from, from+bulkTemplates, namespaces, endpoints)
	tmpl := map[bool]*benchObjects{} // by headless
	for i := from; i < from+bulkTemplates; i++ {
		if _, _, headless := harness.BenchService(i, namespaces); tmpl[headless] == nil {
			tmpl[headless] = readBenchObjects(t, cp, i, namespaces)
		}
	}
	if tmpl[false] == nil || tmpl[true] == nil {
		t.Fatalf("loadBenchServices: services %d to %d have not both shapes", from, from+bulkTemplates)
	}
	ips := freeClusterIPs(t, cp)
	var kvs []kubeapi.KeyValue
	for i := from + bulkTemplates; i < to; i++ {
		_, _, headless := harness.BenchService(i, namespaces)
		ip := ""
		if !headless {
			ip = ips()
		}
		objs := tmpl[headless].copyFor(i, namespaces, endpoints, ip)
		kvs = append(kvs, objs.keyValues(t)...)
		queries = append(queries, harness.BenchQueries(objs.service.Name, objs.service.Namespace, headless, ip)...)
	}
	cp.StopAPIServer(t)
	if err := cp.PutInEtcd(kvs); err != nil {
		t.Fatal(err)
	}
	cp.StartAPIServer(t)
	return queries
}

// benchObjects is one service of the bench as stored: the Service, its
// EndpointSlice and, for a ClusterIP on an apiserver that allocates
// with IPAddress objects, that object.
type benchObjects struct {
	service   *corev1.Service
	slice     *discoveryv1.EndpointSlice
	ipAddress *networkingv1.IPAddress
}

// readBenchObjects reads service i of the bench back from the API.
func readBenchObjects(t *testing.T, cp *kubeapi.ControlPlane, i, namespaces int) *benchObjects {
	t.Helper()
	ns, name, _ := harness.BenchService(i, namespaces)
	var o benchObjects
	var err error
	if o.service, err = cp.Client.CoreV1().Services(ns).Get(ctx, name, metav1.GetOptions{}); err != nil {
		t.Fatal(err)
	}
	if o.slice, err = cp.Client.DiscoveryV1().EndpointSlices(ns).Get(ctx, name+"-1", metav1.GetOptions{}); err != nil {
		t.Fatal(err)
	}
	if ip := o.service.Spec.ClusterIP; ip != corev1.ClusterIPNone {
		o.ipAddress, err = cp.Client.NetworkingV1().IPAddresses().Get(ctx, ip, metav1.GetOptions{})
		if apierrors.IsNotFound(err) {
			o.ipAddress, err = nil, nil // an allocator of bitmaps
		}
		if err != nil {
			t.Fatal(err)
		}
	}
	return &o
}

// copyFor is the template o made service i: its name, namespace, UID,
// ClusterIP and endpoint addresses as harness.CreateBenchService gives them.
func (o *benchObjects) copyFor(i, namespaces, endpoints int, clusterIP string) *benchObjects {
	ns, name, _ := harness.BenchService(i, namespaces)
	uid := func(kind int) types.UID {
		return types.UID(fmt.Sprintf("5a4d0000-0000-4000-8%03d-%012d", kind, i))
	}
	c := &benchObjects{service: o.service.DeepCopy(), slice: o.slice.DeepCopy()}
	c.service.TypeMeta = metav1.TypeMeta{APIVersion: "v1", Kind: "Service"}
	c.service.Namespace, c.service.Name, c.service.UID, c.service.ResourceVersion = ns, name, uid(1), ""
	if clusterIP != "" {
		c.service.Spec.ClusterIP, c.service.Spec.ClusterIPs = clusterIP, []string{clusterIP}
	}
	c.slice.TypeMeta = metav1.TypeMeta{APIVersion: "discovery.k8s.io/v1", Kind: "EndpointSlice"}
	c.slice.Namespace, c.slice.Name, c.slice.UID, c.slice.ResourceVersion = ns, name+"-1", uid(2), ""
	c.slice.Labels = map[string]string{discoveryv1.LabelServiceName: name}
	c.slice.Endpoints = harness.BenchEndpoints(i, endpoints)
	if o.ipAddress != nil && clusterIP != "" {
		c.ipAddress = o.ipAddress.DeepCopy()
		c.ipAddress.TypeMeta = metav1.TypeMeta{APIVersion: "networking.k8s.io/v1", Kind: "IPAddress"}
		c.ipAddress.Name, c.ipAddress.UID, c.ipAddress.ResourceVersion = clusterIP, uid(3), ""
		c.ipAddress.Spec.ParentRef.Namespace, c.ipAddress.Spec.ParentRef.Name = ns, name
	}
	return c
}

// keyValues is o at the apiserver's storage keys.
func (o *benchObjects) keyValues(t *testing.T) []kubeapi.KeyValue {
	t.Helper()
	put := func(key string, obj any) kubeapi.KeyValue {
		b, err := json.Marshal(obj)
		if err != nil {
			t.Fatal(err)
		}
		return kubeapi.KeyValue{Key: key, Value: b}
	}
	kvs := []kubeapi.KeyValue{
		put("/registry/services/specs/"+o.service.Namespace+"/"+o.service.Name, o.service),
		put("/registry/endpointslices/"+o.slice.Namespace+"/"+o.slice.Name, o.slice),
	}
	if o.ipAddress != nil {
		kvs = append(kvs, put("/registry/ipaddresses/"+o.ipAddress.Name, o.ipAddress))
	}
	return kvs
}

// freeClusterIPs returns a function that gives the IPv4 addresses of the
// apiserver's first Service range, from its 256th on, that no Service
// holds yet, one per call.
func freeClusterIPs(t *testing.T, cp *kubeapi.ControlPlane) func() string {
	t.Helper()
	prefix, err := netip.ParsePrefix(cp.ServiceCIDRs()[0])
	if err != nil || !prefix.Addr().Is4() {
		t.Fatalf("the apiserver's first Service range %q is not IPv4", cp.ServiceCIDRs()[0])
	}
	used := map[string]bool{}
	list, err := cp.Client.CoreV1().Services("").List(ctx, metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	for _, s := range list.Items {
		for _, ip := range s.Spec.ClusterIPs {
			used[ip] = true
		}
	}
	next := prefix.Masked().Addr()
	for range 256 {
		next = next.Next()
	}
	return func() string {
		for used[next.String()] {
			next = next.Next()
		}
		if !prefix.Contains(next) {
			t.Fatalf("the Service range %s is full", prefix)
		}
		ip := next.String()
		used[ip] = true
		return ip
	}
}

// TestLoadBenchServices checks the benches' loader: what it writes into
// etcd is served by the apiserver as the services it creates itself.
func TestLoadBenchServices(t *testing.T) {
	cp := kubeapi.Start(t)
	const namespaces, endpoints, services = 3, 4, 30
	for n := range namespaces {
		harness.CreateNamespace(t, cp.Client, fmt.Sprintf("bench%d", n), nil)
	}
	queries := loadBenchServices(t, cp, 0, services, namespaces, endpoints)
	if len(queries) != services*5 {
		t.Errorf("%d queries for %d services, want 5 each", len(queries), services)
	}
	list, err := cp.Client.CoreV1().Services("").List(ctx, metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	ips := map[string]string{}
	for _, s := range list.Items {
		ips[s.Namespace+"/"+s.Name] = s.Spec.ClusterIP
	}
	for i := range services {
		key := fmt.Sprintf("bench%d/svc%d", i%namespaces, i)
		ip, ok := ips[key]
		switch {
		case !ok:
			t.Errorf("service %s not served", key)
		case i%10 >= 7 && ip != corev1.ClusterIPNone:
			t.Errorf("service %s: ClusterIP %q, want headless", key, ip)
		case i%10 < 7 && ip == corev1.ClusterIPNone:
			t.Errorf("service %s: headless, want a ClusterIP", key)
		}
	}
	loaded, err := cp.Client.DiscoveryV1().EndpointSlices("bench2").Get(ctx, "svc29-1", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if n := len(loaded.Endpoints); n != endpoints || loaded.Endpoints[3].Addresses[0] != "10.200.2.184" ||
		loaded.Labels[discoveryv1.LabelServiceName] != "svc29" {
		t.Errorf("svc29's slice: %d endpoints, the fourth %v, labels %v", n, loaded.Endpoints[min(3, n-1)].Addresses, loaded.Labels)
	}
	svc25 := ips["bench1/svc25"]
	ipAddress, err := cp.Client.NetworkingV1().IPAddresses().Get(ctx, svc25, metav1.GetOptions{})
	if err != nil {
		t.Fatalf("svc25's ClusterIP %s: %v", svc25, err)
	}
	if ref := ipAddress.Spec.ParentRef; ref == nil || ref.Namespace != "bench1" || ref.Name != "svc25" {
		t.Errorf("IPAddress %s: parent %+v, want bench1/svc25", svc25, ipAddress.Spec.ParentRef)
	}
}
