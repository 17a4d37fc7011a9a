package node

import (
	"fmt"
	"io"
	"log/slog"
	"math"
	"os"
	"runtime/debug"
	"runtime/metrics"
	"sync/atomic"
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

// fakeHeap is a heap reading a test sets: the garbage, live and free
// bytes.
type fakeHeap struct{ garbage, live, free atomic.Uint64 }

func (f *fakeHeap) read() heapReading {
	return heapReading{garbage: f.garbage.Load(), live: f.live.Load(), free: f.free.Load()}
}

// A burst of changes too small for changesPerRelease still returns its
// garbage once the changes pause for burstQuiet; fewer than burstMin do
// only when they left much garbage (at least garbageMin and a quarter of
// the live heap).
func TestPausedBurstOfChangesReturnsMemory(t *testing.T) {
	heap := &fakeHeap{}
	heap.live.Store(40 << 20)
	heap.garbage.Store(9 << 20) // over garbageMin, under a quarter of the live heap
	r := startMemoryReleaserWith(slog.New(slog.NewTextHandler(io.Discard, nil)), time.Hour, heap.read)
	defer r.close()
	r.burstQuiet = 50 * time.Millisecond
	returned := func() error {
		if r.asked.Load() == 0 || r.pending() {
			return fmt.Errorf("the paused burst's memory is not returned yet")
		}
		return nil
	}

	r.changed(burstMin - 1)
	testutil.Eventually(t, 10*time.Second, func() error {
		if r.burst.Stop() {
			return fmt.Errorf("the burst has not paused yet")
		}
		return nil
	})
	r.burstOver() // the pause, for sure over
	if r.asked.Load() != 0 {
		t.Fatalf("%d changes, fewer than burstMin, with little garbage, set a release going", burstMin-1)
	}
	r.changed(1)
	testutil.Eventually(t, 10*time.Second, returned)
	if n := r.changes.Load(); n != 0 {
		t.Fatalf("%d changes still counted after the release", n)
	}

	// A few changes that left a quarter of the live heap as garbage.
	heap.garbage.Store(10 << 20)
	r.changed(3)
	testutil.Eventually(t, 10*time.Second, func() error {
		if r.asked.Load() != 2 || r.pending() {
			return fmt.Errorf("3 changes' garbage of 10 MB over 40 MB live is not returned (asked %d)", r.asked.Load())
		}
		return nil
	})
}

// A replica that nothing changed in returns its garbage at the idle
// check when it is much, and not when it is little or changes came.
func TestIdleGarbageIsReturned(t *testing.T) {
	heap := &fakeHeap{}
	heap.live.Store(40 << 20)
	heap.garbage.Store(2 << 20)
	heap.free.Store(freeMin - 1)
	r := startMemoryReleaserWith(slog.New(slog.NewTextHandler(io.Discard, nil)), 20*time.Millisecond, heap.read)
	defer r.close()
	r.burstQuiet = time.Hour // only the idle check returns anything here

	// Several idle checks with little garbage and little free memory
	// return nothing.
	idleChecks(t, r, 5)
	if r.asked.Load() != 0 {
		t.Fatal("2 MB of garbage over 40 MB live, and less than freeMin free, was returned")
	}
	// Much garbage is returned at a check, a change since the last one
	// holding it back for one period.
	r.changed(1)
	heap.garbage.Store(30 << 20)
	testutil.Eventually(t, 10*time.Second, func() error {
		if r.returned.Load() == 0 {
			return fmt.Errorf("30 MB of idle garbage not returned")
		}
		return nil
	})
	if r.changedLately.Load() {
		t.Fatal("the change was not counted by an idle check before the release")
	}
}

// An idle replica returns the free memory the runtime holds once it is
// freeMin or more, but not when a change came since the last check.
func TestIdleFreeMemoryIsReturned(t *testing.T) {
	heap := &fakeHeap{}
	heap.live.Store(40 << 20)
	heap.free.Store(2 << 20)
	quiet := startMemoryReleaserWith(slog.New(slog.NewTextHandler(io.Discard, nil)), time.Hour, heap.read)
	defer quiet.close()
	quiet.burstQuiet = time.Hour // only idleWorthReturning decides here
	quiet.changed(1)
	if quiet.idleWorthReturning() {
		t.Fatal("free memory is to be returned at a check with a change since the last one (a churn)")
	}
	if !quiet.idleWorthReturning() {
		t.Fatal("2 MB of free memory is not to be returned by an idle replica")
	}
	heap.free.Store(freeMin - 1)
	if quiet.idleWorthReturning() {
		t.Fatal("less than freeMin of free memory is to be returned")
	}

	heap.free.Store(2 << 20)
	r := startMemoryReleaserWith(slog.New(slog.NewTextHandler(io.Discard, nil)), 20*time.Millisecond, heap.read)
	defer r.close()
	testutil.Eventually(t, 10*time.Second, func() error {
		if r.returned.Load() == 0 {
			return fmt.Errorf("2 MB of idle free memory not returned")
		}
		return nil
	})
}

// idleChecks waits until r has made at least n idle checks.
func idleChecks(t *testing.T, r *memoryReleaser, n int64) {
	t.Helper()
	testutil.Eventually(t, 10*time.Second, func() error {
		if got := r.idleChecks.Load(); got < n {
			return fmt.Errorf("%d idle checks made, waiting for %d", got, n)
		}
		return nil
	})
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

// An informer's list runs the collector tight until the last list under
// way is over, whatever loads end meanwhile; then the configured target
// comes back and the list's garbage is returned.
func TestListsRunTheCollectorTight(t *testing.T) {
	previous := debug.SetGCPercent(100)
	t.Cleanup(func() { debug.SetGCPercent(previous) })
	r := startMemoryReleaser(slog.New(slog.NewTextHandler(io.Discard, nil)))
	defer r.close()
	gcIs := func(want int64) func() error {
		return func() error {
			if got := gcPercent(t); got != want || r.pending() {
				return fmt.Errorf("GOGC %d, pending %v; want GOGC %d, nothing pending", got, r.pending(), want)
			}
			return nil
		}
	}
	r.listing(true)
	if got := gcPercent(t); got != loadGCPercent {
		t.Fatalf("a list runs the collector at %d, want %d", got, loadGCPercent)
	}
	r.listing(true)
	r.loading()
	r.release()
	r.listing(false)
	// The load and one list are over, one list is not: the release they
	// asked for is done and the collector still tight.
	testutil.Eventually(t, 10*time.Second, gcIs(loadGCPercent))
	returned := r.returned.Load()
	r.listing(false)
	testutil.Eventually(t, 10*time.Second, gcIs(100))
	if r.returned.Load() == returned {
		t.Fatal("the last list's garbage was not returned")
	}
}
