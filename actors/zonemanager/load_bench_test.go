package zonemanager_test

import (
	"fmt"
	"io"
	"log/slog"
	"net/netip"
	"runtime"
	"sync/atomic"
	"testing"
	"time"

	"github.com/asynkron/protoactor-go/actor"

	"github.com/shardns/shardns/actors/zonemanager"
	"github.com/shardns/shardns/model"
	"github.com/shardns/shardns/zone"
)

// BenchmarkLoadReverseZones loads 4,000 services whose addresses lie in
// 4,000 /24s through a Manager, until it has synced: a replica of a
// sharded cluster holds a share of nearly every reverse zone, a few PTRs
// each. live-B/service is what the loaded zones keep on the heap, their
// service zones and reverse zones together.
func BenchmarkLoadReverseZones(b *testing.B) {
	const services = 4000
	logger := slog.New(slog.NewTextHandler(io.Discard, nil))
	var changes []model.Change
	for i := range services {
		s := &model.Service{Namespace: fmt.Sprintf("n%d", i%40), Name: fmt.Sprintf("s%d", i), Type: model.ServiceClusterIP,
			ClusterIPs: []netip.Addr{netip.AddrFrom4([4]byte{10, byte(96 + i/256), byte(i % 256), 1})},
			Ports:      []model.Port{{Name: "http", Protocol: "TCP", Port: 80}}}
		changes = append(changes, model.Change{Key: s.Key(), Object: s})
	}
	var grown int64
	for b.Loop() {
		b.StopTimer()
		before := liveHeap()
		m := startBenchManager(logger)
		b.StartTimer()
		m.load(changes)
		b.StopTimer()
		grown += int64(liveHeap()) - int64(before)
		m.stop()
		b.StartTimer()
	}
	b.ReportMetric(float64(grown)/float64(b.N)/services, "live-B/service")
}

// benchManager is a zone manager of its own actor system and table, fed
// as a source would feed it.
type benchManager struct {
	system  *actor.ActorSystem
	manager *actor.PID
	synced  *atomic.Bool
	table   *zone.Table
}

func startBenchManager(logger *slog.Logger) *benchManager {
	cfg := &zone.Config{Domains: zone.Domains{Cluster: []string{"cluster.local."}, Reverse: []string{"in-addr.arpa."}}, TTL: 5}
	cfg.Prepare()
	table := zone.NewTable(zone.NewDirectory(cfg, map[string]struct{}{}, false, 0))
	m := &benchManager{synced: &atomic.Bool{}, table: table}
	m.system = actor.NewActorSystem(actor.WithLoggerFactory(func(*actor.ActorSystem) *slog.Logger { return logger }))
	m.manager = m.system.Root.Spawn(zonemanager.NewManagerProps(zonemanager.Config{Answer: cfg, Table: table,
		Sources: []string{"bench"}, Now: time.Now, Logger: logger, Synced: m.synced}))
	return m
}

// load sends changes in a source's batches of 100, then the source's
// sync, and returns once the manager has synced: every zone published.
func (m *benchManager) load(changes []model.Change) {
	for i := 0; i < len(changes); i += 100 {
		m.system.Root.Send(m.manager, &zonemanager.Apply{Source: "bench", Changes: changes[i:min(i+100, len(changes))]})
	}
	m.system.Root.Send(m.manager, &zonemanager.Synced{Source: "bench"})
	for !m.synced.Load() {
		time.Sleep(time.Millisecond)
	}
}

func (m *benchManager) stop() {
	m.system.Root.StopFuture(m.manager).Wait()
	m.system.Shutdown()
}

// liveHeap collects and returns the bytes the heap holds.
func liveHeap() uint64 {
	runtime.GC()
	var m runtime.MemStats
	runtime.ReadMemStats(&m)
	return m.HeapAlloc
}
