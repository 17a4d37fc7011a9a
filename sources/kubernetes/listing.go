package kubernetes

import (
	"context"
	"sync"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/tools/cache"
)

// toldListing wraps lw so that listing hears when each list begins (true)
// and ends (false), exactly once each: a list request, or a watch that
// streams the initial list (sendInitialEvents), which ends at the
// bookmark that closes the initial events, or when the watch stops before
// it. A list decodes every object of its kind, far more than the cache
// keeps of it; the node runs the collector tight meanwhile (Config.Listing).
// A nil listing leaves lw as it is.
func toldListing(lw *cache.ListWatch, listing func(bool)) *cache.ListWatch {
	if listing == nil {
		return lw
	}
	return &cache.ListWatch{
		DisableChunking: lw.DisableChunking,
		ListWithContextFunc: func(ctx context.Context, o metav1.ListOptions) (runtime.Object, error) {
			listing(true)
			defer listing(false)
			return lw.ListWithContext(ctx, o)
		},
		WatchFuncWithContext: func(ctx context.Context, o metav1.ListOptions) (watch.Interface, error) {
			if o.SendInitialEvents == nil || !*o.SendInitialEvents {
				return lw.WatchWithContext(ctx, o)
			}
			listing(true)
			w, err := lw.WatchWithContext(ctx, o)
			if err != nil {
				listing(false)
				return nil, err
			}
			return newInitialEventsWatch(w, func() { listing(false) }), nil
		},
	}
}

// initialEventsWatch passes a watch's events on and calls done once: at
// the bookmark that ends the initial events, or when the watch ends.
type initialEventsWatch struct {
	watch.Interface
	events  chan watch.Event
	stopped chan struct{}
	stop    sync.Once
	done    func()
}

func newInitialEventsWatch(w watch.Interface, done func()) *initialEventsWatch {
	iw := &initialEventsWatch{Interface: w, events: make(chan watch.Event), stopped: make(chan struct{}), done: done}
	go iw.pass() // ends when w's channel closes, or at Stop
	return iw
}

func (w *initialEventsWatch) ResultChan() <-chan watch.Event { return w.events }

// Stop stops the watch; an event on its way is dropped, as no one reads
// it any more.
func (w *initialEventsWatch) Stop() {
	w.stop.Do(func() { close(w.stopped) })
	w.Interface.Stop()
}

// pass forwards the events until the watch ends or is stopped.
func (w *initialEventsWatch) pass() {
	var once sync.Once
	defer close(w.events)
	defer once.Do(w.done)
	for {
		var ev watch.Event
		var ok bool
		select {
		case ev, ok = <-w.Interface.ResultChan():
		case <-w.stopped:
			return
		}
		if !ok {
			return
		}
		if ev.Type == watch.Bookmark && endsInitialEvents(ev.Object) {
			once.Do(w.done)
		}
		select {
		case w.events <- ev:
		case <-w.stopped:
			return
		}
	}
}

// endsInitialEvents reports whether a bookmark closes the initial events.
func endsInitialEvents(obj runtime.Object) bool {
	m, err := meta.Accessor(obj)
	return err == nil && m.GetAnnotations()[metav1.InitialEventsAnnotationKey] == "true"
}
