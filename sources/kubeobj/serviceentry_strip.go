package kubeobj

import "k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

// StripServiceEntry is an informer transform: it replaces each ServiceEntry with a
// copy holding only what DNS reads (identity, version, creation, hosts, addresses,
// exportTo and the allocated addresses of the status) before the object
// enters the cache. Ports, endpoints, workload selectors, annotations and
// managedFields are never kept. Values are kept as served, whatever their
// type: the conversion reports what is broken.
func StripServiceEntry(obj any) (any, error) {
	u, ok := obj.(*unstructured.Unstructured)
	if !ok {
		return obj, nil // tombstones pass through
	}
	meta := map[string]any{"name": u.GetName(), "resourceVersion": u.GetResourceVersion(), "uid": string(u.GetUID())}
	if ns := u.GetNamespace(); ns != "" {
		meta["namespace"] = ns
	}
	if created, ok := u.Object["metadata"].(map[string]any)["creationTimestamp"].(string); ok {
		meta["creationTimestamp"] = created // a new entry's trigger (see handler.OnAdd)
	}
	out := map[string]any{"apiVersion": u.GetAPIVersion(), "kind": u.GetKind(), "metadata": meta}
	if spec, ok := u.Object["spec"].(map[string]any); ok {
		out["spec"] = keep(spec, "hosts", "addresses", "exportTo")
	} else if v, found := u.Object["spec"]; found {
		out["spec"] = v
	}
	if status, ok := u.Object["status"].(map[string]any); ok {
		out["status"] = keep(status, "addresses")
	} else if v, found := u.Object["status"]; found {
		out["status"] = v
	}
	return &unstructured.Unstructured{Object: out}, nil
}

// keep copies the named fields of m that are present.
func keep(m map[string]any, fields ...string) map[string]any {
	out := make(map[string]any, len(fields))
	for _, f := range fields {
		if v, ok := m[f]; ok {
			out[f] = v
		}
	}
	return out
}
