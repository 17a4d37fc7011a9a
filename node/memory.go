package node

import (
	"errors"
	"log/slog"
	"math"
	"os"
	"runtime"
	"runtime/debug"
	"runtime/metrics"
	"sync"
	"sync/atomic"
	"time"

	"github.com/KimMachineGun/automemlimit/memlimit"

	"github.com/shardns/shardns/config"
)

// autoMemoryShare is the share of the container's memory limit that
// memory.limit: auto gives the Go heap; the rest covers what the heap
// does not count (stacks, the runtime's own structures, the binary).
const autoMemoryShare = 0.9

// heapSampleRate is Go's default runtime.MemProfileRate: one sampled
// allocation per 512 KB allocated.
const heapSampleRate = 512 << 10

// sampleHeap has the runtime sample allocations for heap profiles only
// when /debug/pprof/ is served (http.pprof). Samples nobody can read are
// not free: the runtime's table of sampled call stacks (1.4 MB mapped) is
// touched wherever a sampled stack hashes, and the replicas of
// TestShardedIngest held about 1 MB less RssAnon without them. A profile
// turned on by a reload holds what was allocated since.
//
// The rate is process-wide, and runtime/pprof reads it while it writes a
// heap profile: it is set before profiles are served (at start, or by a
// reload that turns them on, before the handler sees http.pprof), and a
// reload that turns them off leaves it, so that no profile being written
// sees it change. The next start stops sampling.
func sampleHeap(serve bool) {
	rate := 0
	if serve {
		rate = heapSampleRate
	}
	sampling.Lock()
	defer sampling.Unlock()
	if runtime.MemProfileRate != rate {
		runtime.MemProfileRate = rate
	}
}

// sampling orders the nodes of one process (the tests run several) that
// set the rate.
var sampling sync.Mutex

// applyMemoryLimit sets the Go heap's soft limit from memory.limit, unless
// GOMEMLIMIT is set in the environment. The limit is process-wide; a
// reload applies a changed value.
func applyMemoryLimit(m config.MemoryConfig, log *slog.Logger) {
	if v, ok := os.LookupEnv("GOMEMLIMIT"); ok {
		log.Debug("memory.limit: GOMEMLIMIT from the environment wins", "GOMEMLIMIT", v)
		return
	}
	before := debug.SetMemoryLimit(-1)
	bytes, auto, err := m.LimitBytes()
	switch {
	case err != nil:
		return // validated with the configuration
	case auto:
		_, err := memlimit.Set(memlimit.WithProvider(memlimit.FromCgroup), memlimit.WithRatio(autoMemoryShare))
		if err != nil && !errors.Is(err, memlimit.ErrNoLimit) {
			debug.SetMemoryLimit(math.MaxInt64)
			log.Debug("memory.limit: auto found no container memory limit; no heap limit", "err", err)
		}
	case bytes == 0:
		debug.SetMemoryLimit(math.MaxInt64)
	default:
		debug.SetMemoryLimit(bytes)
	}
	if after := debug.SetMemoryLimit(-1); after != before {
		if after == math.MaxInt64 {
			log.Info("memory.limit: no soft limit on the Go heap")
		} else {
			log.Info("memory.limit: soft limit of the Go heap", "bytes", after, "auto", auto)
		}
	}
}

// releaseQuiet is how long a burst of loads and releases must have been
// over before freed memory goes back to the OS.
const releaseQuiet = time.Second

// releaseMaxWait bounds the wait for a quiet second: under changes that
// never pause, freed memory still goes back this often.
const releaseMaxWait = 30 * time.Second

// changesPerRelease is how many live changes (objects added, changed or
// deleted through the watches) leave enough garbage behind to return: each
// rebuilds its zones' snapshots, and a burst of them (a deployment rolled
// out, 10k services created) grows the heap to twice what it keeps, which
// the runtime would hold on to.
const changesPerRelease = 2000

// burstQuiet and burstMin return the garbage of a burst of live changes
// smaller than changesPerRelease: once at least burstMin changes have
// come and then none for burstQuiet. Without it, a burst's garbage stays
// in the heap up to the collector's target, twice what the replica
// keeps, while nothing allocates: at 20k services × 10 endpoints with 3
// replicas, 22 MB of the largest replica's 99 MB of heap 30 s after 10k
// services were created (TestShardedIngest). Changes that never pause
// that long (a steady churn) are left to changesPerRelease.
const (
	burstQuiet = 5 * time.Second
	burstMin   = 100
)

