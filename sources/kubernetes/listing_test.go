package kubernetes

import (
	"context"
	"slices"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/tools/cache"
)

// heard records what toldListing says.
type heard struct {
	mu   sync.Mutex
	said []bool
}

func (h *heard) listing(began bool) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.said = append(h.said, began)
}

func (h *heard) get() []bool {
	h.mu.Lock()
	defer h.mu.Unlock()
	return slices.Clone(h.said)
}

// fakeListWatch lists nothing and hands out w for every watch.
func fakeListWatch(w watch.Interface) *cache.ListWatch {
	return &cache.ListWatch{
		ListWithContextFunc: func(context.Context, metav1.ListOptions) (runtime.Object, error) {
			return &corev1.ServiceList{}, nil
		},
		WatchFuncWithContext: func(context.Context, metav1.ListOptions) (watch.Interface, error) { return w, nil },
	}
}

func initialEventsEnd() watch.Event {
	return watch.Event{Type: watch.Bookmark, Object: &corev1.Service{ObjectMeta: metav1.ObjectMeta{
		Annotations: map[string]string{metav1.InitialEventsAnnotationKey: "true"}}}}
}

// receive reads one event of w, or fails t after a bound.
func receive(t *testing.T, w watch.Interface) watch.Event {
	t.Helper()
	select {
	case ev := <-w.ResultChan():
		return ev
	case <-time.After(10 * time.Second):
		t.Fatal("no event passed on")
		return watch.Event{}
	}
}

// A list request and a watch that streams the initial list each say once
// that a list began and once that it ended; a plain watch says nothing.
func TestToldListing(t *testing.T) {
	yes := true
	streaming := metav1.ListOptions{SendInitialEvents: &yes}
	ctx := context.Background()

	h := &heard{}
	lw := toldListing(fakeListWatch(watch.NewFake()), h.listing)
	if _, err := lw.ListWithContext(ctx, metav1.ListOptions{}); err != nil {
		t.Fatal(err)
	}
	if got := h.get(); !slices.Equal(got, []bool{true, false}) {
		t.Fatalf("a list said %v, want began and ended", got)
	}

	h = &heard{}
	plain := watch.NewFake()
	if _, err := toldListing(fakeListWatch(plain), h.listing).WatchWithContext(ctx, metav1.ListOptions{}); err != nil {
		t.Fatal(err)
	}
	if got := h.get(); len(got) != 0 {
		t.Fatalf("a watch without initial events said %v, want nothing", got)
	}

	// Events pass on in order; the bookmark that ends the initial events
	// ends the list, and stopping later says nothing more.
	h = &heard{}
	fake := watch.NewFake()
	w, err := toldListing(fakeListWatch(fake), h.listing).WatchWithContext(ctx, streaming)
	if err != nil {
		t.Fatal(err)
	}
	go func() {
		fake.Add(&corev1.Service{ObjectMeta: metav1.ObjectMeta{Name: "a"}})
		fake.Action(initialEventsEnd().Type, initialEventsEnd().Object)
		fake.Add(&corev1.Service{ObjectMeta: metav1.ObjectMeta{Name: "b"}})
	}()
	var types []watch.EventType
	for range 3 {
		types = append(types, receive(t, w).Type)
	}
	if want := []watch.EventType{watch.Added, watch.Bookmark, watch.Added}; !slices.Equal(types, want) {
		t.Fatalf("events passed on: %v, want %v", types, want)
	}
	if got := h.get(); !slices.Equal(got, []bool{true, false}) {
		t.Fatalf("after the initial events: said %v, want began and ended", got)
	}
	w.Stop()
	if _, open := <-w.ResultChan(); open {
		t.Fatal("an event passed on after Stop")
	}
	if got := h.get(); !slices.Equal(got, []bool{true, false}) {
		t.Fatalf("after Stop: said %v, want began and ended once", got)
	}
}

// A streaming watch stopped before its initial events ended, with an
// event nobody reads on its way, ends the list and its channel.
func TestToldListingStoppedEarly(t *testing.T) {
	yes := true
	h := &heard{}
	fake := watch.NewFakeWithChanSize(1, false)
	fake.Add(&corev1.Service{ObjectMeta: metav1.ObjectMeta{Name: "unread"}})
	w, err := toldListing(fakeListWatch(fake), h.listing).WatchWithContext(context.Background(),
		metav1.ListOptions{SendInitialEvents: &yes})
	if err != nil {
		t.Fatal(err)
	}
	w.Stop()
	deadline := time.After(10 * time.Second)
	for open := true; open; {
		select {
		case _, open = <-w.ResultChan():
		case <-deadline:
			t.Fatal("the channel stayed open after Stop")
		}
	}
	if got := h.get(); !slices.Equal(got, []bool{true, false}) {
		t.Fatalf("said %v, want began and ended", got)
	}
}
