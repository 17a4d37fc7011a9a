package node

import (
	"fmt"
	"io"
	"log/slog"
	"math"
	"os"
	"runtime/debug"
	"runtime/metrics"
	"testing"
	"time"

	"github.com/shardns/shardns/config"
	"github.com/shardns/shardns/internal/testutil"
)

func TestMemoryLimitFollowsConfig(t *testing.T) {
	if _, ok := os.LookupEnv("GOMEMLIMIT"); ok {
		t.Skip("GOMEMLIMIT is set: memory.limit does not apply")
	}
	previous := debug.SetMemoryLimit(-1)
	t.Cleanup(func() { debug.SetMemoryLimit(previous) })
	log := slog.New(slog.NewTextHandler(io.Discard, nil))

	applyMemoryLimit(config.MemoryConfig{Limit: "512Mi"}, log)
	if got := debug.SetMemoryLimit(-1); got != 512<<20 {
		t.Fatalf("memory.limit 512Mi: heap limit %d", got)
	}
	applyMemoryLimit(config.MemoryConfig{Limit: "none"}, log)
	if got := debug.SetMemoryLimit(-1); got != math.MaxInt64 {
		t.Fatalf("memory.limit none: heap limit %d, want none", got)
	}
}

// gcPercent reads the collector's target without changing it.
func gcPercent(t *testing.T) int64 {
	t.Helper()
	s := []metrics.Sample{{Name: "/gc/gogc:percent"}}
	metrics.Read(s)
	return int64(s[0].Value.Uint64())
}

// While a load is under way the collector runs at loadGCPercent and
// memory is reported pending; the configured target comes back, and
// nothing is pending, once the last load begun has released.
func TestLoadsRunTheCollectorTight(t *testing.T) {
	previous := debug.SetGCPercent(100)
	t.Cleanup(func() { debug.SetGCPercent(previous) })
	r := startMemoryReleaser(slog.New(slog.NewTextHandler(io.Discard, nil)))
	defer r.close()
	wantState := func(want int64, pending bool) func() error {
		return func() error {
			if got := gcPercent(t); got != want || r.pending() != pending {
				return fmt.Errorf("GOGC %d, pending %v; want GOGC %d, pending %v", got, r.pending(), want, pending)
			}
			return nil
		}
	}
	wantPercent := func(want int64) func() error { return wantState(want, false) }

	r.loading()
	if got := gcPercent(t); got != loadGCPercent || !r.pending() {
		t.Fatalf("a load runs the collector at %d, want %d; pending %v", got, loadGCPercent, r.pending())
	}
	r.release()
	testutil.Eventually(t, 10*time.Second, wantPercent(100))

	// A load that begins after the release stays tight past it.
	r.loading()
	r.release()
	r.loading()
	testutil.Eventually(t, 10*time.Second, wantState(loadGCPercent, true))
	r.release()
	testutil.Eventually(t, 10*time.Second, wantPercent(100))

	// A lower target, or none, is left as it is.
	debug.SetGCPercent(10)
	r.loading()
	if got := gcPercent(t); got != 10 {
		t.Fatalf("GOGC=10 became %d during a load", got)
	}
	r.release()
	testutil.Eventually(t, 10*time.Second, wantPercent(10))
}

// Live changes return freed memory once enough of them have come and they
// pause: fewer ask for nothing, more are returned once.
func TestLiveChangesReturnMemory(t *testing.T) {
	r := startMemoryReleaser(slog.New(slog.NewTextHandler(io.Discard, nil)))
	defer r.close()
	r.changed(changesPerRelease - 1)
	if r.pending() {
		t.Fatal("fewer changes than changesPerRelease asked for a release")
	}
	r.changed(1)
	if !r.pending() {
		t.Fatal("changesPerRelease changes asked for no release")
	}
	testutil.Eventually(t, 10*time.Second, func() error {
		if r.pending() {
			return fmt.Errorf("freed memory not returned once the changes paused")
		}
		return nil
	})
	if n := r.changes.Load(); n != 0 {
		t.Fatalf("%d changes still counted after the release", n)
	}
}

// A burst of changes too small for changesPerRelease still returns its
// garbage once the changes pause for burstQuiet; fewer than burstMin do
// not.
func TestPausedBurstOfChangesReturnsMemory(t *testing.T) {
	r := startMemoryReleaser(slog.New(slog.NewTextHandler(io.Discard, nil)))
	defer r.close()
	r.burstQuiet = 50 * time.Millisecond
	r.changed(burstMin - 1)
	if r.burst.Stop() || r.asked.Load() != 0 {
		t.Fatalf("%d changes, fewer than burstMin, set a release going", burstMin-1)
	}
	r.changed(1)
	testutil.Eventually(t, 10*time.Second, func() error {
		if r.asked.Load() == 0 || r.pending() {
			return fmt.Errorf("the paused burst's memory is not returned yet")
		}
		return nil
	})
	if n := r.changes.Load(); n != 0 {
		t.Fatalf("%d changes still counted after the release", n)
	}
}

// Live changes that return memory during a load do not end the load: the
// collector stays tight, and the load's own release is still awaited.
func TestLiveChangesDuringALoadKeepItTight(t *testing.T) {
	r := startMemoryReleaser(slog.New(slog.NewTextHandler(io.Discard, nil)))
	defer r.close()
	r.loading()
	r.changed(changesPerRelease)
	testutil.Eventually(t, 10*time.Second, func() error {
		if r.asked.Load() != r.returned.Load() {
			return fmt.Errorf("the changes' freed memory is not returned yet")
		}
		return nil
	})
	if !r.pending() {
		t.Fatal("returning the changes' memory ended the load under way")
	}
	r.mu.Lock()
	tight := r.tight
	r.mu.Unlock()
	if !tight {
		t.Fatal("returning the changes' memory relaxed the collector during a load")
	}
	r.release()
	testutil.Eventually(t, 10*time.Second, func() error {
		if r.pending() {
			return fmt.Errorf("the load's release is not done yet")
		}
		return nil
	})
}
