package kubernetes

import (
	"io"
	"log/slog"
	"reflect"
	"strings"
	"testing"
	"unsafe"

	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/tools/cache"

	"github.com/shardns/shardns/model"
)

func service(rv, ip string, annotations map[string]string) *corev1.Service {
	return &corev1.Service{
		ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "web", ResourceVersion: rv, Annotations: annotations},
		Spec:       corev1.ServiceSpec{ClusterIP: ip, Ports: []corev1.ServicePort{{Name: "http", Port: 80}}},
	}
}

// Only changes that change records reach the zones.
func TestHandlerDropsNoOpUpdates(t *testing.T) {
	var sent []model.Change
	skipped := prometheus.NewCounterVec(prometheus.CounterOpts{Name: "skipped"}, []string{"kind", "what"})
	h := &handler{kind: model.KindService, exposed: func(string) bool { return true },
		send: func(c model.Change) { sent = append(sent, c) }, log: slog.New(slog.NewTextHandler(io.Discard, nil)),
		skipped: skipped}
	cases := []struct {
		name     string
		old, new *corev1.Service
		sends    bool
	}{
		{"resync: same resourceVersion", service("1", "10.0.0.1", nil), service("1", "10.0.0.1", nil), false},
		{"a field DNS does not read", service("1", "10.0.0.1", nil), service("2", "10.0.0.1", map[string]string{"a": "b"}), false},
		{"a new cluster IP", service("1", "10.0.0.1", nil), service("2", "10.0.0.2", nil), true},
		{"a broken new version keeps the old", service("1", "10.0.0.1", nil), service("2", "not-an-ip", nil), false},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			sent = nil
			h.OnUpdate(cachedOf(t, c.old), cachedOf(t, c.new))
			if (len(sent) > 0) != c.sends {
				t.Fatalf("sent %v, want a change: %v", sent, c.sends)
			}
			if c.sends {
				svc := thawedService(t, sent[0])
				if want := c.new.Spec.ClusterIP; svc.ClusterIPs[0].String() != want || svc.Name != "web" {
					t.Fatalf("sent %+v, want web at %s", svc, want)
				}
			}
		})
	}
	// The broken version was counted, and so is a broken new object.
	h.OnAdd(cachedOf(t, service("4", "not-an-ip", nil)), false)
	var m dto.Metric
	if err := skipped.WithLabelValues("Service", "object").Write(&m); err != nil || m.GetCounter().GetValue() != 2 {
		n := m.GetCounter().GetValue()
		t.Errorf("skipped objects counted %v (%v), want 2", n, err)
	}
	sent = nil
	h.OnDelete(cache.DeletedFinalStateUnknown{Key: "ns/web", Obj: cachedOf(t, service("3", "10.0.0.1", nil))})
	if len(sent) != 1 || sent[0].Object != nil || sent[0].Key.Name != "web" {
		t.Fatalf("tombstone: sent %v, want a delete of ns/web", sent)
	}
	sent = nil
	h.OnDelete(cache.DeletedFinalStateUnknown{Key: "ns/web", Obj: service("3", "10.0.0.1", nil)})
	if len(sent) != 1 || sent[0].Object != nil || sent[0].Key.Name != "web" {
		t.Fatalf("tombstone of an API object: sent %v, want a delete of ns/web", sent)
	}
}

// cachedOf is obj as the informers store it.
func cachedOf(t *testing.T, obj any) any {
	t.Helper()
	out, err := transformFor(func(string) bool { return true }, nil, nil)(obj)
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// thawedService is the Service a change carries, frozen as the source
// sends it.
func thawedService(t *testing.T, c model.Change) *model.Service {
	t.Helper()
	f, ok := c.Object.(model.Frozen)
	if !ok {
		t.Fatalf("change %v carries %T, want a frozen object", c.Key, c.Object)
	}
	obj, err := f.Thaw(c.Key.Namespace, c.Key.Name, "")
	if err != nil {
		t.Fatal(err)
	}
	return obj.(*model.Service)
}

// The informers keep the model object, frozen, and the identity, never
// the API object; the informer's key function reads the identity.
func TestCacheHoldsModelObjects(t *testing.T) {
	transform := transformFor(func(ns string) bool { return ns != "hidden" }, nil, nil)
	s := service("7", "10.0.0.1", map[string]string{"big": "annotation"})
	s.ManagedFields = []metav1.ManagedFieldsEntry{{Manager: "kubectl"}}
	out, err := transform(s)
	if err != nil {
		t.Fatal(err)
	}
	c, ok := out.(*cached)
	if !ok {
		t.Fatalf("transform returned %T", out)
	}
	sent, err := c.model()
	if err != nil {
		t.Fatal(err)
	}
	svc := thawedService(t, model.Change{Key: model.Key{Kind: model.KindService, Namespace: "ns", Name: "web"}, Object: sent})
	if c.object != nil || svc.ClusterIPs[0].String() != "10.0.0.1" || svc.Ports[0].Port != 80 {
		t.Fatalf("cached %+v, want the model Service frozen", c)
	}
	key, err := cache.MetaNamespaceKeyFunc(c)
	if err != nil || key != "ns/web" {
		t.Fatalf("key %q %v, want ns/web", key, err)
	}
	if unsafe.StringData(key) != unsafe.StringData(c.key) {
		t.Fatal("the informers' key is a new string, not the entry's own")
	}
	if again, _ := transform(c); again != c {
		t.Fatal("the transform is not idempotent")
	}

	broken, _ := transform(service("8", "not-an-ip", nil))
	if b := broken.(*cached); b.frozen != "" || b.err == nil || !strings.Contains(b.err.Error(), "not-an-ip") {
		t.Fatalf("broken service cached as %+v, want its error", b)
	}
	finished, _ := transform(&corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "job"},
		Status: corev1.PodStatus{Phase: corev1.PodSucceeded, PodIP: "10.1.0.1"}})
	if f := finished.(*cached); f.frozen != "" || f.object != nil || f.name() != "job" {
		t.Fatalf("finished pod cached as %+v, want no model object", f)
	}
	hidden := service("9", "10.0.0.2", nil)
	hidden.Namespace = "hidden"
	if h, _ := transform(hidden); h.(*cached).frozen != "" {
		t.Fatal("an object outside kubernetes.namespaces keeps its model object")
	}
	ns, _ := transform(&corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "hidden"}})
	if n := ns.(*cached); n.object != nil {
		t.Fatal("a namespace outside kubernetes.namespaces keeps its model object")
	}
}