// Garbage that stays in the heap after a pause: fewer changes than
// burstMin, or none at all (gossip, queries, timers), also leave garbage
// behind, and the collector lets it grow to the live heap's size before it
// runs. One run of TestShardedIngest had a replica holding 20 MB of it (45
// MB live) 30 s after 10k services were created, its RSS 0.52 of CoreDNS's
// where its peers' were 0.39. So once changes pause for burstQuiet, and
// at every idle check (idleCheck) when nothing changed since the one
// before, the garbage is returned if it is at least garbageMin and a
// quarter of the live heap (garbageShare): a forced collection costs tens
// of milliseconds, a heap of garbage costs its size for as long as the
// replica stays idle.
//
// The idle check also returns free heap the runtime has not returned
// (freeMin or more): a collection after the last release (the garbage of
// gossip and probes) frees spans, and the runtime's scavenger returns
// free memory only down to the next collection's target, twice the live
// heap. One whole run of TestShardedIngest read 2.0 MB of it on the
// largest replica of six, 30 s after its release: the replica missed the
// bench's target by 0.5 MB. An idle replica collects rarely, so
// this forces about one collection per collection of its own; under
// changes (a churn) it never runs.
const (
	idleCheck    = 15 * time.Second
	garbageMin   = 8 << 20
	garbageShare = 4
	freeMin      = 1 << 20
)

// loadGCPercent is the collector's target (GOGC) while a load is under
// way: the first sync, the zones a ring change gains and loses, a reload.
// A load decodes and builds far more than it keeps, and what it keeps is
// spread over every span its garbage filled before a collection. At the
// default of 100 that is up to twice the live heap, and the spans the
// kept objects hold stay after the load; collecting at a quarter keeps
// them closer together. On TestShardedMemory that took 3–7% off the
// RSS of every replica, at N = 1, 2 and 3, for 30–55% more CPU while
// loading. Between loads the configured target applies again, so queries
// do not pay for it. The target is the process's: with several nodes in
// one process (tests), the first to load holds it and restores it.
const loadGCPercent = 25

// memoryReleaser returns freed memory to the OS after the moments that
// leave much of it behind: the first sync (the initial lists decode every
// object), a ring change (gained zones built, lost ones dropped), a
// reload (the old core stopped). The Go runtime would keep that memory
// mapped for minutes, counted in the process's RSS, and a heap that
// grew during the burst would only be collected once it grew as much
// again. A forced collection costs tens of milliseconds of CPU here, at
// moments that are rare. While a load is under way, it runs the
// collector at loadGCPercent.
type memoryReleaser struct {
	asked, returned atomic.Int64       // releases asked for; the count when memory was last returned
	loads, released atomic.Int64       // loads begun; how many had begun at the last release
	changes         atomic.Int64       // live changes since memory was last returned
	lists           atomic.Int64       // informers' lists under way
	idleChecks      atomic.Int64       // idle checks made (tests wait for them)
	changedLately   atomic.Bool        // a live change came since the last idle check
	readHeap        func() heapReading // readHeapNow; tests replace it
	kick            chan struct{}
	stop            chan struct{}
	done            chan struct{}
	log             *slog.Logger
	burst           *time.Timer   // fires burstQuiet after the last change of a burst
	burstQuiet      time.Duration // burstQuiet, shorter in tests
	idleCheck       time.Duration // idleCheck, shorter in tests

	mu       sync.Mutex
	tight    bool // the collector runs at loadGCPercent
	normalGC int  // the target to restore after the loads
}

func startMemoryReleaser(log *slog.Logger) *memoryReleaser {
	return startMemoryReleaserWith(log, idleCheck, readHeapNow)
}

// startMemoryReleaserWith is startMemoryReleaser with the idle check's
// period and the heap reading given (tests shorten and fake them).
func startMemoryReleaserWith(log *slog.Logger, idle time.Duration, readHeap func() heapReading) *memoryReleaser {
	r := &memoryReleaser{kick: make(chan struct{}, 1), stop: make(chan struct{}), done: make(chan struct{}), log: log,
		burstQuiet: burstQuiet, idleCheck: idle, readHeap: readHeap}
	r.burst = time.AfterFunc(time.Hour, r.burstOver)
	r.burst.Stop()
	go r.run()
	return r
}

// heapReading is what the releaser reads of the heap, in bytes.
type heapReading struct {
	garbage uint64 // objects allocated since the last collection, most of them garbage between changes
	live    uint64 // what the last collection found live
	free    uint64 // free spans the runtime holds and has not returned to the OS
}

// readHeapNow reads the heap from runtime/metrics.
func readHeapNow() heapReading {
	s := []metrics.Sample{{Name: "/memory/classes/heap/objects:bytes"}, {Name: "/gc/heap/live:bytes"},
		{Name: "/memory/classes/heap/free:bytes"}}
	metrics.Read(s)
	objects, live := s[0].Value.Uint64(), s[1].Value.Uint64()
	h := heapReading{live: live, free: s[2].Value.Uint64()}
	if objects > live {
		h.garbage = objects - live
	}
	return h
}

// muchGarbage reports whether the heap holds enough garbage to return.
func (h heapReading) muchGarbage() bool {
	return h.garbage >= garbageMin && h.garbage >= h.live/garbageShare
}

// worthReturning reports whether an idle replica's heap holds enough
// garbage or unreturned free memory to return.
func (h heapReading) worthReturning() bool {
	return h.muchGarbage() || h.free >= freeMin
}

