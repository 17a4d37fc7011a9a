package integration

import (
	"bufio"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"

	"github.com/shardns/shardns/integration/kubeapi"
)

// TestDNSPerf is `make bench`: shardns on a real apiserver loaded with 1k
// services (70% ClusterIP, 30% headless, 10 endpoints each, 20
// namespaces), measured with dnsperf. It prints numbers and asserts
// nothing about speed; it runs only with SHARDNS_BENCH=1.
func TestDNSPerf(t *testing.T) {
	if os.Getenv("SHARDNS_BENCH") == "" {
		t.Skip("set SHARDNS_BENCH=1 (make bench)")
	}
	cp := kubeapi.Start(t)
	client, err := kubernetes.NewForConfig(cp.RESTConfig())
	if err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	queries := generateCluster(t, client, 20, 1000, 10)
	t.Logf("generated 1000 services and 10000 endpoints in %v", time.Since(start).Round(time.Second))

	p := startShardns(t, fmt.Sprintf(`
dns: {listen: ["127.0.0.1:0"]}
http: {listen: "127.0.0.1:0", lameduck: 0s}
kubernetes: {enabled: true, kubeconfig: %q}
forward: {upstreams: []}
`, cp.Kubeconfig))
	_ = p.httpAddr
	qfile := filepath.Join(t.TempDir(), "queries.txt")
	if err := os.WriteFile(qfile, []byte(strings.Join(queries, "\n")+"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	host, port, _ := strings.Cut(p.addr, ":")
	pid := p.cmd.Process.Pid
	// Warm up: every name once.
	dnsperf(t, host, port, qfile, "-l", "3")

	cpu0 := cpuSeconds(t, pid)
	out := dnsperf(t, host, port, qfile, "-l", "20", "-c", "4", "-q", "200")
	cpu := cpuSeconds(t, pid) - cpu0
	qps := field(out, `Queries per second:\s+([\d.]+)`)
	sent := field(out, `Queries completed:\s+(\d+)`)
	t.Logf("max throughput: %.0f qps, server CPU %.1f s, %.0f queries per server CPU-second, "+
		"latency avg %s s max %s s, RSS %s",
		qps, cpu, sent/cpu, fieldStr(out, `Average Latency \(s\):\s+([\d.]+)`),
		fieldStr(out, `Latency.*max ([\d.]+)`), rss(t, pid))

	cpu0 = cpuSeconds(t, pid)
	out = dnsperf(t, host, port, qfile, "-l", "10", "-Q", "20000")
	cpu = cpuSeconds(t, pid) - cpu0
	t.Logf("at 20k qps: %.2f cores, latency avg %s s, lost %s",
		cpu/10, fieldStr(out, `Average Latency \(s\):\s+([\d.]+)`), fieldStr(out, `Queries lost:\s+(\d+)`))
}

// generateCluster creates the objects and returns the dnsperf query mix.
func generateCluster(t *testing.T, c kubernetes.Interface, namespaces, services, endpoints int) []string {
	t.Helper()
	for n := range namespaces {
		mkNamespace(t, c, fmt.Sprintf("bench%d", n), nil)
	}
	var mu sync.Mutex
	var queries []string
	var wg sync.WaitGroup
	work := make(chan int)
	for range 8 {
		wg.Go(func() {
			for i := range work {
				qs := createBenchService(t, c, i, namespaces, endpoints)
				mu.Lock()
				queries = append(queries, qs...)
				mu.Unlock()
			}
		})
	}
	for i := range services {
		work <- i
	}
	close(work)
	wg.Wait()
	return queries
}

func createBenchService(t *testing.T, c kubernetes.Interface, i, namespaces, endpoints int) []string {
	ns := fmt.Sprintf("bench%d", i%namespaces)
	name := fmt.Sprintf("svc%d", i)
	headless := i%10 >= 7
	svc := clusterIPService(ns, name)
	if headless {
		svc.Spec.ClusterIP = corev1.ClusterIPNone
	}
	created, err := c.CoreV1().Services(ns).Create(ctx, svc, metav1.CreateOptions{})
	if err != nil {
		t.Error(err)
		return nil
	}
	portName, port, proto := "http", int32(80), corev1.ProtocolTCP
	ready := true
	sl := &discoveryv1.EndpointSlice{
		ObjectMeta:  metav1.ObjectMeta{Namespace: ns, Name: name + "-1", Labels: map[string]string{discoveryv1.LabelServiceName: name}},
		AddressType: discoveryv1.AddressTypeIPv4,
		Ports:       []discoveryv1.EndpointPort{{Name: &portName, Port: &port, Protocol: &proto}},
	}
	for e := range endpoints {
		host := fmt.Sprintf("host-%d", e)
		sl.Endpoints = append(sl.Endpoints, discoveryv1.Endpoint{
			Addresses:  []string{fmt.Sprintf("10.%d.%d.%d", 200+i/2500, (i/10)%250, (i%10)*20+e+1)},
			Hostname:   &host,
			Conditions: discoveryv1.EndpointConditions{Ready: &ready},
		})
	}
	if _, err := c.DiscoveryV1().EndpointSlices(ns).Create(ctx, sl, metav1.CreateOptions{}); err != nil {
		t.Error(err)
		return nil
	}
	fqdn := name + "." + ns + ".svc.cluster.local"
	qs := []string{
		fqdn + " A",
		"_http._tcp." + fqdn + " SRV",
		name + "." + ns + ".svc.cluster.local." + ns + ".svc.cluster.local A", // ndots:5 search miss
		"nope" + name + "." + ns + ".svc.cluster.local A",
	}
	if headless {
		qs = append(qs, "host-3."+fqdn+" A")
	} else {
		qs = append(qs, reverse(created.Spec.ClusterIP)+" PTR")
	}
	return qs
}

func dnsperf(t *testing.T, host, port, file string, args ...string) string {
	t.Helper()
	full := append([]string{"-s", host, "-p", port, "-d", file}, args...)
	out, err := exec.Command("dnsperf", full...).CombinedOutput()
	if err != nil {
		t.Fatalf("dnsperf %v: %v\n%s", full, err, out)
	}
	return string(out)
}

func field(out, re string) float64 {
	v, _ := strconv.ParseFloat(fieldStr(out, re), 64)
	return v
}

func fieldStr(out, re string) string {
	m := regexp.MustCompile(re).FindStringSubmatch(out)
	if m == nil {
		return "?"
	}
	return m[1]
}

// cpuSeconds is the user+system CPU time of pid.
func cpuSeconds(t *testing.T, pid int) float64 {
	t.Helper()
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		t.Fatal(err)
	}
	f := strings.Fields(string(b)[strings.LastIndexByte(string(b), ')')+2:])
	utime, _ := strconv.ParseFloat(f[11], 64)
	stime, _ := strconv.ParseFloat(f[12], 64)
	return (utime + stime) / 100 // USER_HZ
}

func rss(t *testing.T, pid int) string {
	f, err := os.Open(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return "?"
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		if strings.HasPrefix(sc.Text(), "VmRSS:") {
			return strings.TrimSpace(strings.TrimPrefix(sc.Text(), "VmRSS:"))
		}
	}
	return "?"
}

// TestShardedMemory is part of `make bench`: 10k services and 100k
// endpoints, replicationFactor 1, with 1, 2 and 3 replicas; it prints each
// replica's RSS and records held.
func TestShardedMemory(t *testing.T) {
	if os.Getenv("SHARDNS_BENCH") == "" {
		t.Skip("set SHARDNS_BENCH=1 (make bench)")
	}
	cp := kubeapi.Start(t)
	client, err := kubernetes.NewForConfig(cp.RESTConfig())
	if err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	generateCluster(t, client, 100, 10000, 10)
	t.Logf("generated 10000 services and 100000 endpoints in %v", time.Since(start).Round(time.Second))
	var rs []*replicaProcess
	for i := range 3 {
		var seeds []string
		if i > 0 {
			seeds = []string{rs[0].gossip}
		}
		rs = append(rs, startReplicaProcessRF(t, cp, fmt.Sprintf("r%d", i), seeds, 1))
		settled(t, rs, len(rs))
		// Lost zones are held for the handoff grace (5 s here) before they go.
		time.Sleep(7 * time.Second)
		for _, r := range rs {
			runtime := scrape(t, r.http, "shardns_records_held")
			t.Logf("%d replicas: %s holds %.0f records, RSS %s", len(rs), r.http, runtime, rss(t, r.cmd.Process.Pid))
		}
	}
}

// TestPropagation is part of `make bench`: from a Service's creation
// through the API to its first correct answer, over 200 services.
func TestPropagation(t *testing.T) {
	if os.Getenv("SHARDNS_BENCH") == "" {
		t.Skip("set SHARDNS_BENCH=1 (make bench)")
	}
	cp := kubeapi.Start(t)
	mkNamespace(t, cp.Client, "prop", nil)
	n := startKubeNode(t, cp, "", true)
	var took []time.Duration
	for i := range 200 {
		start := time.Now()
		svc := mkService(t, cp.Client, clusterIPService("prop", fmt.Sprintf("s%d", i)))
		name := fmt.Sprintf("s%d.prop.svc.cluster.local.", i)
		for {
			if answerIs(n.addr, name, svc.Spec.ClusterIP) == nil {
				break
			}
			if time.Since(start) > 10*time.Second {
				t.Fatalf("%s not answered after 10s", name)
			}
			time.Sleep(2 * time.Millisecond) // polling interval of the measurement
		}
		took = append(took, time.Since(start))
	}
	slices.Sort(took)
	t.Logf("propagation over %d services (create → first correct answer): p50 %v, p99 %v, max %v",
		len(took), took[len(took)/2].Round(time.Millisecond), took[len(took)*99/100].Round(time.Millisecond),
		took[len(took)-1].Round(time.Millisecond))
}
