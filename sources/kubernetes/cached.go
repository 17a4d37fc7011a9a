package kubernetes

import (
	"strings"
	"sync"
	"sync/atomic"
	"unique"

	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/tools/cache"

	"github.com/shardns/shardns/model"
	"github.com/shardns/shardns/sources/kubeobj"
)

// cached is what the informers store in place of an API object: its
// identity and the model object converted from it, frozen (see
// model.Frozen) for Services, EndpointSlices and Pods. The zone actors
// keep the same frozen strings, so an object of a zone this replica serves
// costs the zones nothing more; the API object itself is never kept. A
// cache entry is not changed once made, so any goroutine may read it.
type cached struct {
	// key is the informers' key of the object, "namespace/name" (a
	// namespace's: its name), part of the entry's one allocation: see
	// GetObjectMeta.
	namespace, key, resourceVersion string
	// frozen is the model object of a Service, EndpointSlice or Pod;
	// object that of a Namespace. Both are empty when DNS serves nothing
	// from the API object: an FQDN slice, a finished pod, a namespace
	// outside kubernetes.namespaces.
	frozen model.Frozen
	object any
	// err says why the API object could not be converted; such an
	// object is logged and never served.
	err error
	// changed is when the API object last changed as its metadata says
	// it, which the handler turns into the trigger of a change. It stays
	// out of frozen: the zones and other replicas never see it, and two
	// versions that differ in it alone serve the same records.
	changed kubeobj.Changed
}

// GetObjectMeta lets the informer's key functions read the identity. It
// gives the entry's key as the name of an object without a namespace, so
// that the key the informer's store keeps for it (cache.ObjectName.String
// joins a namespace and a name in a new string) is the entry's own string,
// not one more allocation of 16-32 bytes for each of the tens of thousands
// of objects a replica holds, made again by every list. Nothing reads the
// namespace through this: the handler and the transform read the entry's
// fields.
func (c *cached) GetObjectMeta() metav1.Object {
	return &metav1.ObjectMeta{Name: c.key, ResourceVersion: c.resourceVersion}
}

// name returns the object's name: its key without the namespace.
func (c *cached) name() string {
	if c.namespace == "" {
		return c.key
	}
	return c.key[len(c.namespace)+1:]
}

// model returns what a change of c carries: the frozen object, the
// namespace, or nil when DNS serves nothing from it.
func (c *cached) model() (any, error) {
	switch {
	case c.err != nil:
		return nil, c.err
	case c.frozen != "":
		return c.frozen, nil
	}
	return c.object, nil
}

// sameRecords reports whether a and b serve the same records: equal but
// for their resourceVersion. What is not frozen is a Namespace, which
// serves nothing but its existence, or nothing at all.
func sameRecords(a, b *cached) bool {
	if a.frozen != "" || b.frozen != "" {
		return a.frozen == b.frozen
	}
	return (a.object == nil) == (b.object == nil)
}

// transformFor returns the informers' transform: it converts each API
// object to a cached entry before the object enters the cache or reaches
// the handler. Objects of namespaces outside kubernetes.namespaces keep
// no model object. An object already in held at the same resourceVersion
// is not converted again: its entry is reused. The transform is
// idempotent, as client-go asks. warn, when set, is told what a
// conversion skipped (an external IP that is not an address) of an
// object it kept serving.
func transformFor(exposed func(namespace string) bool, held *heldEntries, warn func(warnings []string)) func(any) (any, error) {
	return func(obj any) (any, error) {
		var meta *metav1.ObjectMeta
		switch o := obj.(type) {
		case *cached:
			return o, nil
		case *corev1.Service:
			meta = &o.ObjectMeta
		case *discoveryv1.EndpointSlice:
			meta = &o.ObjectMeta
		case *corev1.Namespace:
			meta = &o.ObjectMeta
		case *corev1.Pod:
			meta = &o.ObjectMeta
		default:
			return obj, nil // tombstones pass through
		}
		if c := held.find(meta.Namespace, meta.Name, meta.ResourceVersion); c != nil {
			return c, nil
		}
		var object any
		var err error
		switch o := obj.(type) {
		case *corev1.Service:
			svc, warnings, serr := kubeobj.ServiceWarnings(o)
			object, err = nilIfEmpty(svc, serr)
			if len(warnings) > 0 && warn != nil && exposed(meta.Namespace) {
				warn(warnings)
			}
		case *discoveryv1.EndpointSlice:
			object, err = nilIfEmpty(kubeobj.EndpointSlice(o))
		case *corev1.Namespace:
			object, err = nilIfEmpty(kubeobj.Namespace(o))
		case *corev1.Pod:
			if o.Status.Phase != corev1.PodSucceeded && o.Status.Phase != corev1.PodFailed {
				object, err = nilIfEmpty(kubeobj.Pod(o)) // a finished pod's IPs are free for others
			}
		}
		namespace := meta.Namespace
		if namespace == "" {
			namespace = meta.Name // a namespace is exposed as itself
		}
		if !exposed(namespace) {
			object, err = nil, nil
		}
		c := newCached(*meta, object, err)
		_, isSlice := obj.(*discoveryv1.EndpointSlice)
		c.changed = kubeobj.ChangedOf(meta, isSlice)
		return c, nil
	}
}

