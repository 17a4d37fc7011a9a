package node

import (
	"sync/atomic"
	"time"

	"github.com/shardns/shardns/actors/zonemanager"
	"github.com/shardns/shardns/metrics"
)

// zoneObserver turns what the zone manager and its zones did into the
// node's metrics, its /debug/ring grace list and its memory releases.
type zoneObserver struct {
	metrics   *metrics.All
	memory    *memoryReleaser
	grace     *atomic.Pointer[[]string]   // the zones in their grace period, for /debug/ring
	published func(zonemanager.Published) // coherence of node-local processes
}

var _ zonemanager.Observer = (*zoneObserver)(nil)

func (o *zoneObserver) Handoff(gained, lost int) {
	o.memory.loading() // gained zones load now, lost ones are dropped after the grace
	o.metrics.Cluster.Handoffs.WithLabelValues("gained").Add(float64(gained))
	o.metrics.Cluster.Handoffs.WithLabelValues("lost").Add(float64(lost))
}

func (o *zoneObserver) GainLoaded(took time.Duration) {
	o.metrics.Cluster.GainLoadDuration.Observe(took.Seconds())
}

func (o *zoneObserver) Grace(keys []string) {
	o.metrics.Cluster.ZonesInGrace.Set(float64(len(keys)))
	o.grace.Store(&keys)
}

func (o *zoneObserver) Loading()      { o.memory.loading() }
func (o *zoneObserver) Settled()      { o.memory.release() }
func (o *zoneObserver) Changes(n int) { o.memory.changed(n) }

func (o *zoneObserver) HandedOver(result string) {
	o.metrics.Cluster.ZonesHandedOver.WithLabelValues(result).Inc()
}

func (o *zoneObserver) MeshSkipped(why string) {
	o.metrics.Kubernetes.MeshSkipped.WithLabelValues(why).Inc()
}

func (o *zoneObserver) Published(p zonemanager.Published) {
	if o.published != nil {
		o.published(p)
	}
}
