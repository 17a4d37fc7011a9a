package zone

import (
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
