package harness

import (
	"fmt"
	"os"
	"sync"
	"testing"

	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"

	"github.com/shardns/shardns/integration/kubeapi"
)

// GenerateCluster creates the objects and returns the dnsperf query mix.
func GenerateCluster(t testing.TB, c kubernetes.Interface, namespaces, services, endpoints int) []string {
	t.Helper()
	for n := range namespaces {
		CreateNamespace(t, c, fmt.Sprintf("bench%d", n), nil)
	}
	return GenerateServices(t, c, 0, services, namespaces, endpoints)
}

// GenerateServices creates services svc<from>… svc<to-1> as GenerateCluster
// does, in namespaces it has made.
func GenerateServices(t testing.TB, c kubernetes.Interface, from, to, namespaces, endpoints int) []string {
	t.Helper()
	var mu sync.Mutex
	var queries []string
	var wg sync.WaitGroup
	work := make(chan int)
	for range 8 {
		wg.Go(func() {
			for i := range work {
				qs := CreateBenchService(t, c, i, namespaces, endpoints)
				mu.Lock()
				queries = append(queries, qs...)
				mu.Unlock()
			}
		})
	}
	for i := from; i < to; i++ {
		work <- i
	}
	close(work)
	wg.Wait()
	return queries
}

// BenchService is the namespace and name of bench service i, and
// whether it is headless (three in ten are).
func BenchService(i, namespaces int) (ns, name string, headless bool) {
	return fmt.Sprintf("bench%d", i%namespaces), fmt.Sprintf("svc%d", i), i%10 >= 7
}

// BenchEndpoints are the ready endpoints of bench service i, host-0…,
// with addresses from 10.200.0.0 on, ten services to a /24.
func BenchEndpoints(i, endpoints int) []discoveryv1.Endpoint {
	ready := true
	var list []discoveryv1.Endpoint
	for e := range endpoints {
		host := fmt.Sprintf("host-%d", e)
		list = append(list, discoveryv1.Endpoint{
			Addresses:  []string{fmt.Sprintf("10.%d.%d.%d", 200+i/2500, (i/10)%250, (i%10)*20+e+1)},
			Hostname:   &host,
			Conditions: discoveryv1.EndpointConditions{Ready: &ready},
		})
	}
	return list
}

func CreateBenchService(t testing.TB, c kubernetes.Interface, i, namespaces, endpoints int) []string {
	ns, name, headless := BenchService(i, namespaces)
	svc := ClusterIPService(ns, name)
	if headless {
		svc.Spec.ClusterIP = corev1.ClusterIPNone
	}
	created, err := c.CoreV1().Services(ns).Create(ctx, svc, metav1.CreateOptions{})
	if err != nil {
		t.Error(err)
		return nil
	}
	portName, port, proto := "http", int32(80), corev1.ProtocolTCP
	sl := &discoveryv1.EndpointSlice{
		ObjectMeta:  metav1.ObjectMeta{Namespace: ns, Name: name + "-1", Labels: map[string]string{discoveryv1.LabelServiceName: name}},
		AddressType: discoveryv1.AddressTypeIPv4,
		Ports:       []discoveryv1.EndpointPort{{Name: &portName, Port: &port, Protocol: &proto}},
		Endpoints:   BenchEndpoints(i, endpoints),
	}
	if _, err := c.DiscoveryV1().EndpointSlices(ns).Create(ctx, sl, metav1.CreateOptions{}); err != nil {
		t.Error(err)
		return nil
	}
	return BenchQueries(name, ns, headless, created.Spec.ClusterIP)
}

// BenchControlPlane skips t unless SHARDNS_BENCH is set (make bench), then
// starts a control plane of its own, as the benchmarks' loads need one
// nothing else shares.
func BenchControlPlane(t testing.TB) (*kubeapi.ControlPlane, kubernetes.Interface) {
	t.Helper()
	if os.Getenv("SHARDNS_BENCH") == "" {
		t.Skip("set SHARDNS_BENCH=1 (make bench)")
	}
	cp := kubeapi.Start(t)
	client, err := kubernetes.NewForConfig(cp.RESTConfig())
	if err != nil {
		t.Fatal(err)
	}
	return cp, client
}

// BenchQueries are the dnsperf lines that ask for a bench service's
// names: its address, its port, a search-path miss, a name that does
// not exist, and an endpoint's name (headless) or its ClusterIP's PTR.
func BenchQueries(name, ns string, headless bool, clusterIP string) []string {
	fqdn := name + "." + ns + ".svc.cluster.local"
	qs := []string{
		fqdn + " A",
		"_http._tcp." + fqdn + " SRV",
		name + "." + ns + ".svc.cluster.local." + ns + ".svc.cluster.local A", // ndots:5 search miss
		"nope" + name + "." + ns + ".svc.cluster.local A",
	}
	if headless {
		return append(qs, "host-3."+fqdn+" A")
	}
	return append(qs, ReverseName(clusterIP)+" PTR")
}
