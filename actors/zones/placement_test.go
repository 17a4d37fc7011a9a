package zones_test

import (
	"fmt"
	"io"
	"log/slog"
	"path/filepath"
	"sync/atomic"
	"testing"
	"time"

	"github.com/shardns/shardns/actors/zones"
	ring "github.com/shardns/shardns/cluster"
	"github.com/shardns/shardns/internal/testutil"
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
	var loaded atomic.Bool
	joining := ring.NewRing("a", []ring.Member{{Name: "a"}}, 1)
	system, manager := c.serve(t, slog.New(slog.NewTextHandler(io.Discard, nil)), time.Hour, func(cfg zones.Config) zones.Config {
		cfg.Self, cfg.Ring, cfg.Loaded, cfg.Grace = "a", joining, &loaded, time.Second
		return cfg
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
