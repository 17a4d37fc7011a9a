package zonemanager

import (
	"reflect"
	"testing"
	"time"
)

// step is one message of a sequence Step is given, with the facts of the
// zones when it arrives and the effects it must return.
type step struct {
	facts facts
	msg   any
	want  []Effect
}

// The ring-change family as message sequences: what a ring change and the
// end of the grace it starts do to the zones known here.
func TestStateStep(t *testing.T) {
	grace := 15 * time.Second
	for _, tc := range []struct {
		name  string
		steps []step
	}{
		{"a change that moves nothing loads nothing", []step{
			{facts{owned: []string{"a"}, active: []string{"a"}}, ringMoved{known: []string{"a"}},
				[]Effect{CheckLoaded{}}},
		}},
		{"gained zones spawn hidden and load", []step{
			{facts{owned: []string{"a", "b"}, active: []string{"a"}}, ringMoved{known: []string{"a", "b"}},
				[]Effect{SpawnZone{Key: "b", Hidden: true}, LoadZones{Keys: []string{"b"}}, ObserveHandoff{Gained: 1}}},
		}},
		{"sharded watches: every change replays, the new watch lists what is gained", []step{
			{facts{owned: []string{"a"}, active: []string{"a"}}, ringMoved{known: []string{"a"}, sharded: true},
				[]Effect{LoadZones{}}},
		}},
		{"a deferred zone is neither gained nor lost", []step{
			{facts{owned: []string{"d"}, deferred: []string{"d"}}, ringMoved{known: []string{"d"}},
				[]Effect{CheckLoaded{}}},
		}},
		{"lost zones serve through the grace, are named, and stop when it ends", []step{
			{facts{owned: []string{"a"}, active: []string{"a", "b", "c"}}, ringMoved{known: []string{"a", "b", "c"}},
				[]Effect{Timer{After: grace, Msg: &graceEnds{zones: []string{"b", "c"}}}, CheckLoaded{},
					ObserveHandoff{Lost: 2}, ObserveGrace{Keys: []string{"b", "c"}}}},
			{facts{owned: []string{"a"}, active: []string{"a", "b", "c"}}, graceOver{zones: []string{"b", "c"}, same: map[string]bool{"b": true, "c": true}},
				[]Effect{ObserveLoading{}, StopZones{Keys: []string{"b", "c"}}, ObserveGrace{}}},
		}},
		{"a zone gained back in its grace is kept, the others released", []step{
			{facts{owned: []string{"a"}, active: []string{"a", "b"}}, ringMoved{known: []string{"a", "b"}},
				[]Effect{Timer{After: grace, Msg: &graceEnds{zones: []string{"b"}}}, CheckLoaded{},
					ObserveHandoff{Lost: 1}, ObserveGrace{Keys: []string{"b"}}}},
			{facts{owned: []string{"a", "b"}, active: []string{"a", "b"}}, ringMoved{known: []string{"a", "b"}},
				[]Effect{CheckLoaded{}, ObserveGrace{}}},
			{facts{owned: []string{"a", "b"}, active: []string{"a", "b"}}, graceOver{zones: []string{"b"}, same: map[string]bool{"b": true}},
				[]Effect{Settle{}}},
		}},
		{"a lost zone emptied and spawned again is another, left alone by the release", []step{
			{facts{owned: []string{"a"}, active: []string{"a", "b", "c"}}, ringMoved{known: []string{"a", "b", "c"}},
				[]Effect{Timer{After: grace, Msg: &graceEnds{zones: []string{"b", "c"}}}, CheckLoaded{},
					ObserveHandoff{Lost: 2}, ObserveGrace{Keys: []string{"b", "c"}}}},
			{facts{owned: []string{"a"}, active: []string{"a", "b", "c"}}, graceOver{zones: []string{"b", "c"}, same: map[string]bool{"c": true}},
				[]Effect{ObserveLoading{}, StopZones{Keys: []string{"c"}}, ObserveGrace{Keys: []string{"b"}}}},
		}},
		{"a lost zone lost again during its grace keeps the first timer", []step{
			{facts{owned: []string{"a"}, active: []string{"a", "b"}}, ringMoved{known: []string{"a", "b"}},
				[]Effect{Timer{After: grace, Msg: &graceEnds{zones: []string{"b"}}}, CheckLoaded{},
					ObserveHandoff{Lost: 1}, ObserveGrace{Keys: []string{"b"}}}},
			{facts{owned: []string{"a"}, active: []string{"a", "b"}}, ringMoved{known: []string{"a", "b"}},
				[]Effect{CheckLoaded{}}},
		}},
		{"gains and losses in one change", []step{
			{facts{owned: []string{"a", "n"}, active: []string{"a", "b"}}, ringMoved{known: []string{"a", "b", "n"}},
				[]Effect{SpawnZone{Key: "n", Hidden: true}, Timer{After: grace, Msg: &graceEnds{zones: []string{"b"}}},
					LoadZones{Keys: []string{"n"}}, ObserveHandoff{Gained: 1, Lost: 1}, ObserveGrace{Keys: []string{"b"}}}},
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s := newState(grace, nil)
			for i, st := range tc.steps {
				if got := s.Step(st.facts, st.msg); !reflect.DeepEqual(got, st.want) {
					t.Fatalf("step %d (%#v):\n got %#v\nwant %#v", i, st.msg, got, st.want)
				}
			}
		})
	}
}

