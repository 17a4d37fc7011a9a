package main

import (
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

// serve and check start from a Corefile or a kube-dns ConfigMap as
// `convert` converts it; --config beside them decides mode, cluster,
// memory and log; a line with no equivalent is an error naming it.
func TestLoadConfigFromCorefileAndKubeDNS(t *testing.T) {
	dir := t.TempDir()
	write := func(name, text string) string { return writeFileIn(t, dir, name, text) }
	core := write("Corefile", ".:5300 {\n    bind 127.0.0.1\n    cache 30\n    forward . 10.0.0.53\n}\n")
	base := write("base.yaml", "cluster: {replicationFactor: 3, nodeName: r0}\nlog: {format: json}\nhttp: {debug: [10.244.0.1]}\n")
	kubeDNS := write("kube-dns.yaml", kubeDNSConfigMap)
	federated := write("federated.yaml", "federations: |\n  {\"myfed\": \"example.com\"}\n")
	unmapped := write("Unmapped", ".:5300 {\n    nosuchplugin\n}\n")

	l, err := loadConfig("serve", []string{"--corefile", core, "--config", base})
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(l.cfg.DNS.Listen, []string{"127.0.0.1:5300"}) || !slices.Equal(l.cfg.Forward.Upstreams, []string{"10.0.0.53"}) {
		t.Errorf("from the Corefile: listen %v upstreams %v", l.cfg.DNS.Listen, l.cfg.Forward.Upstreams)
	}
	if *l.cfg.Cluster.ReplicationFactor != 3 || l.cfg.Cluster.NodeName != "r0" || l.cfg.Log.Format != "json" || l.watch == nil ||
		!slices.Equal(l.cfg.HTTP.Debug, []string{"10.244.0.1"}) {
		t.Errorf("from the base: cluster %+v log %+v http.debug %v (watched: %v)", l.cfg.Cluster, l.cfg.Log, l.cfg.HTTP.Debug, l.watch != nil)
	}

	l, err = loadConfig("serve", []string{"--kube-dns-configmap", kubeDNS})
	if err != nil {
		t.Fatal(err)
	}
	var stubs []string
	for _, s := range l.cfg.Forward.Stubs {
		stubs = append(stubs, s.Zones...)
	}
	if !slices.Contains(stubs, "acme.local") || !slices.Contains(l.cfg.Forward.Upstreams, "8.8.8.8") {
		t.Errorf("from the kube-dns ConfigMap: stubs %v upstreams %v", stubs, l.cfg.Forward.Upstreams)
	}

	if l, err = loadConfig("serve", []string{"--kube-dns-configmap", federated}); err != nil {
		t.Fatal(err)
	}
	if got := l.cfg.Federation.Names; got["myfed"] != "example.com" {
		t.Errorf("from the kube-dns federations: federation.names %v", got)
	}
	// Where the API is and which node this is come from the base, which
	// a kube-dns ConfigMap cannot say.
	deployment := write("deployment.yaml", "kubernetes: {kubeconfig: /etc/kube/config}\n"+
		"federation: {nodeZone: eu-west-1a, nodeRegion: eu-west-1}\n")
	if l, err = loadConfig("serve", []string{"--kube-dns-configmap", federated, "--config", deployment}); err != nil {
		t.Fatal(err)
	}
	if k, f := l.cfg.Kubernetes, l.cfg.Federation; k.Kubeconfig != "/etc/kube/config" || f.NodeZone != "eu-west-1a" ||
		f.NodeRegion != "eu-west-1" || f.Names["myfed"] != "example.com" {
		t.Errorf("kube-dns ConfigMap with a base: kubeconfig %q, federation %+v", k.Kubeconfig, f)
	}

	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"--corefile", unmapped}, "Unmapped:2"},
		{[]string{"--corefile", core, "--kube-dns-configmap", kubeDNS}, "not both"},
	} {
		if _, err := loadConfig("serve", tc.args); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("serve %v: %v, want an error naming %q", tc.args, err, tc.want)
		}
	}
}

