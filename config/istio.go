package config

import (
	"fmt"
	"slices"
)

// The Istio section's limits. A tenant who may create ServiceEntries in
// its own namespace must not change what other namespaces resolve: mesh
// names are answered only inside istio.zones (the zones the cluster admin
// delegates to the mesh, as istio-coredns's `global:53 { forward . … }`
// block did), and an entry's exportTo decides which namespaces see it,
// defaulting to istio.defaultExportTo as Istio's defaultServiceExportTo.

// The exportTo values Istio gives a meaning beyond a namespace name.
const (
	ExportAll  = "*" // every namespace
	ExportSelf = "." // the entry's own namespace
	ExportNone = "~" // no namespace
)

func (c *Config) validateIstio(bad func(key, format string, args ...any)) {
	i := &c.Istio
	if i.TTL < 0 || i.TTL > 3600 {
		bad("istio.ttl", "must be between 0 and 3600, got %d", i.TTL)
	}
	checkZones(bad, "istio.zones", i.Zones, true)
	if slices.Contains(i.Zones, ".") && len(i.Zones) > 1 {
		bad("istio.zones", "\".\" holds every other zone: list it alone")
	}
	for n, e := range i.DefaultExportTo {
		if !validExportTo(e) {
			bad(fmt.Sprintf("istio.defaultExportTo[%d]", n), "%q is not \"*\", \".\", \"~\" or a namespace name", e)
		}
	}
	if slices.Contains(i.DefaultExportTo, ExportNone) && len(i.DefaultExportTo) > 1 {
		bad("istio.defaultExportTo", "\"~\" (no namespace) must be listed alone")
	}
}

// validExportTo accepts Istio's special values and namespace names (RFC
// 1123 labels, as Kubernetes names namespaces).
func validExportTo(e string) bool {
	switch e {
	case ExportAll, ExportSelf, ExportNone:
		return true
	}
	if e == "" || len(e) > 63 || e[0] == '-' || e[len(e)-1] == '-' {
		return false
	}
	for _, c := range e {
		if !(c == '-' || ('a' <= c && c <= 'z') || ('0' <= c && c <= '9')) {
			return false
		}
	}
	return true
}
