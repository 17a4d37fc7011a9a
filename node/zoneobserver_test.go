package node

import (
	"slices"
	"sync/atomic"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"

	"github.com/shardns/shardns/metrics"
)

// What the zone manager reports turns into the metrics operators read:
// the zones in their grace period are counted
// (shardns_cluster_zones_in_grace) and named for /debug/ring, and
// handed-over zones counted by result.
func TestZoneObserverMetrics(t *testing.T) {
	_, m := metrics.New("test")
	var grace atomic.Pointer[[]string]
	o := &zoneObserver{metrics: m, grace: &grace}
	o.Grace([]string{"a.svc.cluster.local.", "b.svc.cluster.local."})
	if got := value(t, m.Cluster.ZonesInGrace); got != 2 {
		t.Errorf("zones in grace %v, want 2", got)
	}
	if got := *grace.Load(); !slices.Equal(got, []string{"a.svc.cluster.local.", "b.svc.cluster.local."}) {
		t.Errorf("/debug/ring names %q", got)
	}
	o.Grace(nil)
	if got := value(t, m.Cluster.ZonesInGrace); got != 0 {
		t.Errorf("zones in grace %v once released, want 0", got)
	}
	o.HandedOver("empty")
	if got := value(t, m.Cluster.ZonesHandedOver.WithLabelValues("empty")); got != 1 {
		t.Errorf("zones handed over empty %v, want 1", got)
	}
}

// value reads a gauge's or a counter's value.
func value(t *testing.T, c prometheus.Metric) float64 {
	t.Helper()
	var out dto.Metric
	if err := c.Write(&out); err != nil {
		t.Fatal(err)
	}
	if out.Gauge != nil {
		return out.Gauge.GetValue()
	}
	return out.Counter.GetValue()
}
