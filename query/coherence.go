package query

import (
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/miekg/dns"

	"github.com/shardns/shardns/cache"
)

// Owners tell the processes that cached their answers which names
// changed (ZoneChanged on the "invalidate" actor): caches are told, not
// timed. Every owners' cache of a process (a replica's, each server
// block's of a node-local process) checks its hits against one
// Freshness, which records when each word arrived. A cached answer
// stored before a word that covers its name is outdated: it is removed
// and asked again. An answer is stored with the time its question was
// sent, so a word that arrives while the question is in flight covers
// its answer too; the owner notes the asker's interest before it
// answers and tells after it publishes, so no outdated answer survives.

// Freshness records what owners said changed. Its methods are safe for
// concurrent use; a nil Freshness records nothing and holds every
// answer current. Hits read an immutable record that each word replaces
// whole: the hit path takes no lock and allocates nothing.
type Freshness struct {
	now  func() time.Time
	mu   sync.Mutex // serialises writers
	view atomic.Pointer[forgotten]
	// keep is how long a record is kept: the longest an owners' cache
	// may keep an answer (cache.MaxLife). Older answers are gone, so the
	// records that would outdate them are no longer needed.
	keep atomic.Int64
}

// forgotten is one version of the records, never modified once stored.
type forgotten struct {
	// newest is the latest record: an answer stored after it is current.
	newest time.Time
	all    time.Time // every name of every zone (a ring change)
	zones  map[string]zoneForgotten
	// names are the label names (label.zone) owners said changed: every
	// name at or under one.
	names map[string]time.Time
}

// zoneForgotten is when an owner last said every name of a zone changed
// (all), or some label of it (some: the names no label picks out).
type zoneForgotten struct{ all, some time.Time }

// Change is one zone's part of what an owner said changed.
type Change struct {
	Zone   string   // zone key, fully qualified, lower-case
	Labels []string // labels right under Zone, lower-case
	All    bool     // every name of the zone
}

// NewFreshness returns an empty Freshness that keeps records for keep at
// least (see Keep), reading time from now.
func NewFreshness(keep time.Duration, now func() time.Time) *Freshness {
	f := &Freshness{now: now}
	f.view.Store(&forgotten{})
	f.Keep(keep)
	return f
}

// Keep makes f keep its records for d at least: the longest an owners'
// cache that checks with f keeps an answer. It only grows, so a cache
// of a configuration before a reload is covered too.
func (f *Freshness) Keep(d time.Duration) {
	for f != nil {
		old := f.keep.Load()
		if int64(d) <= old || f.keep.CompareAndSwap(old, int64(d)) {
			return
		}
	}
}

// Forget records that the names changes cover changed now, and returns
// that time (zero for a nil f, which records nothing).
func (f *Freshness) Forget(changes []Change) time.Time {
	if f == nil {
		return time.Time{}
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	now := f.now()
	next := f.pruned(now)
	for _, c := range changes {
		if c.Zone == "" || len(c.Zone) > 255 || !dns.IsFqdn(c.Zone) {
			continue // no zone key: nothing cached is of it
		}
		z := next.zones[c.Zone]
		if c.All || !validLabels(c.Labels) {
			z.all = now
		} else {
			z.some = now
			for _, l := range c.Labels {
				next.names[l+"."+c.Zone] = now
			}
		}
		next.zones[c.Zone] = z
	}
	if len(changes) > 0 {
		next.newest = now
	}
	f.view.Store(next)
	return now
}

// ForgetAll records that every name may have changed now: the ring
// changed, so the owners that told this process about their zones may
// no longer be the ones that own them.
func (f *Freshness) ForgetAll() {
	if f == nil {
		return
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	now := f.now()
	// Every older record covers only answers this one covers.
	f.view.Store(&forgotten{newest: now, all: now, zones: map[string]zoneForgotten{}, names: map[string]time.Time{}})
}

// pruned is a copy of the current records without those older than keep.
func (f *Freshness) pruned(now time.Time) *forgotten {
	old := f.view.Load()
	cut := now.Add(-time.Duration(f.keep.Load()))
	next := &forgotten{newest: old.newest, all: old.all, zones: make(map[string]zoneForgotten, len(old.zones)),
		names: make(map[string]time.Time, len(old.names))}
	for k, z := range old.zones {
		if z.all.After(cut) || z.some.After(cut) {
			next.zones[k] = z
		}
	}
	for k, t := range old.names {
		if t.After(cut) {
			next.names[k] = t
		}
	}
	return next
}

// Current reports whether an answer for name (lower-case) of zoneKey,
// stored at stored, is current: no owner said since that its name
// changed.
func (f *Freshness) Current(zoneKey, name string, stored time.Time) bool {
	if f == nil {
		return true
	}
	v := f.view.Load()
	if stored.After(v.newest) {
		return true
	}
	if !stored.After(v.all) {
		return false
	}
	z, ok := v.zones[zoneKey]
	if !ok {
		return true
	}
	if !stored.After(z.all) {
		return false
	}
	label, ok := labelName(zoneKey, name)
	if !ok {
		return stored.After(z.some)
	}
	t, ok := v.names[label]
	return !ok || stored.After(t)
}

// labelName is the name of the label right under zoneKey that name is at
// or under (web.ns.svc.cluster.local. for _http._tcp.web.ns.svc.cluster.local.),
// a part of name; ok is false when no label picks name out: the zone's
// apex, a wildcard label (* or any), a name outside the zone (the
// multicluster names of a namespace's zone).
func labelName(zoneKey, name string) (string, bool) {
	n := len(name) - len(zoneKey)
	if n < 2 || name[n-1] != '.' || name[n:] != zoneKey {
		return "", false
	}
	start := strings.LastIndexByte(name[:n-1], '.') + 1
	switch label := name[start : n-1]; label {
	case "", "*", "any":
		return "", false
	}
	return name[start:], true
}

// validLabels reports whether every one of labels is a label: anything
// else from an owner outdates its whole zone.
func validLabels(labels []string) bool {
	for _, l := range labels {
		if l == "" || len(l) > 63 || strings.IndexByte(l, '.') >= 0 {
			return false
		}
	}
	return true
}

// cached is the owners' answer Cache holds for key, as Cache.Get gives
// it, unless an owner said since that it changed: then it is removed, a
// miss, never served fresh or stale.
func (c *Cluster) cached(key cache.Key, zoneKey string) (m *dns.Msg, preferred int, st cache.State) {
	h, st, _ := c.Cache.Peek(key, c.Now())
	if st == cache.Miss || !c.current(key, h, zoneKey) {
		return nil, 0, cache.Miss
	}
	return h.Copy(st), h.Entry.Preferred(), st
}

// current reports whether h, the entry of key Peek found, is current; an
// outdated one is removed.
func (c *Cluster) current(key cache.Key, h cache.Hit, zoneKey string) bool {
	if c.Fresh.Current(zoneKey, key.Name, h.Entry.Stored()) {
		return true
	}
	c.Cache.Remove(key, h.Entry)
	return false
}
