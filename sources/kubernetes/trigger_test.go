package kubernetes

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"sync"
	"testing"
	"time"

	discoveryv1 "k8s.io/api/discovery/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes/fake"
	"k8s.io/client-go/tools/cache"

	"github.com/shardns/shardns/internal/testutil"
	"github.com/shardns/shardns/model"
	"github.com/shardns/shardns/sources/kubeobj"
)

// triggeredAt is when the slices of these tests changed; the handlers'
// clock reads a little later.
var triggeredAt = time.Date(2026, 3, 1, 10, 0, 0, 250_000_000, time.UTC)

func slice(name, rv, trigger, ip string) *discoveryv1.EndpointSlice {
	s := &discoveryv1.EndpointSlice{
		ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: name, ResourceVersion: rv,
			Labels:            map[string]string{discoveryv1.LabelServiceName: "web"},
			CreationTimestamp: metav1.NewTime(triggeredAt.Add(-time.Hour))},
		AddressType: discoveryv1.AddressTypeIPv4,
		Endpoints:   []discoveryv1.Endpoint{{Addresses: []string{ip}}},
	}
	if trigger != "" {
		s.Annotations = map[string]string{kubeobj.LastChangeTriggerTime: trigger}
	}
	return s
}

// sentChanges is a handler's send that keeps what it sent.
type sentChanges struct {
	mu      sync.Mutex
	changes []model.Change
}

func (s *sentChanges) send(c model.Change) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.changes = append(s.changes, c)
}

func (s *sentChanges) take() []model.Change {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := s.changes
	s.changes = nil
	return out
}

func sliceHandler(sent *sentChanges) *handler {
	return &handler{kind: model.KindEndpointSlice, exposed: func(string) bool { return true }, send: sent.send,
		log: slog.New(slog.NewTextHandler(io.Discard, nil)), now: func() time.Time { return triggeredAt.Add(time.Second) }}
}

// A change carries the slice controller's trigger time when the slice's
// records changed with it, and only then.
func TestHandlerTriggers(t *testing.T) {
	const first, second = "2026-03-01T10:00:00.25Z", "2026-03-01T09:59:00Z"
	var sent sentChanges
	h := sliceHandler(&sent)
	cases := []struct {
		name  string
		event func()
		sends bool
		want  time.Time
	}{
		{"an add of the initial list", func() { h.OnAdd(cachedOf(t, slice("a", "1", first, "10.0.0.1")), true) }, true, time.Time{}},
		{"an add after the list", func() { h.OnAdd(cachedOf(t, slice("a", "1", first, "10.0.0.1")), false) }, true, triggeredAt},
		{"an update the controller made", func() {
			h.OnUpdate(cachedOf(t, slice("a", "1", second, "10.0.0.1")), cachedOf(t, slice("a", "2", first, "10.0.0.2")))
		}, true, triggeredAt},
		{"an update of another writer", func() {
			h.OnUpdate(cachedOf(t, slice("a", "1", first, "10.0.0.1")), cachedOf(t, slice("a", "2", first, "10.0.0.2")))
		}, true, time.Time{}},
		{"a malformed trigger time", func() {
			h.OnUpdate(cachedOf(t, slice("a", "1", first, "10.0.0.1")), cachedOf(t, slice("a", "2", "soon", "10.0.0.2")))
		}, true, time.Time{}},
		{"a new trigger time alone changes no record", func() {
			h.OnUpdate(cachedOf(t, slice("a", "1", second, "10.0.0.1")), cachedOf(t, slice("a", "2", first, "10.0.0.1")))
		}, false, time.Time{}},
		{"a resync", func() {
			c := cachedOf(t, slice("a", "1", first, "10.0.0.1"))
			h.OnUpdate(c, c)
		}, false, time.Time{}},
		{"a delete", func() { h.OnDelete(cachedOf(t, slice("a", "3", first, "10.0.0.1"))) }, true, time.Time{}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			c.event()
			got := sent.take()
			if len(got) != map[bool]int{false: 0, true: 1}[c.sends] {
				t.Fatalf("sent %v, want a change: %v", got, c.sends)
			}
			if c.sends && !got[0].Trigger.Equal(c.want) {
				t.Fatalf("trigger %v, want %v", got[0].Trigger, c.want)
			}
		})
	}
}

// Through a real informer: the slices of the initial list carry no
// trigger, a slice added once it has synced carries its annotation, and
// a malformed one none. What the zones get to build records from never
// holds the trigger.
func TestInformerTriggers(t *testing.T) {
	client := fake.NewClientset(slice("listed", "1", "2026-03-01T10:00:00.25Z", "10.0.0.1"))
	var sent sentChanges
	factory := informers.NewSharedInformerFactory(client, 0)
	inf := factory.Discovery().V1().EndpointSlices().Informer()
	if err := inf.SetTransform(transformFor(func(string) bool { return true }, nil, nil)); err != nil {
		t.Fatal(err)
	}
	if _, err := inf.AddEventHandler(sliceHandler(&sent)); err != nil {
		t.Fatal(err)
	}
	stop := make(chan struct{})
	defer factory.Shutdown()
	defer close(stop)
	factory.Start(stop)
	if !cache.WaitForCacheSync(stop, inf.HasSynced) {
		t.Fatal("the informer did not sync")
	}
	ctx := context.Background()
	for _, s := range []*discoveryv1.EndpointSlice{slice("added", "", "2026-03-01T10:00:00.25Z", "10.0.0.2"), slice("broken", "", "10:00", "10.0.0.3")} {
		if _, err := client.DiscoveryV1().EndpointSlices("ns").Create(ctx, s, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	triggers := map[string]time.Time{}
	testutil.Eventually(t, 10*time.Second, func() error {
		for _, c := range sent.take() {
			triggers[c.Key.Name] = c.Trigger
			if f, ok := c.Object.(model.Frozen); !ok || len(f) == 0 {
				t.Fatalf("%s carries %T, want its frozen slice", c.Key, c.Object)
			}
		}
		if len(triggers) < 3 {
			return fmt.Errorf("changes of %v, want 3", triggers)
		}
		return nil
	})
	want := map[string]time.Time{"listed": {}, "added": triggeredAt, "broken": {}}
	for name, w := range want {
		if got, ok := triggers[name]; !ok || !got.Equal(w) {
			t.Errorf("%s: trigger %v, want %v", name, got, w)
		}
	}
}
