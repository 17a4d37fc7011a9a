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
	write := func(name, text string) string {
		t.Helper()
		path := filepath.Join(dir, name)
		if err := os.WriteFile(path, []byte(text), 0o644); err != nil {
			t.Fatal(err)
		}
		return path
	}
	core := write("Corefile", ".:5300 {\n    bind 127.0.0.1\n    cache 30\n    forward . 10.0.0.53\n}\n")
	base := write("base.yaml", "cluster: {replicationFactor: 3, nodeName: r0}\nlog: {format: json}\n")
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
	if *l.cfg.Cluster.ReplicationFactor != 3 || l.cfg.Cluster.NodeName != "r0" || l.cfg.Log.Format != "json" || l.watch == nil {
		t.Errorf("from the base: cluster %+v log %+v (watched: %v)", l.cfg.Cluster, l.cfg.Log, l.watch != nil)
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
