package zonemanager

import (
	"errors"
	"fmt"
	"maps"
	"reflect"
	"slices"
	"testing"
	"time"

	"github.com/shardns/shardns/model"
)

func TestNamespaceZoneMove(t *testing.T) {
	for _, tc := range []struct {
		was, is, settled bool
		want             zoneMove
	}{
		{false, true, false, zoneGained},
		{false, true, true, zoneGained},
		{true, false, true, zoneLostEmpty},
		{true, false, false, zoneUnmoved}, // objects may still come: not known empty
		{true, true, true, zoneUnmoved},
		{false, false, true, zoneUnmoved},
	} {
		if got := namespaceZoneMove(tc.was, tc.is, tc.settled); got != tc.want {
			t.Errorf("was %v, is %v, settled %v: move %d, want %d", tc.was, tc.is, tc.settled, got, tc.want)
		}
	}
}

// What asking the holders of a gained zone counts as
// (shardns_cluster_zones_handed_over_total's result label).
func TestPeerResult(t *testing.T) {
	for _, tc := range []struct {
		err     error
		changes int
		want    string
	}{
		{nil, 3, "loaded"},
		{nil, 0, "empty"},
		{fmt.Errorf("asking b: %w", ErrNotHeld), 0, "not_held"},
		{errors.New("connection refused"), 0, "failed"},
	} {
		if got := peerResult(tc.err, tc.changes); got != tc.want {
			t.Errorf("peerResult(%v, %d) = %q, want %q", tc.err, tc.changes, got, tc.want)
		}
	}
}

// loads is a loadFacts: facts, the zones a replay loads, and whether some
// source has yet to answer it.
type loads struct {
	facts
	loadingKeys []string
	listed      bool // every source answered the replay (or none is under way)
}

func (l loads) loading(key string) bool { return slices.Contains(l.loadingKeys, key) }
func (l loads) listing() bool           { return !l.listed }

func TestLoadingGained(t *testing.T) {
	for _, tc := range []struct {
		name string
		f    loads
		want bool
	}{
		{"owned, unknown here, the sources still listing", loads{facts: facts{owned: []string{"z"}}}, true},
		{"owned, hidden while the replay fills it", loads{facts: facts{owned: []string{"z"}, active: []string{"z"}}, loadingKeys: []string{"z"}}, true},
		{"owned and served: loaded", loads{facts: facts{owned: []string{"z"}, active: []string{"z"}}}, false},
		{"every source answered: the replay's barrier shows it", loads{facts: facts{owned: []string{"z"}}, listed: true}, false},
		{"not owned any more", loads{}, false},
		{"deferred to a replica still syncing", loads{facts: facts{owned: []string{"z"}, deferred: []string{"z"}}}, false},
	} {
		if got := loadingGained(tc.f, "z"); got != tc.want {
			t.Errorf("%s: loadingGained = %v, want %v", tc.name, got, tc.want)
		}
	}
}

// The gained zones still loading are asked of their holders once each;
// those that loaded or moved on are forgotten, and one whose holders
// failed it is not asked again.
func TestHandoffToFetch(t *testing.T) {
	h := newHandoffState()
	held := gainedZone{namespace: "n", holders: []string{"b"}, remotes: []string{"b:8090"}}
	h.from = map[string]gainedZone{"ask.": held, "failed.": {namespace: "n"}, "loaded.": held, "asked.": held}
	h.fetching["asked."] = true
	f := loads{facts: facts{owned: []string{"ask.", "failed.", "loaded.", "asked."}, active: []string{"loaded."}}}
	if got := h.toFetch(f); !reflect.DeepEqual(got, []fetchJob{{"ask.", held}}) {
		t.Fatalf("asks %+v, want ask. of b", got)
	}
	if _, ok := h.from["loaded."]; ok || !h.fetching["ask."] {
		t.Errorf("after the fetch: from %v, fetching %v", h.from, h.fetching)
	}
	if got := h.toFetch(f); len(got) != 0 {
		t.Errorf("asked again: %+v", got)
	}
}

