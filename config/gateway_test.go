package config

import (
	"reflect"
	"strings"
	"testing"
)

// The gateway section has k8s_gateway's defaults.
func TestGatewayDefaults(t *testing.T) {
	cfg, err := Parse([]byte("kubernetes: {enabled: false}\ngateway: {enabled: true, zones: [example.com]}\n"))
	if err != nil {
		t.Fatal(err)
	}
	want := GatewayConfig{Enabled: true, Zones: []string{"example.com"}, TTL: 60, Apex: "dns1.kube-system"}
	if !reflect.DeepEqual(cfg.Gateway, want) {
		t.Fatalf("gateway = %+v, want %+v", cfg.Gateway, want)
	}
}

func TestGatewayRejects(t *testing.T) {
	for _, c := range []struct{ name, cfg, key string }{
		{"no zone", "gateway: {enabled: true}", "gateway.zones"},
		{"zone not a domain", "gateway: {enabled: true, zones: [\"a zone\"]}", "gateway.zones[0]"},
		{"inside a cluster zone", "kubernetes: {zones: [cluster.local]}\ngateway: {enabled: true, zones: [gw.cluster.local]}", "gateway.zones[0]: \"gw.cluster.local\" shares names"},
		{"a zone file's origin", "files: {zones: [{file: /z, origin: example.com}]}\ngateway: {enabled: true, zones: [example.com]}", "gateway.zones[0]: \"example.com\" is also a zone file's origin"},
		{"unknown kind", "gateway: {enabled: true, zones: [example.com], resources: [Ingress, VirtualServer]}", "gateway.resources[1]"},
		{"ttl", "gateway: {enabled: true, zones: [example.com], ttl: 4000}", "gateway.ttl"},
		{"apex", "gateway: {enabled: true, zones: [example.com], apex: \"\"}", "gateway.apex"},
		{"context without kubeconfig", "gateway: {enabled: true, zones: [example.com], context: c}", "gateway.context"},
	} {
		t.Run(c.name, func(t *testing.T) {
			src := c.cfg
			if !strings.Contains(src, "kubernetes:") {
				src = "kubernetes: {enabled: false}\n" + src
			}
			_, err := Parse([]byte(src + "\n"))
			if err == nil || !strings.Contains(err.Error(), c.key) {
				t.Fatalf("err = %v, want one naming %s", err, c.key)
			}
		})
	}
}