// loading says a load begins; a release follows when it is over. It does
// not wait for the collector: an actor calls it.
func (r *memoryReleaser) loading() {
	r.loads.Add(1)
	r.tighten()
}

// listing says an informer's list begins (began) or is over. A list
// decodes every object of its kind and keeps a few bytes of each: the
// first sync's, and a relist's after the API server lost the watches (a
// restart), which no load covers. The collector runs at loadGCPercent
// while any is under way, and the garbage of the last one to end is
// returned. It never blocks: informers' goroutines call it.
func (r *memoryReleaser) listing(began bool) {
	if began {
		r.lists.Add(1)
		r.tighten()
		return
	}
	if r.lists.Add(-1) == 0 {
		r.returnFreed() // relaxes the collector once no load is under way either
	}
}

// tighten runs the collector at loadGCPercent until relax.
func (r *memoryReleaser) tighten() {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.tight {
		return
	}
	previous := debug.SetGCPercent(loadGCPercent)
	if previous <= loadGCPercent { // as tight already, or GOGC=off (-1): leave it
		debug.SetGCPercent(previous)
		return
	}
	r.tight, r.normalGC = true, previous
}

// relax restores the collector's target once no load and no list is
// under way.
func (r *memoryReleaser) relax() {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.tight && r.lists.Load() == 0 {
		debug.SetGCPercent(r.normalGC)
		r.tight = false
	}
}

// release says the loads begun so far are over, and asks for the memory
// they freed to be returned once the burst is over. It never blocks: an
// actor calls it.
func (r *memoryReleaser) release() {
	r.released.Store(r.loads.Load())
	r.returnFreed()
}

// returnFreed asks for freed memory to be returned once the burst is
// over, without ending a load under way: live changes call it, and a
// load may run meanwhile, which keeps the collector tight until its own
// release.
func (r *memoryReleaser) returnFreed() {
	r.asked.Add(1)
	select {
	case r.kick <- struct{}{}:
	default:
	}
}

// changed counts n live changes; past changesPerRelease, freed memory is
// returned once they pause, and past burstMin once they have paused for
// burstQuiet. It never blocks: an actor calls it.
func (r *memoryReleaser) changed(n int) {
	r.changedLately.Store(true)
	if r.changes.Add(int64(n)) >= changesPerRelease {
		r.returnFreed()
		return
	}
	r.burst.Reset(r.burstQuiet)
}

// burstOver returns the garbage of changes that have paused, unless a
// release since took it: always after burstMin changes, after fewer when
// their garbage is much (muchGarbage).
func (r *memoryReleaser) burstOver() {
	if n := r.changes.Load(); n >= burstMin || (n > 0 && r.readHeap().muchGarbage()) {
		r.returnFreed()
	}
}

// idleWorthReturning is the idle check: when nothing changed or loaded
// since the last one, it reports whether the garbage that came anyway and
// the memory collections freed since the last release are worth
// returning.
func (r *memoryReleaser) idleWorthReturning() bool {
	r.idleChecks.Add(1)
	changed := r.changedLately.Swap(false)
	return !changed && !r.pending() && r.readHeap().worthReturning()
}

// pending reports whether a load is under way, or memory freed by one has
// yet to be returned.
func (r *memoryReleaser) pending() bool {
	return r.loads.Load() != r.released.Load() || r.asked.Load() != r.returned.Load()
}

// close stops the releaser and waits for it, and restores the collector's
// target, whatever lists the stopped sources left unfinished.
func (r *memoryReleaser) close() {
	r.burst.Stop()
	close(r.stop)
	<-r.done
	r.lists.Store(0)
	r.relax()
}

func (r *memoryReleaser) run() {
	defer close(r.done)
	idle := time.NewTicker(r.idleCheck)
	defer idle.Stop()
	for {
		select {
		case <-r.stop:
			return
		case <-r.kick:
		case <-idle.C:
			if !r.idleWorthReturning() {
				continue
			}
			r.asked.Add(1)
		}
		quiet := time.NewTimer(releaseQuiet)
		longest := time.NewTimer(releaseMaxWait)
		for waiting := true; waiting; {
			select {
			case <-r.stop:
				quiet.Stop()
				longest.Stop()
				return
			case <-r.kick:
				quiet.Reset(releaseQuiet)
			case <-quiet.C:
				waiting = false
			case <-longest.C:
				waiting = false
			}
		}
		quiet.Stop()
		longest.Stop()
		start, asked := time.Now(), r.asked.Load()
		r.changes.Store(0)
		debug.FreeOSMemory()
		// A load begun after the last release ends with a release of its
		// own; until then the collector stays tight.
		if r.loads.Load() == r.released.Load() {
			r.relax()
		}
		r.returned.Store(asked)
		r.log.Debug("freed memory returned to the OS", "took", time.Since(start).Round(time.Millisecond))
	}
}