// What the answer of the replicas asked for a gained zone does.
func TestHandoffAnswered(t *testing.T) {
	held := gainedZone{namespace: "n1", holders: []string{"b"}, remotes: []string{"b:8090"}}
	web := model.Change{Key: model.Key{Kind: model.KindService, Namespace: "n1", Name: "web"}, Object: model.Frozen("web")}
	owned := loads{facts: facts{owned: []string{"z"}}}
	for _, tc := range []struct {
		name    string
		from    map[string]gainedZone
		f       loads
		changes []model.Change
		err     error
		want    peerAnswer
		after   map[string]gainedZone // what is left to load from
		prov    []model.Key
	}{
		{name: "loaded: its objects apply, provisional until a source sends them", from: map[string]gainedZone{"z": held}, f: owned,
			changes: []model.Change{web}, want: peerAnswer{result: "loaded", namespace: "n1"},
			after: map[string]gainedZone{}, prov: []model.Key{web.Key}},
		{name: "empty: denied here, its questions no longer sent away", from: map[string]gainedZone{"z": held}, f: owned,
			want: peerAnswer{result: "empty", namespace: "n1", placementMoved: true}, after: map[string]gainedZone{}},
		{name: "none holds it: it waits for the sources, not asked again", from: map[string]gainedZone{"z": held}, f: owned,
			err: fmt.Errorf("b: %w", ErrNotHeld), want: peerAnswer{result: "not_held", namespace: "n1", placementMoved: true},
			after: map[string]gainedZone{"z": {namespace: "n1"}}},
		{name: "none answered: the same", from: map[string]gainedZone{"z": held}, f: owned,
			err: errors.New("connection refused"), want: peerAnswer{result: "failed", namespace: "n1", placementMoved: true},
			after: map[string]gainedZone{"z": {namespace: "n1"}}},
		{name: "the sources loaded it meanwhile: given up", from: map[string]gainedZone{"z": held},
			f: loads{facts: facts{owned: []string{"z"}, active: []string{"z"}}}, changes: []model.Change{web},
			want: peerAnswer{givenUp: true}, after: map[string]gainedZone{}},
		{name: "not a gained zone (any more): given up", from: map[string]gainedZone{}, f: owned, changes: []model.Change{web},
			want: peerAnswer{givenUp: true}, after: map[string]gainedZone{}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			h := newHandoffState()
			h.from, h.fetching["z"] = tc.from, true
			if got := h.answered(tc.f, "z", tc.changes, tc.err); got != tc.want {
				t.Errorf("answer %+v, want %+v", got, tc.want)
			}
			if !reflect.DeepEqual(h.from, tc.after) || h.fetching["z"] {
				t.Errorf("left to load from %+v (fetching %v), want %+v", h.from, h.fetching["z"], tc.after)
			}
			if got := slices.Collect(maps.Keys(h.provisional)); !slices.Equal(got, tc.prov) {
				t.Errorf("provisional %v, want %v", got, tc.prov)
			}
		})
	}
}

// A zone loaded from a peer shows once its actor published what the
// peer handed over, while the replay still waits for a source; after
// that the replay's own barrier shows it.
func TestHandoffShow(t *testing.T) {
	h := newHandoffState()
	h.from = map[string]gainedZone{"a.": {namespace: "n"}, "b.": {namespace: "n"}}
	f := loads{facts: facts{owned: []string{"a.", "b."}, active: []string{"a.", "b."}}, loadingKeys: []string{"a.", "b."}}
	tag, shown := h.show(f, []string{"a.", "b.", "gone."})
	if tag&peerTag == 0 || !slices.Equal(shown, []string{"a.", "b."}) || len(h.from) != 0 {
		t.Fatalf("tag %x shows %q, from %v; want a peer's tag for a. and b., no longer loaded from elsewhere", tag, shown, h.from)
	}
	if h.shown(f, tag+1, "a.") || h.shown(f, tag, "gone.") {
		t.Error("another barrier's answer, or another zone's, showed a zone")
	}
	if !h.shown(f, tag, "a.") || h.shown(f, tag, "a.") {
		t.Error("a. is not shown once, at its answer")
	}
	f.listed = true
	if h.shown(f, tag, "b.") || len(h.showing) != 0 {
		t.Errorf("b. shown by a peer's barrier once every source answered the replay; showing %v", h.showing)
	}
	if tag, shown := h.show(loads{}, []string{"a."}); tag != 0 || shown != nil {
		t.Errorf("a zone that does not run shows at %x: %q", tag, shown)
	}
}

