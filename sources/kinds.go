package sources

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/tools/cache"

	"github.com/shardns/shardns/model"
)

// Kind is a namespaced kind a source has the Watcher (Spec.Watcher, the
// Kubernetes source) watch for it, so that its watches follow the ring as
// the Services' do. The asking source keeps what is its own: discovering
// the kind, converting its objects, saying it synced.
type Kind struct {
	Kind model.Kind
	// ListWatch lists and watches the kind in every namespace; tweak sets
	// the Watcher's options (the shard selector), and the kind adds its own.
	ListWatch func(tweak func(*metav1.ListOptions)) cache.ListerWatcher
	// Object returns an empty object of what ListWatch delivers.
	Object func() runtime.Object
	// Transform converts an object before the informer caches it.
	Transform cache.TransformFunc
	// Handler returns the handler of an informer's events (and of the
	// cached objects a replay reads); it sends changes through send.
	Handler func(send func(model.Change)) cache.ResourceEventHandler
}

// WatchKinds asks the Watcher to watch Kinds too. Listed is called, on a
// goroutine of the Watcher, once their first lists have arrived, the zone
// manager having been sent what they held.
type WatchKinds struct {
	Kinds  []Kind
	Listed func()
}
