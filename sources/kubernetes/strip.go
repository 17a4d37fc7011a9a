package kubernetes

import (
	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/shardns/shardns/sources/kubeobj"
)

// strip is the informers' transform: it replaces each object with a copy
// holding only what DNS reads, before the object enters the cache. Large
// fields (managedFields, annotations, pod specs, endpoint topology) are
// never kept.
func strip(obj any) (any, error) {
	switch o := obj.(type) {
	case *corev1.Service:
		return &corev1.Service{
			ObjectMeta: slimMeta(o.ObjectMeta, nil),
			Spec: corev1.ServiceSpec{
				Type: o.Spec.Type, ClusterIP: o.Spec.ClusterIP, ClusterIPs: o.Spec.ClusterIPs,
				ExternalName: o.Spec.ExternalName, Ports: slimServicePorts(o.Spec.Ports),
			},
		}, nil
	case *discoveryv1.EndpointSlice:
		out := &discoveryv1.EndpointSlice{
			ObjectMeta:  slimMeta(o.ObjectMeta, []string{kubeobj.ServiceNameLabel}),
			AddressType: o.AddressType,
			Ports:       o.Ports,
			Endpoints:   make([]discoveryv1.Endpoint, len(o.Endpoints)),
		}
		for i, ep := range o.Endpoints {
			out.Endpoints[i] = discoveryv1.Endpoint{Addresses: ep.Addresses, Hostname: ep.Hostname,
				Conditions: discoveryv1.EndpointConditions{Ready: ep.Conditions.Ready}}
			if ep.TargetRef != nil {
				out.Endpoints[i].TargetRef = &corev1.ObjectReference{Kind: ep.TargetRef.Kind, Name: ep.TargetRef.Name}
			}
		}
		return out, nil
	case *corev1.Namespace:
		return &corev1.Namespace{ObjectMeta: slimMeta(o.ObjectMeta, nil)}, nil
	case *corev1.Pod:
		return &corev1.Pod{
			ObjectMeta: slimMeta(o.ObjectMeta, nil),
			Status:     corev1.PodStatus{Phase: o.Status.Phase, PodIP: o.Status.PodIP, PodIPs: o.Status.PodIPs},
		}, nil
	}
	return obj, nil // tombstones and anything else pass through
}

// slimMeta keeps identity, version and the labels named in keep.
func slimMeta(m metav1.ObjectMeta, keep []string) metav1.ObjectMeta {
	out := metav1.ObjectMeta{Name: m.Name, Namespace: m.Namespace, ResourceVersion: m.ResourceVersion, UID: m.UID}
	for _, k := range keep {
		if v, ok := m.Labels[k]; ok {
			if out.Labels == nil {
				out.Labels = map[string]string{}
			}
			out.Labels[k] = v
		}
	}
	return out
}

func slimServicePorts(ports []corev1.ServicePort) []corev1.ServicePort {
	out := make([]corev1.ServicePort, len(ports))
	for i, p := range ports {
		out[i] = corev1.ServicePort{Name: p.Name, Protocol: p.Protocol, Port: p.Port}
	}
	return out
}
