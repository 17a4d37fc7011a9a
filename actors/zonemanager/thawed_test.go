package zonemanager

import (
	"net/netip"
	"testing"
	"time"

	"github.com/shardns/shardns/model"
)

// A pod's change keeps its trigger when thawed on its way to the pod
// zone, so the pod's programming latency is measured like a service's.
func TestThawedKeepsTrigger(t *testing.T) {
	p := &model.Pod{Namespace: "shop", Name: "web-0", IPs: []netip.Addr{netip.MustParseAddr("10.1.0.7")}}
	f, ok := model.Freeze(p)
	if !ok {
		t.Fatal("a pod does not freeze")
	}
	trigger := time.Unix(1000, 0)
	got, err := thawed(model.Change{Key: p.Key(), Object: f, Trigger: trigger})
	if err != nil {
		t.Fatal(err)
	}
	if pod, ok := got.Object.(*model.Pod); !ok || pod.IPs[0] != p.IPs[0] || !got.Trigger.Equal(trigger) {
		t.Fatalf("thawed into %+v, want the pod at 10.1.0.7 triggered at %v", got, trigger)
	}
}
