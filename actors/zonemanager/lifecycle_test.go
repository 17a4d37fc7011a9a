package zonemanager

import (
	"reflect"
	"slices"
	"testing"
	"time"

	"github.com/shardns/shardns/cluster"
)

// facts is a zoneFacts of sets of keys.
type facts struct {
	owned, deferred, active, grace []string
}

func (f facts) owns(key string) bool       { return slices.Contains(f.owned, key) }
func (f facts) isDeferred(key string) bool { return slices.Contains(f.deferred, key) }
func (f facts) running(key string) bool    { return slices.Contains(f.active, key) }
func (f facts) inGrace(key string) bool    { return slices.Contains(f.grace, key) }

func TestSpawnFor(t *testing.T) {
	for _, tc := range []struct {
		name                        string
		f                           facts
		sharded, replaying, reverse bool
		want                        spawnMode
	}{
		{"owned: serves at once", facts{owned: []string{"z"}}, false, false, false, spawnVisible},
		{"not owned: lives elsewhere", facts{}, false, false, false, spawnNone},
		{"deferred to a replica still syncing: later", facts{owned: []string{"z"}, deferred: []string{"z"}}, false, false, false, spawnNone},
		{"owned while a replay loads, unsharded: serves at once", facts{owned: []string{"z"}}, false, true, false, spawnVisible},
		{"sharded, a replay listing its namespace: hidden", facts{owned: []string{"z"}}, true, true, false, spawnHidden},
		{"sharded, no replay: serves at once", facts{owned: []string{"z"}}, true, false, false, spawnVisible},
		{"sharded reverse zone during a replay: never hidden", facts{owned: []string{"z"}}, true, true, true, spawnVisible},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := spawnFor(tc.f, "z", tc.sharded, tc.replaying, tc.reverse); got != tc.want {
				t.Errorf("spawnFor = %d, want %d", got, tc.want)
			}
		})
	}
}

func TestPlanRing(t *testing.T) {
	for _, tc := range []struct {
		name                   string
		f                      facts
		gained, regained, lost []string
	}{
		{name: "kept zone: nothing moves", f: facts{owned: []string{"z"}, active: []string{"z"}}},
		{name: "owned, no actor: gained", f: facts{owned: []string{"z"}}, gained: []string{"z"}},
		{name: "owned but deferred: neither gained nor lost", f: facts{owned: []string{"z"}, deferred: []string{"z"}}},
		{name: "running, not owned: lost into its grace", f: facts{active: []string{"z"}}, lost: []string{"z"}},
		{name: "lost already, still in grace: not lost twice", f: facts{active: []string{"z"}, grace: []string{"z"}}},
		{name: "in grace, owned again: regained", f: facts{owned: []string{"z"}, active: []string{"z"}, grace: []string{"z"}},
			regained: []string{"z"}},
		{name: "neither owned nor running: nothing", f: facts{}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p := planRing(tc.f, slices.Values([]string{"z"}))
			if !slices.Equal(p.gained, tc.gained) || !slices.Equal(p.regained, tc.regained) || !slices.Equal(p.lost, tc.lost) {
				t.Errorf("plan gained %q regained %q lost %q, want %q %q %q", p.gained, p.regained, p.lost, tc.gained, tc.regained, tc.lost)
			}
		})
	}
}

// A ring change over many zones sorts each by itself.
func TestPlanRingSortsEveryZone(t *testing.T) {
	f := facts{owned: []string{"gain", "keep", "back", "wait"}, active: []string{"keep", "lose", "back", "held"},
		grace: []string{"back", "held"}, deferred: []string{"wait"}}
	p := planRing(f, slices.Values([]string{"gain", "keep", "lose", "back", "held", "wait", "gone"}))
	if !slices.Equal(p.gained, []string{"gain"}) || !slices.Equal(p.regained, []string{"back"}) || !slices.Equal(p.lost, []string{"lose"}) {
		t.Errorf("plan gained %q regained %q lost %q", p.gained, p.regained, p.lost)
	}
}

