package zone

import (
	"maps"
	"sync"
	"sync/atomic"
)

// Table is the read side of every zone this node holds: the directory and
// one slot per zone key, each published whole through an atomic pointer.
// Zone actors write their slot; listeners read without locks. The slot map
// itself is copied on write, because zones come and go rarely.
type Table struct {
	dir       atomic.Pointer[Directory]
	slots     atomic.Pointer[map[string]*Slot]
	placement atomic.Pointer[map[string][]string]
	fanOut    atomic.Pointer[[]string] // nil pointer: reverse zones are whole
	mu        sync.Mutex               // serialises copy-on-write of slots
	retired   atomic.Bool
}

// Slot holds the latest snapshot of one zone.
type Slot struct {
	snap    atomic.Pointer[Snapshot]
	loading atomic.Bool // gained from another replica and not complete yet
}

// Load returns the published snapshot, or nil before the first publish.
func (s *Slot) Load() *Snapshot { return s.snap.Load() }

// SetLoading hides the zone from queries while it is being loaded.
func (s *Slot) SetLoading(b bool) { s.loading.Store(b) }

// Store publishes snap.
func (s *Slot) Store(snap *Snapshot) { s.snap.Store(snap) }

// NewTable returns a table serving dir and no zones.
func NewTable(dir *Directory) *Table {
	t := &Table{}
	t.dir.Store(dir)
	empty := map[string]*Slot{}
	t.slots.Store(&empty)
	return t
}

// Directory implements Reader.
func (t *Table) Directory() *Directory { return t.dir.Load() }

// SetDirectory publishes a new directory.
func (t *Table) SetDirectory(d *Directory) { t.dir.Store(d) }

// Zone implements Reader. A zone still loading reads as absent here, so
// queries go to a replica that has it complete.
func (t *Table) Zone(key string) *Snapshot {
	if s := (*t.slots.Load())[key]; s != nil && !s.loading.Load() {
		return s.Load()
	}
	return nil
}

// Loading implements Reader.
func (t *Table) Loading(key string) bool {
	s := (*t.slots.Load())[key]
	return s != nil && s.loading.Load()
}

// Remote implements Reader.
func (t *Table) Remote(key string) []string {
	if p := t.placement.Load(); p != nil {
		return (*p)[key]
	}
	return nil
}

// Placement returns the published placement (read-only).
func (t *Table) Placement() map[string][]string {
	if p := t.placement.Load(); p != nil {
		return *p
	}
	return nil
}

// SetPlacement publishes, for every zone not served here, the replicas
// that hold it in the order to ask them.
func (t *Table) SetPlacement(p map[string][]string) { t.placement.Store(&p) }

// FanOut implements Reader: the same members for every reverse key, since
// every replica holds a share of every reverse zone.
func (t *Table) FanOut(string) []string {
	if p := t.fanOut.Load(); p != nil {
		return *p
	}
	return nil
}

// SetFanOut publishes the members (this node excluded) to ask for a
// reverse name this node does not hold, its reverse zones being partial;
// nil says they are whole again, held by their owners. When the change
// turns a local miss from an answer into a question for others, or back
// (fan-out starts or stops, or the first other member comes or the last
// goes), the directory is published again as a copy: answers packed from
// the old directory (the query fast path keeps them while the snapshot
// and directory are the ones they were built from) must not outlive the
// meaning they had.
func (t *Table) SetFanOut(members []string) {
	var next *[]string
	if members != nil {
		next = &members
	}
	if old := t.fanOut.Swap(next); missMeaning(old) == missMeaning(next) {
		return
	}
	if d := t.dir.Load(); d != nil {
		cp := *d
		// A directory published meanwhile is new already: keep it.
		t.dir.CompareAndSwap(d, &cp)
	}
}

// missMeaning is what a local miss in a reverse zone is under a fan-out
// list: 0 an answer (zones whole), 1 an answer (partial, nobody else to
// ask), 2 a question for the members.
func missMeaning(fan *[]string) int {
	switch {
	case fan == nil:
		return 0
	case len(*fan) == 0:
		return 1
	}
	return 2
}

// NewSlot installs an empty slot for key, replacing any slot it had, and
// returns it. The zone reads as absent until its first snapshot.
func (t *Table) NewSlot(key string) *Slot {
	s := &Slot{}
	t.SetSlots(map[string]*Slot{key: s})
	return s
}

// SetSlots installs the slot of each key of slots, replacing any it had,
// and drops the slot of each key mapped to nil, in one copy of the slot
// map: zones come by the thousand in a list or a handoff (reverse zones
// most), and a copy for each cost time quadratic in their number, 0.9 s
// for 4,000 zones. A retired table keeps the slots it has.
//
// The copy is maps.Clone, which copies the map's tables as they are:
// 2.7 times faster than inserting each key anew (BenchmarkTableNewZone,
// 3,000 zones), the cost each replica pays for each reverse zone that it
// creates, every replica holding a share of every /24. Keeping changes
// apart from a base copied less often made that cost 130 times smaller,
// but then every question's lookup read two maps (12 → 24 ns, on a fast
// path of 124 ns), a worse trade for any replica that answers questions.
func (t *Table) SetSlots(slots map[string]*Slot) {
	if len(slots) == 0 {
		return
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	next := maps.Clone(*t.slots.Load())
	for k, v := range slots {
		switch {
		case v != nil:
			next[k] = v
		case !t.retired.Load():
			delete(next, k)
		}
	}
	t.slots.Store(&next)
}

// SlotOf returns the slot of key, or nil.
func (t *Table) SlotOf(key string) *Slot { return (*t.slots.Load())[key] }

// Retire freezes the table as it is: the zones of a serving core that a
// reload replaced stop, but queries that began on it still read it, and
// get the answers it held. RemoveSlot leaves it alone from then on.
func (t *Table) Retire() { t.retired.Store(true) }

// Retired reports whether Retire was called.
func (t *Table) Retired() bool { return t.retired.Load() }

// RemoveSlot drops the slot of key if it is still slot: a zone actor that
// stops late never removes the slot of the actor that replaced it. A
// retired table keeps its slots.
func (t *Table) RemoveSlot(key string, slot *Slot) {
	t.RemoveSlots(map[string]*Slot{key: slot})
}

// RemoveSlots is RemoveSlot for each key and slot of slots, in one copy of
// the slot map at most.
func (t *Table) RemoveSlots(slots map[string]*Slot) {
	if t.retired.Load() {
		return
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	old := *t.slots.Load()
	gone := 0
	for k, v := range slots {
		if old[k] == v {
			gone++
		}
	}
	if gone == 0 {
		return
	}
	var next map[string]*Slot
	if gone*4 > len(old) {
		// A clone keeps the room of what it copies: after a large
		// release (a handoff), a map made to the size that is left.
		next = make(map[string]*Slot, len(old)-gone)
		for k, v := range old {
			if slots[k] != v {
				next[k] = v
			}
		}
	} else {
		next = maps.Clone(old)
		for k, v := range slots {
			if old[k] == v {
				delete(next, k)
			}
		}
	}
	t.slots.Store(&next)
}

// Keys lists the zone keys that have a slot.
func (t *Table) Keys() []string {
	return sortedKeys(*t.slots.Load())
}
