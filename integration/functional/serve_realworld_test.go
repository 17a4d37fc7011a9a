package functional

import (
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"testing"

	"github.com/miekg/dns"
	discoveryv1 "k8s.io/api/discovery/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"

	corefileconv "github.com/shardns/shardns/corefile"
	"github.com/shardns/shardns/integration/harness"
	"github.com/shardns/shardns/integration/kubeapi"
)

// realWorldDir holds the default Corefiles the distributions publish
// (EKS, AKS, k3s, kOps, MicroK8s, kubeadm), each as its project ships it.
const realWorldDir = "../../corefile/testdata/realworld"

// The coredns-custom files that AKS and k3s import from custom/, as
// AKS's documentation writes them: an override rewriting a domain onto
// a namespace's services (and the answers back), and a stub domain's
// server block.
const (
	realWorldOverride = `rewrite stop {
    name regex (.*)\.corp\.internal {1}.realworld.svc.cluster.local
    answer name (.*)\.realworld\.svc\.cluster\.local {1}.corp.internal
}
`
	realWorldServer = `corp.test:53 {
    errors
    cache 30
    forward . {{corp}}
}
`
)

// Every published Corefile of corefile/testdata/realworld, served by
// CoreDNS and by `shardns serve --corefile` as it is (on loopback ports,
// beside its NodeHosts and custom/ files where it reads them): the same
// rcode and records for cluster names, forwarded names, and what each
// Corefile adds.
func TestServeRealWorldCorefiles(t *testing.T) {
	files, err := filepath.Glob(filepath.Join(realWorldDir, "*.Corefile"))
	if err != nil || len(files) < 6 {
		t.Fatalf("%s holds %d Corefiles: %v", realWorldDir, len(files), err)
	}
	nodeHosts, err := os.ReadFile(filepath.Join(realWorldDir, "NodeHosts"))
	if err != nil {
		t.Fatal(err)
	}
	cp := kubeapi.Shared(t)
	c := cp.Client
	// The main upstream has a wrong address for the stub domain's name:
	// only the stub's upstream gives the right one.
	upstream := harness.StartUnbound(t, "www.example.test. 300 IN A 192.0.2.1", "wiki.corp.test. 300 IN A 6.6.6.6")
	corp := harness.StartUnbound(t, "wiki.corp.test. 300 IN A 192.0.2.80")
	web := mkRealWorldServices(t, c)

	for _, path := range files {
		src, err := os.ReadFile(path)
		if err != nil {
			t.Fatal(err)
		}
		text := string(src)
		t.Run(strings.TrimSuffix(filepath.Base(path), ".Corefile"), func(t *testing.T) {
			custom := strings.Contains(text, "import custom/")
			hosts := strings.Contains(text, "hosts NodeHosts")
			files := func(render func(string) string) map[string]string {
				files := map[string]string{}
				if custom {
					files["custom/names.override"] = realWorldOverride
					files["custom/corp.server"] = render(harness.LoopbackCorefile(realWorldServer))
				}
				if hosts {
					files["NodeHosts"] = string(nodeHosts)
				}
				return files
			}
			shardnsAt, corednsAt := besideCorefile{
				tmpl:  harness.LoopbackCorefile(text),
				vars:  map[string]string{"kubeconfig": cp.Kubeconfig, "upstream": upstream.Addr, "corp": corp.Addr},
				files: files,
				probe: "web.realworld.svc.cluster.local.",
			}.serve(t)
			shardns, coredns := shardnsAt["dns"], corednsAt["dns"]

			qs := realWorldQuestions(t, text, web, custom, hosts)
			harness.AskBoth(t, shardns, coredns, qs)
			sameSummaries(t, shardns, coredns, qs)
		})
	}
}

