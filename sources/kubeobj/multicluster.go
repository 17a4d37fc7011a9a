package kubeobj

import (
	"fmt"

	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/shardns/shardns/model"
)

// The Multi-Cluster Services API (KEP-1645): ServiceImports of the
// multicluster.x-k8s.io group, and the EndpointSlices an implementation
// imports from the clusters of a ClusterSet, labelled with the service
// they belong to and the cluster they come from.
const (
	MultiClusterGroup        = "multicluster.x-k8s.io"
	MultiClusterVersion      = "v1alpha1"
	ServiceImportResource    = "serviceimports"
	MultiClusterServiceLabel = "multicluster.kubernetes.io/service-name"
	SourceClusterLabel       = "multicluster.kubernetes.io/source-cluster"
)

// MultiClusterSlice converts an EndpointSlice labelled with
// MultiClusterServiceLabel; nil and no error for one without that label
// or listing FQDNs. An endpoint address that is not an IP fails the slice,
// as it does a cluster's own slice.
func MultiClusterSlice(e *discoveryv1.EndpointSlice) (*model.MultiClusterSlice, error) {
	sl, err := endpointSlice(e, e.Labels[MultiClusterServiceLabel])
	if sl == nil || err != nil {
		return nil, err
	}
	return &model.MultiClusterSlice{EndpointSlice: *sl, ClusterID: e.Labels[SourceClusterLabel]}, nil
}

// ServiceImport converts a ServiceImport read through the dynamic client.
// What cannot be served is skipped and described in warnings, the rest
// of the import still served: an entry of spec.ips that is not an IP
// address, a port out of range. A spec.type other than Headless is
// ClusterSetIP, as CoreDNS reads it. A field of the wrong shape fails the
// object, which is then logged and not served.
func ServiceImport(u *unstructured.Unstructured) (*model.ServiceImport, []string, error) {
	out := &model.ServiceImport{Namespace: u.GetNamespace(), Name: u.GetName(), ResourceVersion: u.GetResourceVersion()}
	where := "ServiceImport " + out.Namespace + "/" + out.Name
	if out.Name == "" {
		return nil, nil, fmt.Errorf("ServiceImport: metadata.name is empty")
	}
	typ, _, err := unstructured.NestedString(u.Object, "spec", "type")
	if err != nil {
		return nil, nil, fmt.Errorf("%s: spec.type: %w", where, err)
	}
	out.Headless = typ == "Headless"
	ips, _, err := unstructured.NestedStringSlice(u.Object, "spec", "ips")
	if err != nil {
		return nil, nil, fmt.Errorf("%s: spec.ips: %w", where, err)
	}
	var warnings []string
	for i, ip := range ips {
		a, err := parseIP(ip)
		if err != nil {
			warnings = append(warnings, fmt.Sprintf("%s: spec.ips[%d]: %q is not an IP address: skipped", where, i, ip))
			continue
		}
		out.IPs = append(out.IPs, a)
	}
	ports, _, err := unstructured.NestedSlice(u.Object, "spec", "ports")
	if err != nil {
		return nil, nil, fmt.Errorf("%s: spec.ports: %w", where, err)
	}
	for i, raw := range ports {
		p, ok := raw.(map[string]any)
		if !ok {
			return nil, nil, fmt.Errorf("%s: spec.ports[%d] is not an object", where, i)
		}
		port, err := importPort(p)
		if err != nil {
			warnings = append(warnings, fmt.Sprintf("%s: spec.ports[%d]: %v: skipped", where, i, err))
			continue
		}
		out.Ports = append(out.Ports, port)
	}
	return out, warnings, nil
}

// importPort reads one entry of a ServiceImport's spec.ports.
func importPort(p map[string]any) (model.Port, error) {
	name, _, err := unstructured.NestedString(p, "name")
	if err != nil {
		return model.Port{}, fmt.Errorf("name: %w", err)
	}
	proto, _, err := unstructured.NestedString(p, "protocol")
	if err != nil {
		return model.Port{}, fmt.Errorf("protocol: %w", err)
	}
	// JSON numbers arrive as int64 from the API server's decoder and as
	// float64 from other decoders.
	var number int64
	switch v := p["port"].(type) {
	case int64:
		number = v
	case float64:
		number = int64(v)
		if float64(number) != v {
			return model.Port{}, fmt.Errorf("port %v is not a whole number", v)
		}
	default:
		return model.Port{}, fmt.Errorf("port %v is not a number", p["port"])
	}
	if number <= 0 || number > 65535 {
		return model.Port{}, fmt.Errorf("port %d is out of range", number)
	}
	return model.Port{Name: name, Protocol: protocol(corev1.Protocol(proto)), Port: int32(number)}, nil
}