// A kube-dns ConfigMap whose key is not JSON fails the load naming the
// file and the key: at start the process does not serve, on a reload the
// running configuration keeps serving (node.WithConfigSource).
func TestKubeDNSSourceMalformedKey(t *testing.T) {
	path := filepath.Join(t.TempDir(), "kube-dns.yaml")
	if err := os.WriteFile(path, []byte("stubDomains: '{\"acme.local\": [\"1.2.3.4\"'\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	_, err := corefileSource{path: path, kubeDNS: true}.load()
	if err == nil || !strings.Contains(err.Error(), path+": stubDomains: malformed JSON") {
		t.Errorf("load: %v, want an error naming the file and the key", err)
	}
}

// With a kube-dns ConfigMap, the base decides where to listen and how to
// reach the API server where it says so, as kube-dns's flags did; what it
// leaves out stays as the migration's Corefile has it. A Corefile says
// where to listen itself; a kubeconfig only when its kubernetes block
// names one, else the base's is used.
func TestLoadKubeDNSListenAndAPIFromBase(t *testing.T) {
	dir := t.TempDir()
	write := func(name, text string) string { return writeFileIn(t, dir, name, text) }
	kubeDNS := write("kube-dns.yaml", kubeDNSConfigMap)
	loopback := write("loopback.yaml", `dns: {listen: ["127.0.0.1:5300"]}
http: {listen: "127.0.0.1:8300", metricsListen: ["127.0.0.1:9300"]}
kubernetes: {kubeconfig: /etc/kube/config, context: ops}
`)
	sharding := write("sharding.yaml", "cluster: {replicationFactor: 3, nodeName: r0}\n")
	core := write("Corefile", ".:5353 {\n    bind 127.0.0.2\n    kubernetes cluster.local\n}\n")

	l, err := loadConfig("serve", []string{"--kube-dns-configmap", kubeDNS, "--config", loopback})
	if err != nil {
		t.Fatal(err)
	}
	k := l.cfg.Kubernetes
	if !slices.Equal(l.cfg.DNS.Listen, []string{"127.0.0.1:5300"}) || l.cfg.HTTP.Listen != "127.0.0.1:8300" ||
		!slices.Equal(l.cfg.HTTP.MetricsListen, []string{"127.0.0.1:9300"}) || k.Kubeconfig != "/etc/kube/config" || k.Context != "ops" {
		t.Errorf("from the base: dns %v http %q metrics %v kubeconfig %q context %q", l.cfg.DNS.Listen, l.cfg.HTTP.Listen, l.cfg.HTTP.MetricsListen, k.Kubeconfig, k.Context)
	}

	alone, err := loadConfig("serve", []string{"--kube-dns-configmap", kubeDNS})
	if err != nil {
		t.Fatal(err)
	}
	l, err = loadConfig("serve", []string{"--kube-dns-configmap", kubeDNS, "--config", sharding})
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(l.cfg.DNS.Listen, alone.cfg.DNS.Listen) || l.cfg.HTTP.Listen != alone.cfg.HTTP.Listen ||
		!slices.Equal(l.cfg.HTTP.MetricsListen, alone.cfg.HTTP.MetricsListen) || l.cfg.Kubernetes.Kubeconfig != "" {
		t.Errorf("a base without them changed the migration's: dns %v http %q metrics %v kubeconfig %q, want %v %q %v and none",
			l.cfg.DNS.Listen, l.cfg.HTTP.Listen, l.cfg.HTTP.MetricsListen, l.cfg.Kubernetes.Kubeconfig,
			alone.cfg.DNS.Listen, alone.cfg.HTTP.Listen, alone.cfg.HTTP.MetricsListen)
	}

	l, err = loadConfig("serve", []string{"--corefile", core, "--config", loopback})
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(l.cfg.DNS.Listen, []string{"127.0.0.2:5353"}) || l.cfg.Kubernetes.Kubeconfig != "/etc/kube/config" {
		t.Errorf("a Corefile's listen %v and kubeconfig %q, want its own listen and the base's kubeconfig", l.cfg.DNS.Listen, l.cfg.Kubernetes.Kubeconfig)
	}
}

// writeFileIn writes text to the file name in dir and returns its path.
func writeFileIn(t *testing.T, dir, name, text string) string {
	t.Helper()
	path := filepath.Join(dir, name)
	if err := os.WriteFile(path, []byte(text), 0o644); err != nil {
		t.Fatal(err)
	}
	return path
}