// sameSummaries checks that shardns answers each question as CoreDNS
// does beyond the answer's records harness.AskBoth checks: the same
// authoritative flag and the same kinds of authority records (a
// negative answer's SOA).
func sameSummaries(t *testing.T, shardns, coredns string, qs []harness.Question) {
	t.Helper()
	for _, q := range qs {
		got, err := harness.AnswerSummary(shardns, q.Name, q.Qtype)
		if err != nil {
			t.Fatal(err)
		}
		want, err := harness.AnswerSummary(coredns, q.Name, q.Qtype)
		if err != nil {
			t.Fatal(err)
		}
		if got != want {
			t.Errorf("%s %s:\n  shardns: %s\n  coredns: %s", q.Name, dns.TypeToString[q.Qtype], got, want)
		}
	}
}

// mkRealWorldServices makes the namespace realworld's Services once per
// API server, for every test that asks realWorldQuestions, and returns
// the ClusterIP of its Service web.
func mkRealWorldServices(t *testing.T, c kubernetes.Interface) string {
	t.Helper()
	realWorldOnce.Do(func() {
		harness.CreateNamespace(t, c, "realworld", nil)
		harness.CreateService(t, c, harness.ClusterIPService("realworld", "web"))
		harness.CreateService(t, c, harness.HeadlessService("realworld", "db"))
		harness.CreateEndpointSlice(t, c, "realworld", "db", "db-v4", discoveryv1.AddressTypeIPv4,
			harness.Endpoint{IP: "10.244.8.10", Hostname: "db-0"}, harness.Endpoint{IP: "10.244.8.11", Hostname: "db-1"})
	})
	web, err := c.CoreV1().Services("realworld").Get(ctx, "web", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	return web.Spec.ClusterIP
}

var realWorldOnce sync.Once

// realWorldQuestions is what a pod asks of the cluster's DNS served by
// the Corefile text, with the answers its TTLs give: the kubernetes
// plugin's ttl (5 unless set), cache 30 capping forwarded answers,
// NodeHosts' ttl 60; the coredns-custom names where it imports them.
func realWorldQuestions(t *testing.T, text, ip string, custom, hosts bool) []harness.Question {
	t.Helper()
	ttl := "5"
	if m := regexp.MustCompile(`kubernetes [^{]*\{[^}]*\bttl (\d+)`).FindStringSubmatch(text); m != nil {
		ttl = m[1]
	}
	if !strings.Contains(text, "cache 30") {
		t.Fatal("the Corefile has no cache 30: the forwarded answers' TTL below is its")
	}
	web, db := "web.realworld.svc.cluster.local.", "db.realworld.svc.cluster.local."
	qs := []harness.Question{
		{Name: web, Qtype: dns.TypeA, Rcode: dns.RcodeSuccess, Answer: []string{web + "\t" + ttl + "\tIN\tA\t" + ip}},
		{Name: db, Qtype: dns.TypeA, Rcode: dns.RcodeSuccess, Answer: []string{db + "\t" + ttl + "\tIN\tA\t10.244.8.10", db + "\t" + ttl + "\tIN\tA\t10.244.8.11"}},
		{Name: "db-1." + db, Qtype: dns.TypeA, Rcode: dns.RcodeSuccess, Answer: []string{"db-1." + db + "\t" + ttl + "\tIN\tA\t10.244.8.11"}},
		{Name: "_http._tcp." + web, Qtype: dns.TypeSRV, Rcode: dns.RcodeSuccess, Answer: []string{"_http._tcp." + web + "\t" + ttl + "\tIN\tSRV\t0 100 80 " + web}},
		{Name: "nope.realworld.svc.cluster.local.", Qtype: dns.TypeA, Rcode: dns.RcodeNameError, Answer: nil},
		{Name: harness.ReverseName(ip), Qtype: dns.TypePTR, Rcode: dns.RcodeSuccess, Answer: []string{harness.ReverseName(ip) + "\t" + ttl + "\tIN\tPTR\t" + web}},
		{Name: "10-244-1-1.realworld.pod.cluster.local.", Qtype: dns.TypeA, Rcode: dns.RcodeSuccess, Answer: []string{"10-244-1-1.realworld.pod.cluster.local.\t" + ttl + "\tIN\tA\t10.244.1.1"}},
		{Name: "www.example.test.", Qtype: dns.TypeA, Rcode: dns.RcodeSuccess, Answer: []string{"www.example.test.\t30\tIN\tA\t192.0.2.1"}},
		{Name: "missing.example.test.", Qtype: dns.TypeA, Rcode: dns.RcodeNameError, Answer: nil},
	}
	if hosts {
		qs = append(qs, harness.Question{Name: "node-b.", Qtype: dns.TypeA, Rcode: dns.RcodeSuccess, Answer: []string{"node-b.\t60\tIN\tA\t192.168.1.11"}})
	}
	if custom {
		qs = append(qs,
			harness.Question{Name: "web.corp.internal.", Qtype: dns.TypeA, Rcode: dns.RcodeSuccess, Answer: []string{"web.corp.internal.\t" + ttl + "\tIN\tA\t" + ip}},
			harness.Question{Name: "wiki.corp.test.", Qtype: dns.TypeA, Rcode: dns.RcodeSuccess, Answer: []string{"wiki.corp.test.\t30\tIN\tA\t192.0.2.80"}})
	}
	return qs
}

// kubeDNSConfigMap is a kube-dns ConfigMap as GKE's documentation writes
// one: two stub domains, each to its own nameserver, and the upstream
// nameservers for every other name; the addresses are the test's Unbounds.
const kubeDNSConfigMap = `apiVersion: v1
kind: ConfigMap
metadata:
  name: kube-dns
  namespace: kube-system
data:
  stubDomains: |
    {"acme.test": ["{{acme}}"], "corp.test": ["{{corp}}"]}
  upstreamNameservers: |
    ["{{upstream}}"]
`

// kubeDNSBase is the base configuration that puts `serve
// --kube-dns-configmap` on loopback ports and the test's API server, as
// kube-dns's --dns-port and --kubecfg-file flags did.
const kubeDNSBase = `dns: {listen: ["127.0.0.1:{{dns}}"]}
http: {listen: "127.0.0.1:{{http}}", metricsListen: ["127.0.0.1:{{metrics}}"]}
kubernetes: {kubeconfig: {{kubeconfig}}}
`

// A kube-dns ConfigMap served by `shardns serve --kube-dns-configmap`
// and, by CoreDNS, as the Corefile its migration makes of it
// (corefile.KubeDNSCorefile): the same answers for cluster names, names
// of both stub domains, each from its own Unbound, and upstream names.
func TestServeKubeDNSConfigMapBesideCoreDNS(t *testing.T) {
	cp := kubeapi.Shared(t)
	web := mkRealWorldServices(t, cp.Client)
	// The upstream has wrong addresses for the stub domains' names: only
	// their own nameservers give the right ones.
	upstream := harness.StartUnbound(t, "www.example.test. 300 IN A 192.0.2.1",
		"www.acme.test. 300 IN A 6.6.6.6", "wiki.corp.test. 300 IN A 6.6.6.6")
	acme := harness.StartUnbound(t, "www.acme.test. 300 IN A 192.0.2.90")
	corp := harness.StartUnbound(t, "wiki.corp.test. 300 IN A 192.0.2.80")
	vars := map[string]string{"kubeconfig": cp.Kubeconfig, "upstream": upstream.Addr, "acme": acme.Addr, "corp": corp.Addr}
	configMap := harness.RenderCorefile(t, kubeDNSConfigMap, vars).Text

	dir := t.TempDir()
	path, basePath := filepath.Join(dir, "kube-dns.yaml"), filepath.Join(dir, "base.yaml")
	base := harness.RenderCorefile(t, kubeDNSBase, vars)
	for name, data := range map[string]string{path: configMap, basePath: base.Text} {
		if err := os.WriteFile(name, []byte(data), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	shardns := harness.Start(t, harness.Options{Args: []string{"--kube-dns-configmap", path, "--config", basePath}})
	shardns.WaitReady(t)

	text, err := corefileconv.KubeDNSCorefile([]byte(configMap), corefileconv.KubeDNSOptions{})
	if err != nil {
		t.Fatal(err)
	}
	run := harness.RenderCorefile(t, harness.LoopbackCorefile(string(text)), vars)
	coredns := harness.StartCoreDNS(t, harness.CoreDNSOptions{Corefile: run.Text, Addr: run.Addrs["dns"], Probe: "web.realworld.svc.cluster.local."})

	qs := append(realWorldQuestions(t, string(text), web, false, false),
		harness.Question{Name: "www.acme.test.", Qtype: dns.TypeA, Rcode: dns.RcodeSuccess, Answer: []string{"www.acme.test.\t30\tIN\tA\t192.0.2.90"}},
		harness.Question{Name: "wiki.corp.test.", Qtype: dns.TypeA, Rcode: dns.RcodeSuccess, Answer: []string{"wiki.corp.test.\t30\tIN\tA\t192.0.2.80"}})
	harness.AskBoth(t, shardns.Addr, coredns, qs)
	sameSummaries(t, shardns.Addr, coredns, qs)
}

// The seeds' example, corefile/testdata/seeds.Corefile: a kubernetes
// plugin whose zones are its "." block's. CoreDNS 1.15 serves cluster
// names under the root then, and NXDOMAIN for cluster.local names and
// every other name; shardns serves the same. CoreDNS 1.15 has no proxy,
// so both run it as forward, which the converter maps it to.
func TestServeRootKubernetesBesideCoreDNS(t *testing.T) {
	src, err := os.ReadFile("../../corefile/testdata/seeds.Corefile")
	if err != nil {
		t.Fatal(err)
	}
	cp := kubeapi.Shared(t)
	ip := mkRealWorldServices(t, cp.Client)
	upstream := harness.StartUnbound(t, "www.example.test. 300 IN A 192.0.2.1")
	text := strings.Replace(string(src), "proxy . 8.8.8.8", "forward . {{upstream}}", 1)
	run := harness.RenderCorefile(t, harness.LoopbackCorefile(text), map[string]string{"kubeconfig": cp.Kubeconfig, "upstream": upstream.Addr})
	dir := t.TempDir()
	path := filepath.Join(dir, "Corefile")
	if err := os.WriteFile(path, []byte(run.Text), 0o644); err != nil {
		t.Fatal(err)
	}
	shardns := harness.Start(t, harness.Options{Dir: dir, Args: []string{"--corefile", path}}).Addr
	coreRun := harness.RenderCorefile(t, harness.LoopbackCorefile(text), map[string]string{"kubeconfig": cp.Kubeconfig, "upstream": upstream.Addr})
	coredns := harness.StartCoreDNS(t, harness.CoreDNSOptions{Dir: t.TempDir(), Corefile: coreRun.Text, Addr: coreRun.Addrs["dns"], Probe: "web.realworld.svc."})

	qs := []harness.Question{
		{Name: "web.realworld.svc.", Qtype: dns.TypeA, Rcode: dns.RcodeSuccess, Answer: []string{"web.realworld.svc.\t5\tIN\tA\t" + ip}},
		{Name: "db-1.db.realworld.svc.", Qtype: dns.TypeA, Rcode: dns.RcodeSuccess, Answer: []string{"db-1.db.realworld.svc.\t5\tIN\tA\t10.244.8.11"}},
		{Name: "realworld.svc.", Qtype: dns.TypeA, Rcode: dns.RcodeSuccess, Answer: nil},
		{Name: "nope.realworld.svc.", Qtype: dns.TypeA, Rcode: dns.RcodeNameError, Answer: nil},
		{Name: "web.realworld.svc.cluster.local.", Qtype: dns.TypeA, Rcode: dns.RcodeNameError, Answer: nil},
		{Name: "www.example.test.", Qtype: dns.TypeA, Rcode: dns.RcodeNameError, Answer: nil},
	}
	harness.AskBoth(t, shardns, coredns, qs)
	sameSummaries(t, shardns, coredns, qs)
	// The reverse name of the service is where the two part: CoreDNS 1.15
	// gives no answer within 8 s (its kubernetes plugin leaves reverse
	// names in the root zone to forward, and the test's Unbound, with no
	// internet to recurse to, answers nothing in time); shardns denies it
	// as every other name of the root zone it does not hold.
	harness.AnswersAre(t, shardns, harness.Question{Name: harness.ReverseName(ip), Qtype: dns.TypePTR, Rcode: dns.RcodeNameError, Answer: nil})
}
