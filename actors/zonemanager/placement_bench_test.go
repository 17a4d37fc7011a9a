package zonemanager

import (
	"fmt"
	"io"
	"log/slog"
	"testing"

	"github.com/asynkron/protoactor-go/actor"

	"github.com/shardns/shardns/cluster"
	"github.com/shardns/shardns/zone"
)

// BenchmarkPublishPlacement publishes the placement of a replica of three
// with sharded watches, as it does whenever the number of zones it knows
// changes (a churn of endpoint addresses does that at most changes): 100
// namespaces and 5,000 reverse /24 zones, each served here.
func BenchmarkPublishPlacement(b *testing.B) {
	cfg := &zone.Config{Domains: zone.Domains{Cluster: []string{"cluster.local."}, Reverse: []string{"in-addr.arpa."}}, TTL: 5}
	cfg.Prepare()
	ring := cluster.NewRing("r0", []cluster.Member{{Name: "r0", Owner: true}, {Name: "r1", Owner: true}, {Name: "r2", Owner: true}}, 1)
	m := newManager(Config{Answer: cfg, Table: zone.NewTable(zone.NewDirectory(cfg, nil, true, 1)),
		Logger: slog.New(slog.NewTextHandler(io.Discard, nil)), Self: "r0", Ring: ring})
	m.ring, m.sharded = ring, true
	pid := &actor.PID{Id: "zone"}
	for i := range 5000 {
		key := fmt.Sprintf("%d.%d.10.in-addr.arpa.", i%250, 200+i/250)
		m.routes.zoneSize[key], m.children[key] = 1, pid
	}
	for i := range 100 {
		ns := fmt.Sprintf("bench%d", i)
		m.routes.namespaces[ns] = struct{}{}
		key := zone.ServiceZoneKey(ns, "cluster.local.")
		m.routes.zoneSize[key] = 200
		if m.owns(key) {
			m.children[key] = pid
		}
	}
	b.ReportAllocs()
	for b.Loop() {
		m.publishPlacement()
	}
}