// Replays and ring changes walk the cache namespace by namespace.
func TestByNamespace(t *testing.T) {
	list := []any{
		&cached{namespace: "b", key: "b/y"}, &cached{namespace: "a", key: "a/z"}, &cached{namespace: "b", key: "b/x"},
		&cached{namespace: "", key: "a"}, &cached{namespace: "a", key: "a/b"},
	}
	var got []string
	for _, obj := range byNamespace(list) {
		c := obj.(*cached)
		got = append(got, c.namespace+"/"+c.name())
	}
	want := []string{"/a", "a/b", "a/z", "b/x", "b/y"}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("order %v, want %v", got, want)
	}
}

// The cache entry and its model object keep no string of the decoded API
// object, so the decoded object's memory is freed whole.
func TestCacheKeepsNothingOfTheAPIObject(t *testing.T) {
	s := service("7", "10.0.0.1", nil)
	s.Spec.ExternalName = "db.example.org"
	decoded := []string{s.Namespace, s.Name, s.ResourceVersion, s.Spec.Ports[0].Name, s.Spec.ExternalName}
	c := cachedOf(t, s).(*cached)
	svc := thawedService(t, model.Change{Key: model.Key{Kind: model.KindService, Namespace: c.namespace, Name: c.name()}, Object: c.frozen})
	kept := []string{c.namespace, c.name(), c.resourceVersion, string(c.frozen), svc.Ports[0].Name, svc.ExternalName}
	for _, k := range kept {
		for _, d := range decoded {
			if k != "" && unsafe.StringData(k) == unsafe.StringData(d) {
				t.Fatalf("the cache keeps %q of the API object itself, not a copy", k)
			}
		}
	}
	if c.namespace != "ns" || c.name() != "web" || c.resourceVersion != "7" || svc.Ports[0].Name != "http" || svc.Namespace != "ns" {
		t.Fatalf("cached %+v with %+v, want ns/web at 7 with port http", c, svc)
	}
}

// A list that brings back an object held at the same resourceVersion, in
// the informer's own store or in a store it replaces, reuses its entry:
// the frozen strings the zones share stay where they are. Any other
// version is converted anew.
func TestTransformReusesHeldEntries(t *testing.T) {
	own := cache.NewStore(cache.MetaNamespaceKeyFunc)
	replaced := cache.NewStore(cache.MetaNamespaceKeyFunc)
	held := &heldEntries{own: own}
	transform := transformFor(func(string) bool { return true }, held, nil)
	first, err := transform(service("5", "10.0.0.1", nil))
	if err != nil {
		t.Fatal(err)
	}
	if err := own.Add(first); err != nil {
		t.Fatal(err)
	}
	if again, _ := transform(service("5", "10.0.0.1", nil)); again != first {
		t.Fatal("an object listed again at the resourceVersion held was converted anew")
	}
	newer, _ := transform(service("6", "10.0.0.9", nil))
	if newer == first || newer.(*cached).resourceVersion != "6" {
		t.Fatalf("a newer version got %+v, want a new entry at 6", newer)
	}
	if thawedService(t, model.Change{Key: model.Key{Kind: model.KindService, Namespace: "ns", Name: "web"}, Object: newer.(*cached).frozen}).ClusterIPs[0].String() != "10.0.0.9" {
		t.Fatal("a newer version carries the old records")
	}

	// A replacement informer, whose own store is empty, finds the entry
	// in the store it replaces until it lets that go.
	if err := replaced.Add(first); err != nil {
		t.Fatal(err)
	}
	next := &heldEntries{own: cache.NewStore(cache.MetaNamespaceKeyFunc)}
	next.replaced.Store(&[]cache.Store{replaced})
	transform = transformFor(func(string) bool { return true }, next, nil)
	if got, _ := transform(service("5", "10.0.0.1", nil)); got != first {
		t.Fatal("a replacement's list converted anew an object the replaced store holds")
	}
	next.replaced.Store(nil)
	if got, _ := transform(service("5", "10.0.0.1", nil)); got == first {
		t.Fatal("a replacement still reuses entries of a store it let go")
	}
}