// A zone that empties during its grace leaves it: the next report names
// the others only.
func TestStateEmptiedZoneLeavesGrace(t *testing.T) {
	s := newState(time.Second, nil)
	s.Step(facts{active: []string{"b", "c"}}, ringMoved{known: []string{"b", "c"}})
	s.endGrace("b")
	if got, want := s.reportGrace(), []Effect{ObserveGrace{Keys: []string{"c"}}}; !reflect.DeepEqual(got, want) {
		t.Errorf("reported %#v, want %#v", got, want)
	}
	if got := s.reportGrace(); got != nil {
		t.Errorf("reported %#v again with nothing changed", got)
	}
}

// A replay that loads zones, as message sequences: its barrier goes to
// the loading zones whose actor runs once every source has answered, and
// it is over once each of them has published.
func TestStateStepReplay(t *testing.T) {
	loading := func() replayState {
		return replayState{id: 2, waiting: map[string]bool{"kubernetes": true, "istio": true},
			keys: map[string]bool{"a.": true, "b.": true, "gone.": true}}
	}
	running := facts{active: []string{"a.", "b."}}
	for _, tc := range []struct {
		name   string
		replay replayState
		steps  []step
	}{
		{"every source, then every running loading zone", loading(), []step{
			{running, replayAsked{}, nil},
			{running, &ReplayDone{Source: "kubernetes", ID: 2}, nil},
			{running, &ReplayDone{Source: "kubernetes", ID: 2}, nil},
			{running, &ReplayDone{Source: "istio", ID: 1}, nil},
			{running, &ReplayDone{Source: "istio", ID: 2},
				[]Effect{TellZone{Key: "a.", Msg: &barrier{tag: 2}}, TellZone{Key: "b.", Msg: &barrier{tag: 2}}}},
			{running, &barrierDone{tag: 1, key: "a."}, nil},
			{running, &barrierDone{tag: 2, key: "a."}, nil},
			{running, &barrierDone{tag: 2, key: "other."}, nil},
			{running, &barrierDone{tag: 2, key: "b."}, []Effect{FinishReplay{}}},
		}},
		{"no source to ask: the barrier at once", replayState{id: 1, waiting: map[string]bool{}, keys: map[string]bool{"a.": true}}, []step{
			{running, replayAsked{}, []Effect{TellZone{Key: "a.", Msg: &barrier{tag: 1}}}},
			{running, &barrierDone{tag: 1, key: "a."}, []Effect{FinishReplay{}}},
		}},
		{"no loading zone runs: over once the sources answered", replayState{id: 1, waiting: map[string]bool{"kubernetes": true}, keys: map[string]bool{"gone.": true}}, []step{
			{running, replayAsked{}, nil},
			{running, &ReplayDone{Source: "kubernetes", ID: 1}, []Effect{FinishReplay{}}},
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s := newState(time.Second, nil)
			s.replay = tc.replay
			for i, st := range tc.steps {
				if got := s.Step(st.facts, st.msg); !reflect.DeepEqual(got, st.want) {
					t.Fatalf("step %d (%#v):\n got %#v\nwant %#v", i, st.msg, got, st.want)
				}
			}
		})
	}
}

