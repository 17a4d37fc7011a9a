package multicluster

import (
	"testing"
	"time"

	"github.com/shardns/shardns/model"
	"github.com/shardns/shardns/sources/kubeobj"
)

// An imported slice added once the informer has synced carries its
// trigger time when its implementation writes one, an import its
// creation; the initial list and deletes carry none, and the trigger
// stays out of what the zones build records from.
func TestHandlerTriggers(t *testing.T) {
	const mcs = "multicluster.x-k8s.io/v1alpha1"
	created := time.Date(2026, 3, 1, 10, 0, 0, 0, time.UTC)
	at := func(obj map[string]any, rv string, annotations map[string]any) map[string]any {
		meta := obj["metadata"].(map[string]any)
		meta["creationTimestamp"], meta["resourceVersion"] = "2026-03-01T10:00:00Z", rv
		if annotations != nil {
			meta["annotations"] = annotations
		}
		return obj
	}
	imported := func(rv, trigger, ip string) any {
		u := object("discovery.k8s.io/v1", "EndpointSlice", "shop", "db-east", map[string]any{
			kubeobj.MultiClusterServiceLabel: "db", kubeobj.SourceClusterLabel: "east"},
			map[string]any{"addressType": "IPv4", "endpoints": []any{map[string]any{"addresses": []any{ip}}}})
		at(u.Object, rv, map[string]any{kubeobj.LastChangeTriggerTime: trigger})
		e, _ := transformFor(model.KindMultiClusterSlice, quiet)(u)
		return e
	}
	imp := object(mcs, "ServiceImport", "shop", "web", nil, map[string]any{"spec": map[string]any{"type": "Headless"}})
	at(imp.Object, "1", nil)
	importEntry, _ := transformFor(model.KindServiceImport, quiet)(imp)

	var sent []model.Change
	handlerOf := func(kind model.Kind) *handler {
		return &handler{kind: kind, exposed: func(string) bool { return true }, log: quiet,
			send: func(c model.Change) { sent = append(sent, c) }, now: func() time.Time { return created.Add(5 * time.Second) }}
	}
	slices, imports := handlerOf(model.KindMultiClusterSlice), handlerOf(model.KindServiceImport)
	cases := []struct {
		name  string
		event func()
		want  time.Time
	}{
		{"a slice added after the list", func() { slices.OnAdd(imported("1", "2026-03-01T10:00:02Z", "172.20.0.1"), false) },
			created.Add(2 * time.Second)},
		{"a slice of the initial list", func() { slices.OnAdd(imported("1", "2026-03-01T10:00:02Z", "172.20.0.1"), true) }, time.Time{}},
		{"a slice updated", func() {
			slices.OnUpdate(imported("1", "2026-03-01T10:00:02Z", "172.20.0.1"), imported("2", "2026-03-01T10:00:03Z", "172.20.0.2"))
		}, created.Add(3 * time.Second)},
		{"a slice with a malformed trigger time", func() { slices.OnAdd(imported("1", "now", "172.20.0.1"), false) }, time.Time{}},
		{"a slice deleted", func() { slices.OnDelete(imported("3", "2026-03-01T10:00:03Z", "172.20.0.2")) }, time.Time{}},
		{"an import added after the list", func() { imports.OnAdd(importEntry, false) }, created},
	}
	for _, c := range cases {
		sent = nil
		c.event()
		if len(sent) != 1 || !sent[0].Trigger.Equal(c.want) {
			t.Errorf("%s: sent %v, want one change triggered at %v", c.name, sent, c.want)
		}
	}
	// Frozen alike: the trigger time is not part of the records.
	a, b := imported("1", "2026-03-01T10:00:02Z", "172.20.0.1").(*entry), imported("1", "2026-03-01T10:00:04Z", "172.20.0.1").(*entry)
	if a.frozen != b.frozen {
		t.Error("slices that differ in their trigger time alone freeze apart")
	}
}
