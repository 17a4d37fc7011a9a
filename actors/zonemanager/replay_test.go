package zonemanager

import "testing"

// A replay that loads zones ends once every source answered it and every
// loading zone published what they sent.
func TestReplaySteps(t *testing.T) {
	r := replayState{id: 2, waiting: map[string]bool{"kubernetes": true, "istio": true},
		keys: map[string]bool{"a.": true, "b.": true}, gaining: true}
	if r.sourceDone(1, "kubernetes") {
		t.Fatal("an older replay's answer counted")
	}
	if r.sourceDone(2, "kubernetes") || r.sourceDone(2, "kubernetes") {
		t.Fatal("one source of two, or its answer twice, ended the sources' part")
	}
	if !r.sourceDone(2, "istio") {
		t.Fatal("the last source's answer did not end the sources' part")
	}
	if r.barriersSent(2) {
		t.Fatal("over with two zones yet to publish")
	}
	if r.barrierDone(1, "a.") || r.barrierDone(2, "other.") {
		t.Fatal("an older replay's barrier, or a zone not loading, counted")
	}
	if r.barrierDone(2, "a.") {
		t.Fatal("over with a zone yet to publish")
	}
	if !r.barrierDone(2, "b.") {
		t.Fatal("not over once every loading zone published")
	}
	if !r.gained() {
		t.Fatal("a ring change's gained zones loaded, and no load time to report")
	}
}

func TestReplayWithoutZones(t *testing.T) {
	r := replayState{id: 1, waiting: map[string]bool{"kubernetes": true}, gaining: true, keys: map[string]bool{}}
	if !r.sourceDone(1, "kubernetes") || !r.barriersSent(0) {
		t.Fatal("a replay with no zone to load is not over once its source answered")
	}
	if r.gained() {
		t.Fatal("a replay that loaded no zone reports a gain's load time")
	}
}
