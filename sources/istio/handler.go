package istio

import (
	"log/slog"
	"reflect"
	"time"

	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/client-go/tools/cache"

	"github.com/shardns/shardns/model"
	"github.com/shardns/shardns/sources/kubeobj"
)

// handler turns informer events into model changes. It runs on the
// informer's goroutine and only converts and sends.
type handler struct {
	send func(model.Change)
	log  *slog.Logger
	// quiet drops conversion warnings: a replay sends objects that were
	// already reported when they arrived.
	quiet bool
	now   func() time.Time // nil: time.Now
}

var _ cache.ResourceEventHandler = (*handler)(nil)

func (h *handler) convert(obj any) (*model.ServiceEntry, error) {
	u, ok := obj.(*unstructured.Unstructured)
	if !ok {
		return nil, nil
	}
	e, warnings, err := kubeobj.ServiceEntry(u)
	if err == nil && !h.quiet {
		for _, w := range warnings {
			h.log.Info("part of a ServiceEntry is not answered", "reason", w)
		}
	}
	return e, err
}

func key(obj any) (model.Key, bool) {
	m, err := meta.Accessor(obj)
	if err != nil {
		return model.Key{}, false
	}
	return model.Key{Kind: model.KindServiceEntry, Namespace: m.GetNamespace(), Name: m.GetName()}, true
}

// trigger is when the add of obj happened in the API: its creation, if
// recent and not of the initial list or a replay (see
// kubeobj.Changed.OnAdd). A ServiceEntry carries no time of its later
// changes, so updates and deletes have none.
func (h *handler) trigger(obj any, initial bool) time.Time {
	m, err := meta.Accessor(obj)
	if err != nil || initial {
		return time.Time{}
	}
	now := time.Now
	if h.now != nil {
		now = h.now
	}
	return kubeobj.ChangedOf(m, false).OnAdd(false, now())
}

// OnAdd sends new entries. A broken one is logged and skipped.
func (h *handler) OnAdd(obj any, initial bool) {
	k, ok := key(obj)
	if !ok {
		return
	}
	e, err := h.convert(obj)
	if err != nil {
		if !h.quiet {
			h.log.Warn("ignoring object the API served", "object", k.String(), "err", err)
		}
		return
	}
	if e != nil {
		h.send(model.Change{Key: k, Object: e, Trigger: h.trigger(obj, initial)})
	}
}

// OnUpdate drops resyncs (same resourceVersion) and updates that change
// nothing DNS serves (labels, ports, endpoints); a broken new version
// keeps the old one serving.
func (h *handler) OnUpdate(oldObj, newObj any) {
	k, ok := key(newObj)
	if !ok {
		return
	}
	om, _ := meta.Accessor(oldObj)
	nm, _ := meta.Accessor(newObj)
	if om != nil && nm != nil && om.GetResourceVersion() == nm.GetResourceVersion() {
		return
	}
	e, err := h.convert(newObj)
	if err != nil {
		h.log.Warn("ignoring update the API served; still serving the previous version", "object", k.String(), "err", err)
		return
	}
	old, _, _ := kubeobj.ServiceEntry(asUnstructured(oldObj))
	if sameRecords(old, e) {
		return
	}
	h.send(model.Change{Key: k, Object: e})
}

// OnDelete sends a delete, also for tombstones of entries deleted while
// the watch was down.
func (h *handler) OnDelete(obj any) {
	if t, ok := obj.(cache.DeletedFinalStateUnknown); ok {
		obj = t.Obj
	}
	if k, ok := key(obj); ok {
		h.send(model.Change{Key: k})
	}
}

func asUnstructured(obj any) *unstructured.Unstructured {
	if u, ok := obj.(*unstructured.Unstructured); ok {
		return u
	}
	return &unstructured.Unstructured{Object: map[string]any{}}
}

// sameRecords reports whether a and b serve the same records: equal but
// for their resourceVersion.
func sameRecords(a, b *model.ServiceEntry) bool {
	if a == nil || b == nil {
		return false
	}
	x, y := *a, *b
	x.ResourceVersion, y.ResourceVersion = "", ""
	return reflect.DeepEqual(x, y)
}
