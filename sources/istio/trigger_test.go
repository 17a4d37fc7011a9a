package istio

import (
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/yaml"

	"github.com/shardns/shardns/model"
	"github.com/shardns/shardns/sources/kubeobj"
)

func object(t testing.TB, text string) *unstructured.Unstructured {
	t.Helper()
	obj := map[string]any{}
	if err := yaml.Unmarshal([]byte(text), &obj); err != nil {
		t.Fatalf("bad test object: %v", err)
	}
	return &unstructured.Unstructured{Object: obj}
}

// A ServiceEntry added once the informer has synced carries its creation
// as the trigger, kept through kubeobj.StripServiceEntry; one of the
// initial list or of a replay, or created before the last minute,
// carries none, and neither do updates: nothing in an entry says when it
// changed.
func TestHandlerTriggers(t *testing.T) {
	created := time.Date(2026, 3, 1, 10, 0, 0, 0, time.UTC)
	entry := func(rv, host string) any {
		s, err := kubeobj.StripServiceEntry(object(t, `apiVersion: networking.istio.io/v1
kind: ServiceEntry
metadata:
  name: se
  namespace: ns
  resourceVersion: "`+rv+`"
  creationTimestamp: "2026-03-01T10:00:00Z"
spec:
  hosts: [`+host+`]
`))
		if err != nil {
			t.Fatal(err)
		}
		return s
	}
	var sent []model.Change
	now := created.Add(2 * time.Second)
	h := &handler{log: quiet, send: func(c model.Change) { sent = append(sent, c) }, now: func() time.Time { return now }}
	cases := []struct {
		name  string
		event func()
		want  time.Time
	}{
		{"an add after the list", func() { h.OnAdd(entry("1", "a.b"), false) }, created},
		{"an add of the initial list", func() { h.OnAdd(entry("1", "a.b"), true) }, time.Time{}},
		{"an update", func() { h.OnUpdate(entry("1", "a.b"), entry("2", "c.d")) }, time.Time{}},
		{"an add of an entry created long ago", func() {
			now = created.Add(time.Hour)
			h.OnAdd(entry("1", "a.b"), false)
		}, time.Time{}},
	}
	for _, c := range cases {
		sent = nil
		c.event()
		if len(sent) != 1 || !sent[0].Trigger.Equal(c.want) {
			t.Errorf("%s: sent %v, want one change triggered at %v", c.name, sent, c.want)
		}
	}
}
