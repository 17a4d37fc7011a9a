package dispatch

import (
	"sync"
	"time"
)

// interest remembers which askers (actor remote addresses) asked this
// replica about which zones, and when last: those are the processes
// whose caches may hold its answers of the zone, which it tells when
// the zone changes (coherence.go). An entry lasts life from the last
// question, no shorter than the longest an answer of this replica may be
// cached, so that every asker holding one is told. The table is bounded:
// beyond max entries a random one goes, and its asker is told at the
// next flush that every name of that zone changed, since it would no
// longer be told what does. Its methods are safe for concurrent use.
type interest struct {
	life    time.Duration
	max     int
	now     func() time.Time
	evicted func() // told of each entry the bound drops; must not block

	mu    sync.Mutex
	zones map[string]map[string]time.Time // zone key → asker → last asked
	n     int                             // entries in zones
	// dropped are the entries the bound dropped since the last flush:
	// asker → zone keys.
	dropped map[string][]string
}

func newInterest(life time.Duration, max int, now func() time.Time, evicted func()) *interest {
	return &interest{life: life, max: max, now: now, evicted: evicted, zones: map[string]map[string]time.Time{},
		dropped: map[string][]string{}}
}

// note records that asker asks about zone now, and reports whether the
// entry is new.
func (t *interest) note(zone, asker string) (added bool) {
	now := t.now()
	t.mu.Lock()
	defer t.mu.Unlock()
	askers := t.zones[zone]
	if _, ok := askers[asker]; ok {
		askers[asker] = now
		return false
	}
	if t.n >= t.max {
		t.evictOne()
		if t.evicted != nil {
			t.evicted()
		}
	}
	if askers == nil {
		askers = map[string]time.Time{}
		t.zones[zone] = askers
	}
	askers[asker] = now
	t.n++
	return true
}

// evictOne drops a random entry (map order is random enough); t.mu is held.
func (t *interest) evictOne() {
	for zone, askers := range t.zones {
		for asker := range askers {
			t.remove(zone, asker)
			t.dropped[asker] = append(t.dropped[asker], zone)
			return
		}
	}
}

// remove drops the entry of asker in zone; t.mu is held.
func (t *interest) remove(zone, asker string) {
	askers := t.zones[zone]
	if _, ok := askers[asker]; !ok {
		return
	}
	delete(askers, asker)
	t.n--
	if len(askers) == 0 {
		delete(t.zones, zone)
	}
}

// unnote drops the entry of asker in zone: a question note added, which
// was not answered from the zone (so nothing was cached).
func (t *interest) unnote(zone, asker string) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.remove(zone, asker)
}

// askers are the askers interested in zone at now.
func (t *interest) askers(zone string, now time.Time) []string {
	t.mu.Lock()
	defer t.mu.Unlock()
	var out []string
	for asker, at := range t.zones[zone] {
		if now.Sub(at) < t.life {
			out = append(out, asker)
		}
	}
	return out
}

// takeEvicted returns the entries evicted since it was last called.
func (t *interest) takeEvicted() map[string][]string {
	t.mu.Lock()
	defer t.mu.Unlock()
	if len(t.dropped) == 0 {
		return nil
	}
	out := t.dropped
	t.dropped = map[string][]string{}
	return out
}

// expire drops the entries older than life at now, and returns the
// askers that still have one.
func (t *interest) expire(now time.Time) map[string]bool {
	t.mu.Lock()
	defer t.mu.Unlock()
	live := map[string]bool{}
	for zone, askers := range t.zones {
		for asker, at := range askers {
			if now.Sub(at) >= t.life {
				t.remove(zone, asker)
			} else {
				live[asker] = true
			}
		}
	}
	for asker := range t.dropped {
		live[asker] = true // still to be told
	}
	return live
}

// len is how many entries the table holds.
func (t *interest) len() int {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.n
}
