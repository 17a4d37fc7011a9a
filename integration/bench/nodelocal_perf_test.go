package bench

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/shardns/shardns/integration/harness"
)

// TestNodeLocalPerf is part of `make bench`: the node tier's cache-hit
// path. One replica (manifest source, 1k dual-stack services in 20
// namespaces) answers for the cluster; in front of it a node-local
// shardns process, and beside it CoreDNS with NodeLocal DNSCache's
// Corefile (cache success 9984 30 / denial 9984 5, forward over TCP to the
// same replica). Both caches are warmed, then the same dnsperf runs ask
// both the same cached questions (A, AAAA, SRV, NXDOMAIN), and the
// queries per server CPU-second of each, and their ratio, are printed.
// Only the front servers' CPU is counted; the replica behind both is the
// same. It asserts nothing about speed; it fails when the two answer a
// question differently. It runs only with SHARDNS_BENCH=1.
func TestNodeLocalPerf(t *testing.T) {
	if os.Getenv("SHARDNS_BENCH") == "" {
		t.Skip("set SHARDNS_BENCH=1 (make bench)")
	}
	corednsBin := harness.BuildCoreDNS(t)
	dir := t.TempDir()
	manifest, queries := nodeLocalManifest(20, 50)
	mfile := filepath.Join(dir, "cluster.yaml")
	qfile := filepath.Join(dir, "queries.txt")
	os.WriteFile(mfile, []byte(manifest), 0o644)
	os.WriteFile(qfile, []byte(strings.Join(queries, "\n")+"\n"), 0o644)

	replicaDNS := fmt.Sprintf("127.0.0.1:%d", harness.FreePort(t))
	remote := fmt.Sprintf("127.0.0.1:%d", harness.FreePort(t))
	replica := harness.Start(t, harness.Options{Config: fmt.Sprintf(`
dns: {listen: [%q]}
http: {listen: "127.0.0.1:0", lameduck: 0s}
kubernetes: {enabled: false}
manifests: {files: [%q]}
forward: {upstreams: []}
cluster:
  enabled: true
  nodeName: r0
  bind: "127.0.0.1:%d"
  remote: %q
  replicationFactor: 1
  gossip: fast
`, replicaDNS, mfile, harness.FreePort(t), remote)})

	replica.WaitReady(t)
	nl := harness.StartNodeLocalProcess(t, "nl0", remote)
	servers := []*benchServer{
		{name: "shardns-nodelocal", addr: nl.Addr, pid: nl.Cmd.Process.Pid},
		startNodeLocalDNS(t, corednsBin, replicaDNS),
	}
	sideBySide(t, servers, "svc0.nl0.svc.cluster.local.", qfile, queries)
	sh, co := servers[0], servers[1]
	ratio := sh.perCPUSecond() / co.perCPUSecond()
	verdict := "met"
	if ratio < 3 {
		verdict = "MISSED"
	}
	t.Logf("node-local shardns/coredns queries per server CPU-second: %.0f / %.0f = %.2f× (target 3.0×: %s)",
		sh.perCPUSecond(), co.perCPUSecond(), ratio, verdict)
	for i := range sh.runs {
		t.Logf("  round %d: %.0f / %.0f = %.2f×", i+1, sh.runs[i].perCPUSecond(), co.runs[i].perCPUSecond(),
			sh.runs[i].perCPUSecond()/co.runs[i].perCPUSecond())
	}
	t.Logf("node-local coredns/shardns CPU at 20k qps: %.2f / %.2f cores = %.2f× (above 1: shardns spends less)",
		co.fixedCores(), sh.fixedCores(), co.fixedCores()/sh.fixedCores())
}

// nodeLocalManifest is a cluster of namespaces × services dual-stack
// ClusterIP services with a named port, as a manifest, and the dnsperf
// questions about it: A, AAAA and SRV of each service, and A of a name
// that does not exist in its namespace.
func nodeLocalManifest(namespaces, services int) (string, []string) {
	var b strings.Builder
	var queries []string
	for n := range namespaces {
		fmt.Fprintf(&b, "apiVersion: v1\nkind: Namespace\nmetadata: {name: nl%d}\n---\n", n)
	}
	for i := range namespaces * services {
		ns, name := fmt.Sprintf("nl%d", i%namespaces), fmt.Sprintf("svc%d", i/namespaces)
		fmt.Fprintf(&b, `apiVersion: v1
kind: Service
metadata: {name: %s, namespace: %s}
spec:
  ipFamilyPolicy: RequireDualStack
  ipFamilies: [IPv4, IPv6]
  clusterIP: 10.96.%d.%d
  clusterIPs: [10.96.%[3]d.%[4]d, "fd00:10:96::%[5]x"]
  ports: [{name: http, port: 80, protocol: TCP}]
---
`, name, ns, 10+i/250, 1+i%250, i+1)
		fqdn := name + "." + ns + ".svc.cluster.local"
		queries = append(queries, fqdn+" A", fqdn+" AAAA", "_http._tcp."+fqdn+" SRV",
			"nope"+name+"."+ns+".svc.cluster.local A")
	}
	return b.String(), queries
}

// nodeLocalCorefile is the Corefile of NodeLocal DNSCache's ConfigMap
// (k8s.io/kubernetes cluster/addons/dns/nodelocaldns) for the cluster
// zone, on loopback ports: its cache sizes and TTL caps, forward over TCP
// to the cluster DNS, and its errors, reload, loop, bind, prometheus and
// health. Its in-addr.arpa and ip6.arpa blocks are the same plugins and
// see no question of the mix.
const nodeLocalCorefile = `cluster.local:%d {
    errors
    cache {
        success 9984 30
        denial 9984 5
    }
    reload
    loop
    bind 127.0.0.1
    forward . %s {
        force_tcp
    }
    prometheus 127.0.0.1:%d
    health 127.0.0.1:%d
}
`

// startNodeLocalDNS runs CoreDNS with nodeLocalCorefile forwarding to
// upstream, and stops it at test end.
func startNodeLocalDNS(t *testing.T, bin, upstream string) *benchServer {
	t.Helper()
	port := harness.FreePort(t)
	text := fmt.Sprintf(nodeLocalCorefile, port, upstream, harness.FreePort(t), harness.FreePort(t))
	return runCoreDNS(t, bin, "coredns-nodelocaldns", port, []byte(text))
}
