package kubernetes

import (
	"bytes"
	"strings"
	"sync"
	"unique"

	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/shardns/shardns/actors/zones"
	"github.com/shardns/shardns/model"
	"github.com/shardns/shardns/sources/kubeobj"
)

// cached is what the informers store in place of an API object: its
// identity and the model object converted from it. The zone actors and
// their snapshots hold the same model object, so an object of a zone this
// replica serves costs its cache entry little more than this struct; the
// API object itself is never kept. An object of a zone other replicas own
// is kept frozen (see frozen.go). Read object and frozen through objects.
type cached struct {
	namespace, name, resourceVersion string
	// object is the model object, or nil when it is frozen or when DNS
	// serves nothing from the API object: an FQDN slice, a finished pod,
	// a namespace outside kubernetes.namespaces.
	object any
	// frozen is the encoded model object, when object is nil because no
	// zone this replica owns is built from it.
	frozen []byte
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
func transformFor(exposed func(namespace string) bool, objects *objects) func(any) (any, error) {
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
		c := &cached{object: object, err: err}
		c.namespace, c.name, c.resourceVersion = detachedIdentity(meta)
		if !exposed(c.exposedAs()) {
			c.object, c.err = nil, nil
		}
		// Detach the model object from the API object, then thaw it if a
		// zone of this replica is built from it. Not shared yet: no lock.
		if f := freeze(c.object); f != nil {
			c.object, c.frozen = nil, f
		}
		objects.sort(c)
		return c, nil
	}
}

// detachedIdentity copies what a cache entry keeps of an API object's
// metadata out of the decoded object: the name and resourceVersion into
// one allocation of their own, the namespace into the one copy the
// process keeps of each. The model object is detached the same way,
// through its frozen form, whose strings share one allocation.
//
// Why: a decoded API object is hundreds of small allocations, and these
// few strings outlive them. Left in place, each would keep a span of the
// decoded objects' garbage from being freed: 2–4 MB of RSS per replica
// after the initial list of 10k services (TestShardedMemory).
func detachedIdentity(meta metav1.ObjectMeta) (namespace, name, resourceVersion string) {
	var b strings.Builder
	b.Grow(len(meta.Name) + len(meta.ResourceVersion))
	b.WriteString(meta.Name)
	b.WriteString(meta.ResourceVersion)
	both := b.String()
	return unique.Make(meta.Namespace).Value(), both[:len(meta.Name)], both[len(meta.Name):]
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

// objects reads and sorts the model objects of cache entries: the source
// actor freezes and thaws them when the ring changes, while informer
// handlers and replays read them.
type objects struct {
	mu       sync.RWMutex
	interest *zones.Interest
}

// get returns the model object of c, thawed if need be; nil with no error
// means DNS serves nothing from it.
func (o *objects) get(c *cached) (any, error) {
	o.mu.RLock()
	obj, frozen, err := c.object, c.frozen, c.err
	o.mu.RUnlock()
	if err != nil || frozen == nil {
		return obj, err
	}
	return thaw(c, frozen)
}

// sameRecords reports whether a and b serve the same records: equal but
// for their resourceVersion. Frozen forms compare as encoded.
func (o *objects) sameRecords(a, b *cached) bool {
	o.mu.RLock()
	defer o.mu.RUnlock()
	if a.frozen == nil && b.frozen == nil {
		return withoutVersion(a.object, b.object)
	}
	encoded := func(c *cached) []byte {
		if c.frozen != nil {
			return c.frozen
		}
		return freeze(c.object)
	}
	return bytes.Equal(encoded(a), encoded(b))
}

// resort freezes or thaws c as the current interest asks.
func (o *objects) resort(c *cached) {
	o.mu.Lock()
	defer o.mu.Unlock()
	o.sort(c)
}

// sort freezes the object of c when no zone this replica owns is built
// from it, and thaws it when one is. The caller holds the lock or owns c.
func (o *objects) sort(c *cached) {
	switch {
	case c.object != nil:
		if k, ok := kindOf(c.object); ok && !o.interest.Serves(k, c.namespace) {
			if f := freeze(c.object); f != nil {
				c.object, c.frozen = nil, f
			}
		}
	case c.frozen != nil:
		if o.interest.Serves(model.Kind(c.frozen[0]), c.namespace) {
			if obj, err := thaw(c, c.frozen); err == nil {
				c.object, c.frozen = obj, nil
			}
		}
	}
}

// kindOf returns the kind of the model objects that can be frozen.
func kindOf(obj any) (model.Kind, bool) {
	switch obj.(type) {
	case *model.Service:
		return model.KindService, true
	case *model.EndpointSlice:
		return model.KindEndpointSlice, true
	case *model.Pod:
		return model.KindPod, true
	}
	return 0, false
}
