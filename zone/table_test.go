package zone

import (
	"fmt"
	"maps"
	"math/rand/v2"
	"slices"
	"testing"
)

// SetSlots installs and drops many slots at once; RemoveSlots drops only
// the slots that are still the ones given, so a zone stopping late never
// takes the slot of the zone that replaced it.
func TestTableSlotsInBatches(t *testing.T) {
	table := NewTable(nil)
	a, b, c := &Slot{}, &Slot{}, &Slot{}
	table.SetSlots(map[string]*Slot{"a.": a, "b.": b, "c.": c})
	if got := table.Keys(); !slices.Equal(got, []string{"a.", "b.", "c."}) {
		t.Fatalf("keys %v after installing three", got)
	}
	newB := &Slot{}
	table.SetSlots(map[string]*Slot{"a.": nil, "b.": newB})
	if got := table.Keys(); !slices.Equal(got, []string{"b.", "c."}) || table.SlotOf("b.") != newB {
		t.Fatalf("keys %v, b's slot replaced: %v", got, table.SlotOf("b.") == newB)
	}
	table.RemoveSlots(map[string]*Slot{"b.": b, "c.": c}) // b's old slot: b stays
	if got := table.Keys(); !slices.Equal(got, []string{"b."}) || table.SlotOf("b.") != newB {
		t.Fatalf("keys %v after removing b's old slot and c", got)
	}
	table.Retire()
	table.SetSlots(map[string]*Slot{"b.": nil})
	table.RemoveSlots(map[string]*Slot{"b.": newB})
	if table.SlotOf("b.") != newB {
		t.Fatal("a retired table dropped a slot")
	}
}

// Through any mix of batches, single changes and removals (some of slots
// already replaced), the table holds what a plain map given the same
// changes holds.
func TestTableSlotsMatchAPlainMap(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	table := NewTable(nil)
	want := map[string]*Slot{}
	key := func() string { return fmt.Sprintf("%d.10.in-addr.arpa.", rng.IntN(600)) }
	for step := range 20000 {
		switch op := rng.IntN(10); {
		case op < 5: // one zone comes or goes, as under churn
			k := key()
			if rng.IntN(2) == 0 {
				s := &Slot{}
				table.SetSlots(map[string]*Slot{k: s})
				want[k] = s
			} else {
				table.SetSlots(map[string]*Slot{k: nil})
				delete(want, k)
			}
		case op < 8: // zones stop, some late
			stopping := map[string]*Slot{}
			for range 1 + rng.IntN(3) {
				k := key()
				stopping[k] = want[k]
				if stopping[k] == nil || rng.IntN(3) == 0 {
					stopping[k] = &Slot{} // not the slot installed: must stay
				}
			}
			table.RemoveSlots(stopping)
			for k, s := range stopping {
				if want[k] == s {
					delete(want, k)
				}
			}
		case op < 9: // a batch, as a list or a handoff brings
			batch := map[string]*Slot{}
			for range rng.IntN(300) {
				k := key()
				if rng.IntN(4) == 0 {
					batch[k] = nil
				} else {
					batch[k] = &Slot{}
				}
			}
			table.SetSlots(batch)
			for k, s := range batch {
				if s == nil {
					delete(want, k)
				} else {
					want[k] = s
				}
			}
		default:
			k := key()
			if table.SlotOf(k) != want[k] {
				t.Fatalf("step %d: slot of %s differs from the one installed", step, k)
			}
		}
	}
	got := table.Keys()
	if !slices.Equal(got, slices.Sorted(maps.Keys(want))) {
		t.Fatalf("keys: %d, want %d", len(got), len(want))
	}
	for k, s := range want {
		if table.SlotOf(k) != s {
			t.Fatalf("slot of %s differs from the one installed", k)
		}
	}
}

// BenchmarkTableNewZone: a zone created and later dropped in a table of
// 3,000, as each address in a new /24 does on every replica.
func BenchmarkTableNewZone(b *testing.B) {
	table := NewTable(nil)
	batch := map[string]*Slot{}
	for i := range 3000 {
		batch[fmt.Sprintf("%d.%d.10.in-addr.arpa.", i%250, i/250)] = &Slot{}
	}
	table.SetSlots(batch)
	b.ReportAllocs()
	i := 0
	for b.Loop() {
		k := fmt.Sprintf("%d.%d.11.in-addr.arpa.", i%250, i/250%250)
		table.SetSlots(map[string]*Slot{k: {}})
		table.SetSlots(map[string]*Slot{k: nil})
		i++
	}
}

// BenchmarkTableZone: the lookup every question makes, in a table of
// 3,000 zones.
func BenchmarkTableZone(b *testing.B) {
	table := NewTable(nil)
	batch := map[string]*Slot{}
	var keys []string
	for i := range 3000 {
		k := fmt.Sprintf("%d.%d.10.in-addr.arpa.", i%250, i/250)
		batch[k] = &Slot{}
		keys = append(keys, k)
	}
	table.SetSlots(batch)
	for _, k := range keys {
		table.SlotOf(k).Store(&Snapshot{})
	}
	b.ReportAllocs()
	i := 0
	for b.Loop() {
		if table.Zone(keys[i%len(keys)]) == nil {
			b.Fatal("zone missing")
		}
		i++
	}
}
