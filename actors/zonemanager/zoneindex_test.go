package zonemanager

import (
	"fmt"
	"slices"
	"testing"

	"github.com/shardns/shardns/model"
)

// keysOf names the zones the index holds for obj.
func keysOf(x *zoneIndex, obj model.Key) []string {
	var keys []string
	for _, id := range x.zones(obj) {
		keys = append(keys, x.key(id))
	}
	return keys
}

// The index gives back each object's zones as they were set, through
// replacements, forgotten zones whose numbers are reused, and packing.
func TestZoneIndex(t *testing.T) {
	x := newZoneIndex()
	svc := model.Key{Kind: model.KindService, Namespace: "ns", Name: "web"}
	slice := model.Key{Kind: model.KindEndpointSlice, Namespace: "ns", Name: "web-1"}
	zone, rev1, rev2 := "ns.svc.cluster.local.", "0.96.10.in-addr.arpa.", "1.244.10.in-addr.arpa."

	x.set(svc, []string{zone, rev1})
	x.set(slice, []string{zone, rev2})
	if got := keysOf(&x, svc); !slices.Equal(got, []string{zone, rev1}) {
		t.Fatalf("service's zones %q", got)
	}
	if !x.same(slice, []string{zone, rev2}) || x.same(slice, []string{zone}) || x.same(slice, []string{rev2, zone}) {
		t.Fatal("same does not compare the zones in order")
	}

	// A slice read before a change is what the object had.
	before := x.zones(slice)
	x.set(slice, []string{zone})
	if got := []string{x.key(before[0]), x.key(before[1])}; !slices.Equal(got, []string{zone, rev2}) {
		t.Fatalf("zones read before the change now %q", got)
	}
	if got := keysOf(&x, slice); !slices.Equal(got, []string{zone}) {
		t.Fatalf("slice's zones after the change %q", got)
	}

	// rev2 has no object left: its number goes to the next new zone.
	x.forget(rev2)
	rev3 := "2.244.10.in-addr.arpa."
	x.set(slice, []string{zone, rev3})
	if x.zones(slice)[1] != before[1] {
		t.Error("a forgotten zone's number was not reused")
	}
	if got := keysOf(&x, slice); !slices.Equal(got, []string{zone, rev3}) {
		t.Fatalf("slice's zones %q, want the new zone under the reused number", got)
	}

	x.set(svc, nil)
	if x.holds(svc) || x.zones(svc) != nil {
		t.Fatal("an object without zones is still held")
	}
}

// Replacing the zones of many objects again and again keeps the shared
// array within twice what is used, and packing keeps every object's zones.
func TestZoneIndexPacks(t *testing.T) {
	x := newZoneIndex()
	want := map[model.Key][]string{}
	for round := range 20 {
		for i := range 500 {
			obj := model.Key{Kind: model.KindEndpointSlice, Namespace: "ns", Name: fmt.Sprint(i)}
			zones := []string{"ns.svc.cluster.local.", fmt.Sprintf("%d.%d.10.in-addr.arpa.", (i+round)%7, i%3)}
			x.set(obj, zones)
			want[obj] = zones
		}
	}
	if len(x.ids) > 2*x.used+1024 {
		t.Errorf("%d numbers held for %d in use", len(x.ids), x.used)
	}
	check := func(when string) {
		t.Helper()
		for obj, zones := range want {
			if got := keysOf(&x, obj); !slices.Equal(got, zones) {
				t.Fatalf("%s: %v has zones %q, want %q", when, obj, got, zones)
			}
		}
	}
	check("after replacements")
	x.pack()
	if len(x.ids) != x.used || x.used != 1000 {
		t.Errorf("packed into %d numbers, %d in use, want 1000", len(x.ids), x.used)
	}
	check("after packing")
}