// The way to readiness as message sequences: every source syncs, then
// every running zone answers the sync barrier; the startup timeout
// serves what is known before that, once.
func TestStateStepSync(t *testing.T) {
	var none facts
	for _, tc := range []struct {
		name    string
		sources []string
		steps   []step
	}{
		{"every source, then every zone", []string{"kubernetes", "istio"}, []step{
			{none, &Synced{Source: "kubernetes"}, nil},
			{none, &Synced{Source: "kubernetes"}, nil},
			{none, &Synced{Source: "unknown"}, nil},
			{none, &Synced{Source: "istio"}, []Effect{RebuildRestarted{}, SyncBarrier{}}},
			{none, syncZones{keys: []string{"a.", "b."}},
				[]Effect{TellZone{Key: "a.", Msg: &barrier{}}, TellZone{Key: "b.", Msg: &barrier{}}}},
			{none, &barrierDone{key: "a."}, nil},
			{none, &barrierDone{key: "b."}, []Effect{MarkSynced{}}},
			{none, &Synced{Source: "istio"}, nil},
			{none, &startupTimeout{}, nil},
		}},
		{"no zone to wait for: synced with the last source", []string{"kubernetes"}, []step{
			{none, &Synced{Source: "kubernetes"}, []Effect{RebuildRestarted{}, SyncBarrier{}}},
			{none, syncZones{}, []Effect{MarkSynced{}}},
		}},
		{"the startup timeout serves what is known, readiness still waits", []string{"kubernetes", "istio"}, []step{
			{none, &Synced{Source: "istio"}, nil},
			{none, &startupTimeout{}, []Effect{ServeUnsynced{Waiting: []string{"kubernetes"}}}},
			{none, &Synced{Source: "kubernetes"}, []Effect{RebuildRestarted{}, SyncBarrier{}}},
			{none, syncZones{keys: []string{"a."}}, []Effect{TellZone{Key: "a.", Msg: &barrier{}}}},
			{none, &barrierDone{key: "a."}, []Effect{MarkSynced{}}},
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s := newState(time.Second, tc.sources)
			for i, st := range tc.steps {
				if got := s.Step(st.facts, st.msg); !reflect.DeepEqual(got, st.want) {
					t.Fatalf("step %d (%#v):\n got %#v\nwant %#v", i, st.msg, got, st.want)
				}
			}
			if !s.sync.synced {
				t.Error("not synced at the end")
			}
		})
	}
}

// When the replicas still syncing do not announce in time, the deferred
// zones without an actor load, hidden until a replay fills them.
func TestStateStepPendingGaveUp(t *testing.T) {
	for _, tc := range []struct {
		name string
		f    facts
		msg  pendingGaveUp
		want []Effect
	}{
		{"deferred zones load", facts{owned: []string{"d1", "d2", "kept"}, deferred: []string{"d1", "d2"}, active: []string{"kept"}},
			pendingGaveUp{known: []string{"kept", "d2", "d1"}},
			[]Effect{SpawnZone{Key: "d1", Hidden: true}, SpawnZone{Key: "d2", Hidden: true}, WarnDeferredLoad{Zones: 2},
				LoadZones{Keys: []string{"d1", "d2"}}}},
		{"nothing deferred is known: loaded", facts{owned: []string{"kept"}, active: []string{"kept"}},
			pendingGaveUp{known: []string{"kept"}},
			[]Effect{WarnDeferredLoad{}, CheckLoaded{}}},
		{"sharded: the widened watches' list is replayed", facts{owned: []string{"kept"}, active: []string{"kept"}},
			pendingGaveUp{known: []string{"kept"}, sharded: true},
			[]Effect{WarnDeferredLoad{}, LoadZones{}}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s := newState(time.Second, nil)
			if got := s.Step(tc.f, tc.msg); !reflect.DeepEqual(got, tc.want) {
				t.Errorf("got %#v\nwant %#v", got, tc.want)
			}
		})
	}
}
