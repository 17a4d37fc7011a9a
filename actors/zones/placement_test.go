package zones_test

import (
	"fmt"
	"io"
	"log/slog"
	"path/filepath"
	"sync/atomic"
	"testing"
	"time"

	"github.com/asynkron/protoactor-go/actor"

	"github.com/shardns/shardns/actors/zones"
	ring "github.com/shardns/shardns/cluster"
	"github.com/shardns/shardns/internal/testutil"
	"github.com/shardns/shardns/sources/manifest"
	"github.com/shardns/shardns/zone"
)

// A replica that announces itself as an owner is not loaded until the
// zones it gains answer; a ring change that gains nothing leaves it
// loaded.
func TestLoadedOnlyOnceGainedZonesAnswer(t *testing.T) {
	c := &cluster{file: filepath.Join(t.TempDir(), "cluster.yaml")}
	var services []string
	for i := range 200 {
		services = append(services, service(fmt.Sprintf("s%d", i), fmt.Sprintf("10.96.%d.%d", i/200, i%200+1)))
	}
	c.write(t, services...)
	c.cfg = &zone.Config{Domains: zone.Domains{Cluster: []string{"cluster.local."}}, TTL: 5}
	c.cfg.Prepare()
	c.table = zone.NewTable(zone.NewDirectory(c.cfg, map[string]struct{}{}, false, 0))
	logger := slog.New(slog.NewTextHandler(io.Discard, nil))
	system := actor.NewActorSystem(actor.WithLoggerFactory(func(*actor.ActorSystem) *slog.Logger { return logger }))
	var synced, loaded atomic.Bool
	joining := ring.NewRing("a", []ring.Member{{Name: "a"}}, 1)
	manager := system.Root.Spawn(zones.NewManagerProps(zones.Config{Answer: c.cfg, Table: c.table,
		Sources: []string{manifest.SourceName}, Now: time.Now, Logger: logger, Synced: &synced,
		Self: "a", Ring: joining, Loaded: &loaded, Grace: time.Second}))
	initial, err := manifest.Load(nil, []string{c.file})
	if err != nil {
		t.Fatal(err)
	}
	source := system.Root.Spawn(manifest.NewProps(manifest.Config{Files: []string{c.file}, Interval: time.Hour,
		Manager: manager, Logger: logger}, initial))
	t.Cleanup(func() {
		system.Root.StopFuture(source).Wait()
		system.Root.StopFuture(manager).Wait()
		system.Shutdown()
	})
	testutil.Eventually(t, 10*time.Second, func() error {
		if !synced.Load() {
			return fmt.Errorf("not synced")
		}
		return nil
	})
	if err := c.check("s7", "10.96.0.8"); err == nil {
		t.Fatal("a replica that owns nothing answers from its own state")
	}

	// The node marks itself not loaded as it announces; the manager
	// turns it loaded once the gained zone has published.
	loaded.Store(false)
	system.Root.Send(manager, &zones.RingChanged{Ring: ring.NewRing("a", []ring.Member{{Name: "a", Owner: true}}, 1)})
	testutil.Eventually(t, 10*time.Second, func() error {
		if !loaded.Load() {
			return fmt.Errorf("the gained zone has not loaded")
		}
		return nil
	})
	if err := c.check("s7", "10.96.0.8"); err != nil {
		t.Fatalf("loaded, but the gained zone does not answer: %v", err)
	}

	loaded.Store(false)
	system.Root.Send(manager, &zones.RingChanged{Ring: ring.NewRing("a", []ring.Member{{Name: "a", Owner: true}, {Name: "b"}}, 1)})
	testutil.Eventually(t, 10*time.Second, func() error {
		if !loaded.Load() {
			return fmt.Errorf("a ring change that gains nothing left the replica not loaded")
		}
		return nil
	})
}
