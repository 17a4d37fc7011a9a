package zonemanager

import (
	"maps"
	"slices"
	"testing"
)

// Packed lists read as before, and growing one never writes into the
// next list of the shared array.
func TestPackedKeepsEveryList(t *testing.T) {
	index := map[string][]string{
		"a": {"svc.a", "1.0.10.in-addr.arpa."},
		"b": {"svc.b"},
		"c": {"svc.c", "2.0.10.in-addr.arpa.", "3.0.10.in-addr.arpa."},
		"d": nil,
	}
	want := map[string][]string{}
	for k, v := range index {
		want[k] = slices.Clone(v)
	}
	got := packed(index)
	if !maps.EqualFunc(got, want, slices.Equal) {
		t.Fatalf("packed = %v, want %v", got, want)
	}
	for key := range got {
		_ = append(got[key], "grown")
	}
	if !maps.EqualFunc(got, want, slices.Equal) {
		t.Fatalf("after growing each list: %v, want %v", got, want)
	}
}
