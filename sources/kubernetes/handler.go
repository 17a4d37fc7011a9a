package kubernetes

import (
	"log/slog"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/client-go/tools/cache"

	"github.com/shardns/shardns/model"
)

// handler turns informer events of one kind into model changes. It runs on
// the informer's goroutine and only converts and sends.
type handler struct {
	kind    model.Kind
	exposed func(namespace string) bool // the kubernetes.namespaces filter
	send    func(model.Change)
	log     *slog.Logger
	events  *prometheus.CounterVec // kind, type; may be nil
	skipped *prometheus.CounterVec // kind, what; may be nil
	now     func() time.Time       // nil: time.Now
}

// count counts an event the watch delivered.
func (h *handler) count(typ string) {
	if h.events != nil {
		h.events.WithLabelValues(h.kind.String(), typ).Inc()
	}
}

// skip counts an object not served because the API served it malformed.
func (h *handler) skip() {
	if h.skipped != nil {
		h.skipped.WithLabelValues(h.kind.String(), "object").Inc()
	}
}

var _ cache.ResourceEventHandler = (*handler)(nil)

// convert returns what a change of a cache entry carries (see
// cached.model); nil with no error means DNS does not serve it (an FQDN
// slice, a finished pod).
func (h *handler) convert(obj any) (any, error) {
	if c, ok := obj.(*cached); ok {
		return c.model()
	}
	return nil, nil
}

// key identifies a cache entry, or the API object inside a tombstone of
// one that was never converted.
func (h *handler) key(obj any) (model.Key, bool) {
	if c, ok := obj.(*cached); ok {
		return model.Key{Kind: h.kind, Namespace: c.namespace, Name: c.name()}, true
	}
	m, err := meta.Accessor(obj)
	if err != nil {
		return model.Key{}, false
	}
	return model.Key{Kind: h.kind, Namespace: m.GetNamespace(), Name: m.GetName()}, true
}

func (h *handler) clock() time.Time {
	if h.now != nil {
		return h.now()
	}
	return time.Now()
}

// addTrigger is when the add of obj happened in the API, if it is a
// recent change and not one of the initial list (see
// kubeobj.Changed.OnAdd).
func (h *handler) addTrigger(obj any, initial bool) time.Time {
	c, ok := obj.(*cached)
	if !ok || initial {
		return time.Time{}
	}
	return c.changed.OnAdd(false, h.clock())
}

// updateTrigger is when the update from oldObj to newObj happened in the
// API, if the slice controller said it (see kubeobj.Changed.OnUpdate).
func updateTrigger(oldObj, newObj any, now time.Time) time.Time {
	o, oldOK := oldObj.(*cached)
	n, newOK := newObj.(*cached)
	if !oldOK || !newOK {
		return time.Time{}
	}
	return n.changed.OnUpdate(o.changed, now)
}

func (h *handler) visible(k model.Key) bool {
	ns := k.Namespace
	if h.kind == model.KindNamespace {
		ns = k.Name
	}
	return h.exposed(ns)
}

// OnAdd sends new objects. A broken object is logged and skipped: nothing
// already served changes. initial is true for the initial list and for
// replays of the cache: no change in the API, so no trigger.
func (h *handler) OnAdd(obj any, initial bool) {
	h.count("add")
	k, ok := h.key(obj)
	if !ok || !h.visible(k) {
		return
	}
	m, err := h.convert(obj)
	if err != nil {
		h.log.Warn("ignoring object the API served", "object", k.String(), "err", err)
		h.skip()
		return
	}
	if m != nil {
		h.send(model.Change{Key: k, Object: m, Trigger: h.addTrigger(obj, initial)})
	}
}

// OnUpdate drops resyncs (same resourceVersion) and updates that change
// nothing DNS serves; a broken new version keeps the old one serving.
func (h *handler) OnUpdate(oldObj, newObj any) {
	h.count("update")
	k, ok := h.key(newObj)
	if !ok || !h.visible(k) {
		return
	}
	if o, n := version(oldObj), version(newObj); o != "" && o == n {
		return
	}
	m, err := h.convert(newObj)
	if err != nil {
		h.log.Warn("ignoring update the API served; still serving the previous version", "object", k.String(), "err", err)
		h.skip()
		return
	}
	oldC, oldOK := oldObj.(*cached)
	newC, newOK := newObj.(*cached)
	if oldOK && newOK && oldC.err == nil && sameRecords(oldC, newC) {
		return
	}
	h.send(model.Change{Key: k, Object: m, Trigger: updateTrigger(oldObj, newObj, h.clock())})
}

// OnDelete sends a delete, also for tombstones of objects deleted while
// the watch was down. A delete carries no trigger: nothing in the final
// state says when the object left the API. Its deletionTimestamp, when
// set, is when the deletion was asked for, before a pod's grace period or
// a finalizer's work, which would count as DNS latency; a slice's
// LastChangeTriggerTime is that of its last update (kube-proxy ignores it
// on deletes for that reason).
func (h *handler) OnDelete(obj any) {
	h.count("delete")
	if t, ok := obj.(cache.DeletedFinalStateUnknown); ok {
		obj = t.Obj
	}
	k, ok := h.key(obj)
	if !ok || !h.visible(k) {
		return
	}
	h.send(model.Change{Key: k})
}

// version is the resourceVersion of a cache entry.
func version(obj any) string {
	if c, ok := obj.(*cached); ok {
		return c.resourceVersion
	}
	return ""
}
