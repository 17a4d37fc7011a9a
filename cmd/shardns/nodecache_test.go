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