func TestReleasable(t *testing.T) {
	for _, tc := range []struct {
		name string
		f    facts
		same bool
		want bool
	}{
		{"in grace, same actor, not owned: released", facts{grace: []string{"z"}}, true, true},
		{"owned again meanwhile: kept", facts{grace: []string{"z"}, owned: []string{"z"}}, true, false},
		{"grace ended already (regained, emptied): nothing to release", facts{}, true, false},
		{"emptied and spawned again since: not this grace's actor", facts{grace: []string{"z"}}, false, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := releasable(tc.f, "z", tc.same); got != tc.want {
				t.Errorf("releasable = %v, want %v", got, tc.want)
			}
		})
	}
}

func TestEmptied(t *testing.T) {
	size := map[string]int{"full": 2, "last": 0}
	got := emptied(slices.Values([]string{"full", "last", "unknown"}), func(k string) int { return size[k] })
	if !slices.Equal(got, []string{"last", "unknown"}) {
		t.Errorf("emptied %q, want the zones with no object left", got)
	}
}

// A gain's load that outlasts half the grace warns that the grace should
// be raised: the replicas that lost the zones may stop answering first.
func TestOutlastsHalfGrace(t *testing.T) {
	for _, tc := range []struct {
		took, grace time.Duration
		want        bool
	}{
		{4 * time.Second, 10 * time.Second, false},
		{5 * time.Second, 10 * time.Second, false},
		{6 * time.Second, 10 * time.Second, true},
		{time.Hour, 0, false}, // no grace configured: nothing to raise
	} {
		if got := outlastsHalfGrace(tc.took, tc.grace); got != tc.want {
			t.Errorf("outlastsHalfGrace(%v, %v) = %v, want %v", tc.took, tc.grace, got, tc.want)
		}
	}
}

// placed is a placeFacts: every zone not served here is asked of "b",
// then of its holders.
type placed struct {
	loads
	gainingKeys []string
	holders     map[string][]string
}

func (p placed) gaining(key string) bool { return slices.Contains(p.gainingKeys, key) }
func (p placed) askFor(key string) []string {
	return cluster.QuestionOrder([]string{"a", "b"}, 0, "a", p.holders[key])
}

// Which zones the placement sends elsewhere, and which it leaves to this
// replica: those it serves, and the namespaces it owns without objects,
// whose names it denies.
func TestPlacement(t *testing.T) {
	f := placed{loads: loads{facts: facts{
		owned:    []string{"served.", "loading.", "deferred.", "empty.", "gained.", "handed-empty."},
		active:   []string{"served.", "loading.", "grace."},
		deferred: []string{"deferred."},
	}, loadingKeys: []string{"loading."}},
		gainingKeys: []string{"gained."}, holders: map[string][]string{"gained.": {"c"}}}
	for _, tc := range []struct {
		name                  string
		known, namespaceZones []string // nil namespace zones: watches not sharded
		want                  map[string][]string
	}{
		{"a zone served here is not placed; one loading, lost in its grace or another's is",
			[]string{"served.", "loading.", "grace.", "theirs."}, nil,
			map[string][]string{"loading.": {"b"}, "grace.": {"b"}, "theirs.": {"b"}}},
		{"a known zone owned here without an actor waits elsewhere: deferred",
			[]string{"deferred."}, nil, map[string][]string{"deferred.": {"b"}}},
		{"sharded: another's namespace, never seen here, is asked of its owner",
			nil, []string{"new-theirs."}, map[string][]string{"new-theirs.": {"b"}}},
		{"sharded: an owned namespace without objects is denied here, also once handed over empty",
			nil, []string{"empty.", "handed-empty.", "served."}, map[string][]string{}},
		{"sharded: a gained namespace still loading goes to its owners and holders, a deferred one elsewhere",
			nil, []string{"gained.", "deferred."}, map[string][]string{"gained.": {"b", "c"}, "deferred.": {"b"}}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var namespaceZones func(yield func(string) bool)
			if tc.namespaceZones != nil {
				namespaceZones = slices.Values(tc.namespaceZones)
			}
			if got := placement(f, slices.Values(tc.known), namespaceZones); !reflect.DeepEqual(got, tc.want) {
				t.Errorf("placement %v, want %v", got, tc.want)
			}
		})
	}
}
