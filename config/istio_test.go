package config

import (
	"slices"
	"strings"
	"testing"
)

// Mesh names are answered under `global` only unless the admin delegates
// more, and entries without exportTo are visible to all, as in Istio.
func TestIstioDefaults(t *testing.T) {
	cfg, err := Parse([]byte("kubernetes: {enabled: false}\nistio: {enabled: true}\n"))
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(cfg.Istio.Zones, []string{"global"}) || !slices.Equal(cfg.Istio.DefaultExportTo, []string{"*"}) {
		t.Fatalf("istio = %+v, want zones [global] and defaultExportTo [*]", cfg.Istio)
	}
	cfg, err = Parse([]byte("kubernetes: {enabled: false}\nistio: {enabled: true, zones: [.], defaultExportTo: [., istio-system]}\n"))
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(cfg.Istio.Zones, []string{"."}) || !slices.Equal(cfg.Istio.DefaultExportTo, []string{".", "istio-system"}) {
		t.Fatalf("istio = %+v, want zones [.] and defaultExportTo [. istio-system]", cfg.Istio)
	}
}

func TestIstioRejects(t *testing.T) {
	for _, c := range []struct{ name, istio, key string }{
		{"zone not a domain", "{zones: [\"mesh zone\"]}", "istio.zones[0]"},
		{"root beside a zone", "{zones: [., global]}", "istio.zones: \".\" holds every other zone"},
		{"exportTo not a namespace", "{defaultExportTo: [Tenant_A]}", "istio.defaultExportTo[0]"},
		{"exportTo empty name", "{defaultExportTo: [\"\"]}", "istio.defaultExportTo[0]"},
		{"nobody beside a namespace", "{defaultExportTo: [\"~\", a]}", "istio.defaultExportTo: \"~\""},
	} {
		t.Run(c.name, func(t *testing.T) {
			_, err := Parse([]byte("kubernetes: {enabled: false}\nistio: " + c.istio + "\n"))
			if err == nil || !strings.Contains(err.Error(), c.key) {
				t.Fatalf("err = %v, want one naming %s", err, c.key)
			}
		})
	}
}

// Namespace answers are the node tier's: a replica cannot tell which
// namespace asks.
func TestMeshNamespacesOnNodeLocalOnly(t *testing.T) {
	_, err := Parse([]byte("kubernetes: {enabled: false}\nnodeLocal: {meshNamespaces: true}\n"))
	if err == nil || !strings.Contains(err.Error(), "nodeLocal") {
		t.Fatalf("err = %v, want one naming nodeLocal", err)
	}
	cfg, err := Parse([]byte("mode: nodelocal\nkubernetes: {enabled: false}\ncluster: {replicas: [\"127.0.0.1:8090\"], remote: \"127.0.0.1:0\"}\nnodeLocal: {meshNamespaces: true}\n"))
	if err != nil {
		t.Fatal(err)
	}
	if !cfg.WatchesClients() {
		t.Fatal("nodeLocal.meshNamespaces does not watch this node's pods")
	}
}