// heldEntries finds the entry that an informer's store, or the stores of
// the informers it replaces, holds already for an object at the same
// resourceVersion (the same content). Lists bring back objects a replica
// holds: an informer lists everything again when its watch has expired,
// and a ring change that takes namespaces away replaces an informer with
// one that lists the namespaces kept. Reusing the entries, such a list
// converts nothing and leaves nothing new in memory; the zones, which
// share the entries' frozen strings, keep theirs, and the entries of the
// namespaces lost are freed whole instead of leaving holes among copies
// of the kept ones.
type heldEntries struct {
	own cache.Store
	// replaced are the stores of the informers this one replaces, until
	// it has synced: then the source lets them go.
	replaced atomic.Pointer[[]cache.Store]
}

// find returns the entry held for namespace/name at resourceVersion, or
// nil. A nil heldEntries holds nothing.
func (h *heldEntries) find(namespace, name, resourceVersion string) *cached {
	if h == nil || resourceVersion == "" {
		return nil
	}
	key := cache.NewObjectName(namespace, name).String() // the informers' key
	if c := heldIn(h.own, key, resourceVersion); c != nil {
		return c
	}
	if replaced := h.replaced.Load(); replaced != nil {
		for _, store := range *replaced {
			if c := heldIn(store, key, resourceVersion); c != nil {
				return c
			}
		}
	}
	return nil
}

func heldIn(store cache.Store, key, resourceVersion string) *cached {
	if store == nil {
		return nil
	}
	obj, ok, _ := store.GetByKey(key)
	if c, isCached := obj.(*cached); ok && isCached && c.resourceVersion == resourceVersion {
		return c
	}
	return nil
}

// newCached makes the cache entry of an API object with the model object
// converted from it. The key, the resourceVersion and the frozen model
// object are copied into one allocation, the namespace into the one copy
// the process keeps of each.
//
// Why: a decoded API object is hundreds of small allocations, and these
// few strings outlive them. Left in place, each would keep a span of the
// decoded objects' garbage from being freed: 2–4 MB of RSS per replica
// after the initial list of 10k services (TestShardedMemory). And one
// allocation an object, not four, leaves fewer holes when a replica hands
// half its namespaces to a new one.
func newCached(meta metav1.ObjectMeta, object any, err error) *cached {
	c := &cached{namespace: unique.Make(meta.Namespace).Value(), err: err}
	scratch := frozenScratch.Get().(*[]byte)
	defer putFrozenScratch(scratch)
	frozen, ok := model.AppendFrozen((*scratch)[:0], object)
	*scratch = frozen
	if !ok {
		c.object = object
	}
	var b strings.Builder
	b.Grow(len(meta.Namespace) + 1 + len(meta.Name) + len(meta.ResourceVersion) + len(frozen))
	if meta.Namespace != "" {
		b.WriteString(meta.Namespace)
		b.WriteByte('/')
	}
	b.WriteString(meta.Name)
	k := b.Len()
	b.WriteString(meta.ResourceVersion)
	v := b.Len()
	b.Write(frozen)
	all := b.String()
	c.key, c.resourceVersion, c.frozen = all[:k], all[k:v], model.Frozen(all[v:])
	return c
}

// frozenScratch holds the buffers objects are frozen into before their
// entry copies them: a buffer grown anew for every object left six
// allocations of garbage per EndpointSlice of ten endpoints
// (BenchmarkNewCached), on every list and every change.
var frozenScratch = sync.Pool{New: func() any { b := make([]byte, 0, 1024); return &b }}

// maxFrozenScratch bounds the buffers kept: an EndpointSlice of a
// thousand endpoints freezes into tens of kilobytes.
const maxFrozenScratch = 16 << 10

func putFrozenScratch(b *[]byte) {
	if cap(*b) <= maxFrozenScratch {
		frozenScratch.Put(b)
	}
}

// nilIfEmpty turns a typed nil pointer into an untyped nil.
func nilIfEmpty[T any](v *T, err error) (any, error) {
	if v == nil || err != nil {
		return nil, err
	}
	return v, nil
}
