package main

import (
	"bytes"
	"slices"
	"strings"
	"testing"
)

// nodeLocalDNSCorefile is NodeLocal DNSCache's Corefile (kubernetes/kubernetes
// cluster/addons/dns/nodelocaldns/nodelocaldns.yaml) as its installer
// leaves it with kube-proxy in iptables mode: the domain, the link-local
// address and the kube-dns ClusterIP filled, node-cache's placeholders
// not.
const nodeLocalDNSCorefile = `cluster.local:53 {
    errors
    cache {
            success 9984 30
            denial 9984 5
    }
    reload
    loop
    bind 169.254.20.10 10.96.0.10
    forward . __PILLAR__CLUSTER__DNS__ {
            force_tcp
    }
    prometheus :9253
    health 169.254.20.10:8080
    }
in-addr.arpa:53 {
    errors
    cache 30
    reload
    loop
    bind 169.254.20.10 10.96.0.10
    forward . __PILLAR__CLUSTER__DNS__ {
            force_tcp
    }
    prometheus :9253
    }
ip6.arpa:53 {
    errors
    cache 30
    reload
    loop
    bind 169.254.20.10 10.96.0.10
    forward . __PILLAR__CLUSTER__DNS__ {
            force_tcp
    }
    prometheus :9253
    }
.:53 {
    errors
    cache 30
    reload
    loop
    bind 169.254.20.10 10.96.0.10
    forward . __PILLAR__UPSTREAM__SERVERS__
    prometheus :9253
    }
`

// convert and serve fill node-cache's placeholders as node-cache does:
// the upstream Service's ClusterIP from its variable, the node's
// resolvers for the upstream servers; one that cannot be filled is an
// error naming it and its line.
func TestNodeCachePlaceholders(t *testing.T) {
	path := writeFileIn(t, t.TempDir(), "Corefile", nodeLocalDNSCorefile)
	t.Setenv("KUBE_DNS_UPSTREAM_SERVICE_HOST", "10.96.0.11")
	var out, errs bytes.Buffer
	if err := convert([]string{"--corefile", path, "--upstreamsvc", "kube-dns-upstream"}, nil, &out, &errs); err != nil {
		t.Fatalf("%v\n%s", err, errs.String())
	}
	for _, want := range []string{"    - 10.96.0.11\n", "  - 169.254.20.10:53\n  - 10.96.0.10:53\n"} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("convert's output lacks %q:\n%s", want, out.String())
		}
	}

	l, err := loadConfig("serve", []string{"--corefile", path, "--upstreamsvc", "kube-dns-upstream"})
	if err != nil {
		t.Fatal(err)
	}
	if got := l.cfg.Forward.Upstreams; !slices.Equal(got, []string{"/etc/resolv.conf"}) {
		t.Errorf("forward.upstreams %v, want the node's resolv.conf", got)
	}

	// node-cache's default Service is kube-dns, whose variable is unset.
	_, err = loadConfig("serve", []string{"--corefile", path})
	want := path + ":10: __PILLAR__CLUSTER__DNS__: the ClusterIP of Service kube-dns (--upstreamsvc) is unknown: KUBE_DNS_SERVICE_HOST is not set"
	if err == nil || !strings.Contains(err.Error(), want) {
		t.Errorf("error %v, want %q", err, want)
	}
	err = convert([]string{"--corefile", path}, nil, &out, &errs)
	if err == nil || !strings.Contains(err.Error(), want) {
		t.Errorf("convert's error %v, want %q", err, want)
	}
}

// With a base in mode: nodelocal, the blocks that forward the cluster's
// zones to the cluster DNS ask the owners instead; the root block keeps
// forwarding to the node's resolvers.
func TestNodeLocalDNSCorefileAsksOwners(t *testing.T) {
	dir := t.TempDir()
	path := writeFileIn(t, dir, "Corefile", nodeLocalDNSCorefile)
	base := writeFileIn(t, dir, "base.yaml", "mode: nodelocal\ncluster: {replicas: [\"127.0.0.1:8090\"], remote: \"127.0.0.1:0\"}\n"+
		"nodeLocal: {aaaa: nodata}\n")
	args := []string{"--corefile", path, "--config", base, "--cluster-dns", "10.96.0.11"}
	l, err := loadConfig("serve", args)
	if err != nil {
		t.Fatal(err)
	}
	cfg := l.cfg
	if k := cfg.Kubernetes; !slices.Equal(k.Zones, []string{"cluster.local"}) || !slices.Equal(k.ReverseZones, []string{"in-addr.arpa", "ip6.arpa"}) {
		t.Errorf("kubernetes zones %v reverse %v", k.Zones, k.ReverseZones)
	}
	if len(cfg.Forward.Stubs) != 0 || !slices.Equal(cfg.Forward.Upstreams, []string{"/etc/resolv.conf"}) {
		t.Errorf("forward: stubs %+v upstreams %v, want the node's resolvers alone", cfg.Forward.Stubs, cfg.Forward.Upstreams)
	}
	if len(cfg.Servers) != 1 || cfg.Servers[0].Chain == nil || !cfg.Servers[0].Chain.AnswersCluster() ||
		cfg.Servers[0].Chain.Cache == nil || cfg.Servers[0].Chain.Cache.DenialMaxTTL != 5 {
		t.Errorf("servers %+v, want cluster.local's chain asking the owners with its own cache", cfg.Servers)
	}
	if cfg.NodeLocal.AAAA != "nodata" {
		t.Errorf("nodeLocal %+v, want the base's", cfg.NodeLocal)
	}

	// A Corefile rendered already, without the cluster DNS's address:
	// which blocks are the cluster's is unknown.
	rendered := strings.NewReplacer("__PILLAR__CLUSTER__DNS__", "10.96.0.11", "__PILLAR__UPSTREAM__SERVERS__", "/etc/resolv.conf").
		Replace(nodeLocalDNSCorefile)
	path = writeFileIn(t, dir, "Rendered", rendered)
	_, err = loadConfig("serve", []string{"--corefile", path, "--config", base})
	if err == nil || !strings.Contains(err.Error(), "(mode: nodelocal): the cluster DNS the Corefile forwards the cluster's names to") {
		t.Errorf("error %v", err)
	}
}
