package kubernetes

import (
	"io"
	"log/slog"
	"testing"

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
	h := &handler{kind: model.KindService, exposed: func(string) bool { return true },
		send: func(c model.Change) { sent = append(sent, c) }, log: slog.New(slog.NewTextHandler(io.Discard, nil))}
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
			h.OnUpdate(c.old, c.new)
			if (len(sent) > 0) != c.sends {
				t.Fatalf("sent %v, want a change: %v", sent, c.sends)
			}
		})
	}
	sent = nil
	h.OnDelete(cache.DeletedFinalStateUnknown{Key: "ns/web", Obj: service("3", "10.0.0.1", nil)})
	if len(sent) != 1 || sent[0].Object != nil || sent[0].Key.Name != "web" {
		t.Fatalf("tombstone: sent %v, want a delete of ns/web", sent)
	}
}

// The informers keep only what DNS reads.
func TestStripKeepsOnlyDNSFields(t *testing.T) {
	s := service("7", "10.0.0.1", map[string]string{"big": "annotation"})
	s.ManagedFields = []metav1.ManagedFieldsEntry{{Manager: "kubectl"}}
	s.Spec.Selector = map[string]string{"app": "web"}
	out, err := strip(s)
	if err != nil {
		t.Fatal(err)
	}
	got := out.(*corev1.Service)
	if got.Annotations != nil || got.ManagedFields != nil || got.Spec.Selector != nil {
		t.Fatalf("strip kept %+v", got)
	}
	if got.ResourceVersion != "7" || got.Spec.ClusterIP != "10.0.0.1" || got.Spec.Ports[0].Port != 80 {
		t.Fatalf("strip lost DNS fields: %+v", got)
	}
}