// Handed-over objects a source sends are the source's; the others are
// deleted once a replay completed, those that still build a zone.
func TestHandoffProvisional(t *testing.T) {
	h := newHandoffState()
	key := func(name string) model.Key { return model.Key{Kind: model.KindService, Namespace: "n", Name: name} }
	for _, name := range []string{"sent", "gone", "forgotten"} {
		h.provisional[key(name)] = true
	}
	h.confirm(&Apply{Source: peerSource, Changes: []model.Change{{Key: key("gone")}}})
	h.confirm(&Apply{Source: "kubernetes", Changes: []model.Change{{Key: key("sent")}}})
	got := h.unconfirmed(func(k model.Key) bool { return k != key("forgotten") })
	if !reflect.DeepEqual(got, []model.Change{{Key: key("gone")}}) || len(h.provisional) != 0 {
		t.Errorf("deletes %v, provisional left %v; want gone deleted, nothing left", got, h.provisional)
	}
}

// How a replica answers another's ExportZone.
func TestExportOf(t *testing.T) {
	held := exportedZone{running: true, synced: true, held: true}
	for _, tc := range []struct {
		name string
		z    exportedZone
		want exportAnswer
	}{
		{"held complete: its actor answers", held, exportZone},
		{"a namespace known to have no object: empty", exportedZone{heldEmpty: true}, exportEmpty},
		{"no actor here", exportedZone{synced: true, held: true}, exportNotHeld},
		{"not synced", exportedZone{running: true, held: true}, exportNotHeld},
		{"still loading", exportedZone{running: true, synced: true, held: true, loading: true}, exportNotHeld},
		{"a reverse or file zone: every replica builds its own", exportedZone{running: true, synced: true, held: true, shared: true}, exportNotHeld},
		{"neither owned nor in its grace", exportedZone{running: true, synced: true}, exportNotHeld},
	} {
		if got := exportOf(tc.z); got != tc.want {
			t.Errorf("%s: %d, want %d", tc.name, got, tc.want)
		}
	}
}

// A replica hands a namespace without objects over as empty only when it
// knows: it owns the namespace with nothing left to list, or lost it so
// and is still in the grace period of that ring change.
func TestHeldEmpty(t *testing.T) {
	owned := emptyZone{sharded: true, synced: true, clustered: true, namespaceZone: true, known: true, ownedNow: true}
	with := func(change func(*emptyZone)) emptyZone { z := owned; change(&z); return z }
	for _, tc := range []struct {
		name string
		z    emptyZone
		want bool
	}{
		{"owned, nothing left to list", owned, true},
		{"lost so, in the grace", with(func(z *emptyZone) { z.ownedNow, z.lostInGrace = false, true }), true},
		{"lost, the grace over", with(func(z *emptyZone) { z.ownedNow = false }), false},
		{"gained, still listed", with(func(z *emptyZone) { z.loadingGained = true }), false},
		{"deferred to a replica still syncing", with(func(z *emptyZone) { z.deferred = true }), false},
		{"a namespace never heard of", with(func(z *emptyZone) { z.known = false }), false},
		{"it has a zone here: objects", with(func(z *emptyZone) { z.running = true }), false},
		{"a reverse zone", with(func(z *emptyZone) { z.namespaceZone = false }), false},
		{"not synced", with(func(z *emptyZone) { z.synced = false }), false},
		{"watches not sharded: every object is here", with(func(z *emptyZone) { z.sharded = false }), false},
		{"no ring", with(func(z *emptyZone) { z.clustered = false }), false},
	} {
		if got := heldEmpty(tc.z); got != tc.want {
			t.Errorf("%s: heldEmpty = %v, want %v", tc.name, got, tc.want)
		}
	}
}

// The gained zones that loaded are forgotten, not those being asked; a
// zone handed over empty is vouched for until its grace ends.
func TestHandoffPruneAndExpire(t *testing.T) {
	h := newHandoffState()
	h.from = map[string]gainedZone{"loaded.": {}, "asked.": {}, "loading.": {}}
	h.fetching["asked."] = true
	h.prune(loads{facts: facts{owned: []string{"loaded.", "asked.", "loading."}, active: []string{"loaded.", "asked."}}})
	if got := slices.Sorted(maps.Keys(h.from)); !slices.Equal(got, []string{"asked.", "loading."}) {
		t.Errorf("left %q", got)
	}
	if !h.gaining(loads{facts: facts{owned: []string{"loading."}}}, "loading.") || h.gaining(loads{}, "loading.") {
		t.Error("gaining does not follow the load")
	}
	now := time.Unix(1000, 0)
	h.lostEmpty = map[string]time.Time{"over.": now, "on.": now.Add(time.Second)}
	h.expire(now)
	if _, on := h.lostEmpty["on."]; !on || len(h.lostEmpty) != 1 {
		t.Errorf("lost empty %v, want on. only", h.lostEmpty)
	}
}
