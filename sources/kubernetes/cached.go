package kubernetes

import (
	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/shardns/shardns/sources/kubeobj"
)

// cached is what the informers store in place of an API object: its
// identity and the model object converted from it. The zone actors and
// their snapshots hold the same model object, so an object of a zone this
// replica serves costs its cache entry little more than this struct; the
// API object itself is never kept.
type cached struct {
	namespace, name, resourceVersion string
	// object is the model object, or nil when DNS serves nothing from
	// the API object: an FQDN slice, a finished pod, a namespace outside
	// kubernetes.namespaces.
	object any
	// err says why the API object could not be converted; such an
	// object is logged and never served.
	err error
}

// GetObjectMeta lets the informer's key functions read the identity.
func (c *cached) GetObjectMeta() metav1.Object {
	return &metav1.ObjectMeta{Namespace: c.namespace, Name: c.name, ResourceVersion: c.resourceVersion}
}

// transformFor returns the informers' transform: it converts each API
// object to a cached entry before the object enters the cache or reaches
// the handler. Objects of namespaces outside kubernetes.namespaces keep
// no model object. The transform is idempotent, as client-go asks.
func transformFor(exposed func(namespace string) bool) func(any) (any, error) {
	return func(obj any) (any, error) {
		var meta metav1.ObjectMeta
		var object any
		var err error
		switch o := obj.(type) {
		case *cached:
			return o, nil
		case *corev1.Service:
			meta = o.ObjectMeta
			object, err = nilIfEmpty(kubeobj.Service(o))
		case *discoveryv1.EndpointSlice:
			meta = o.ObjectMeta
			object, err = nilIfEmpty(kubeobj.EndpointSlice(o))
		case *corev1.Namespace:
			meta = o.ObjectMeta
			object, err = nilIfEmpty(kubeobj.Namespace(o))
		case *corev1.Pod:
			meta = o.ObjectMeta
			if o.Status.Phase != corev1.PodSucceeded && o.Status.Phase != corev1.PodFailed {
				object, err = nilIfEmpty(kubeobj.Pod(o)) // a finished pod's IPs are free for others
			}
		default:
			return obj, nil // tombstones pass through
		}
		c := &cached{namespace: meta.Namespace, name: meta.Name, resourceVersion: meta.ResourceVersion, object: object, err: err}
		if !exposed(c.exposedAs()) {
			c.object, c.err = nil, nil
		}
		return c, nil
	}
}

// exposedAs is the namespace kubernetes.namespaces is matched against: a
// namespace's own name, or the namespace an object lies in.
func (c *cached) exposedAs() string {
	if c.namespace == "" {
		return c.name
	}
	return c.namespace
}

// nilIfEmpty turns a typed nil pointer into an untyped nil.
func nilIfEmpty[T any](v *T, err error) (any, error) {
	if v == nil || err != nil {
		return nil, err
	}
	return v, nil
}
