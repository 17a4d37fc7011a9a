package multicluster

import (
	"log/slog"
	"time"

	discoveryv1 "k8s.io/api/discovery/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/tools/cache"

	"github.com/shardns/shardns/model"
	"github.com/shardns/shardns/sources/kubeobj"
)

// entry is what the informers keep in place of an API object: its
// identity and the model object converted from it, frozen, or why it
// could not be. The API object itself is never kept.
type entry struct {
	meta   metav1.ObjectMeta // namespace, name and resourceVersion only
	frozen model.Frozen      // empty when DNS serves nothing from the object
	err    error
	// changed is when the object last changed as its metadata says it
	// (an imported slice's LastChangeTriggerTime, if its implementation
	// writes one; a creation): the trigger of its change, kept out of
	// frozen.
	changed kubeobj.Changed
}

// GetObjectMeta lets the informer's key functions read the identity.
func (e *entry) GetObjectMeta() metav1.Object { return &e.meta }

// transformFor returns the informers' transform for kind: it converts
// each object before it enters the cache, logging once what it skipped
// (a spec.ips entry that is not an address) of an object it still serves.
func transformFor(kind model.Kind, log *slog.Logger) func(any) (any, error) {
	return func(obj any) (any, error) {
		u, ok := obj.(*unstructured.Unstructured)
		if !ok {
			return obj, nil // entries and tombstones pass through
		}
		e := &entry{meta: metav1.ObjectMeta{Namespace: u.GetNamespace(), Name: u.GetName(), ResourceVersion: u.GetResourceVersion()},
			changed: kubeobj.ChangedOf(u, kind == model.KindMultiClusterSlice)}
		var object any
		switch kind {
		case model.KindServiceImport:
			imp, warnings, err := kubeobj.ServiceImport(u)
			for _, w := range warnings {
				log.Warn("serving the object without what the API served malformed", "warning", w)
			}
			object, e.err = imp, err
		case model.KindMultiClusterSlice:
			var sl discoveryv1.EndpointSlice
			if err := runtime.DefaultUnstructuredConverter.FromUnstructured(u.Object, &sl); err != nil {
				e.err = err
				break
			}
			imported, err := kubeobj.MultiClusterSlice(&sl)
			if imported != nil {
				object = imported
			}
			e.err = err
		}
		if e.err == nil && object != nil {
			e.frozen, _ = model.Freeze(object)
		}
		return e, nil
	}
}

// handler turns informer events of one kind into model changes. It runs
// on the informer's goroutine and only sends.
type handler struct {
	kind    model.Kind
	exposed func(namespace string) bool // the kubernetes.namespaces filter
	send    func(model.Change)
	log     *slog.Logger
	now     func() time.Time // nil: time.Now
}

var _ cache.ResourceEventHandler = (*handler)(nil)

func (h *handler) clock() time.Time {
	if h.now != nil {
		return h.now()
	}
	return time.Now()
}

func (h *handler) key(e *entry) model.Key {
	return model.Key{Kind: h.kind, Namespace: e.meta.Namespace, Name: e.meta.Name}
}

// OnAdd sends new objects. A broken object is logged and skipped. An add
// of the initial list or of a replay (initial) carries no trigger.
func (h *handler) OnAdd(obj any, initial bool) {
	e, ok := obj.(*entry)
	if !ok || !h.exposed(e.meta.Namespace) {
		return
	}
	if e.err != nil {
		h.log.Warn("ignoring object the API served", "object", h.key(e).String(), "err", e.err)
		return
	}
	if e.frozen != "" {
		h.send(model.Change{Key: h.key(e), Object: e.frozen, Trigger: e.changed.OnAdd(initial, h.clock())})
	}
}

// OnUpdate drops resyncs and updates that change nothing DNS serves; a
// broken new version keeps the old one serving.
func (h *handler) OnUpdate(oldObj, newObj any) {
	o, _ := oldObj.(*entry)
	e, ok := newObj.(*entry)
	if !ok || !h.exposed(e.meta.Namespace) {
		return
	}
	if e.err != nil {
		h.log.Warn("ignoring update the API served; still serving the previous version", "object", h.key(e).String(), "err", e.err)
		return
	}
	if o != nil && o.err == nil && o.frozen == e.frozen {
		return
	}
	var object any
	if e.frozen != "" {
		object = e.frozen
	}
	var trigger time.Time
	if o != nil {
		trigger = e.changed.OnUpdate(o.changed, h.clock())
	}
	h.send(model.Change{Key: h.key(e), Object: object, Trigger: trigger})
}

// OnDelete sends a delete, also for tombstones of objects deleted while
// the watch was down. As the Kubernetes source's, it carries no trigger.
func (h *handler) OnDelete(obj any) {
	if t, ok := obj.(cache.DeletedFinalStateUnknown); ok {
		obj = t.Obj
	}
	if e, ok := obj.(*entry); ok && h.exposed(e.meta.Namespace) {
		h.send(model.Change{Key: h.key(e)})
	}
}
