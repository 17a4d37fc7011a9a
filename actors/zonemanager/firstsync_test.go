package zonemanager

import "testing"

// The way to readiness, step by step: the last source to sync sends the
// zones a barrier, and the node is synced once every zone answered it.
func TestFirstSync(t *testing.T) {
	s := newFirstSync([]string{"kubernetes", "istio"})
	if s.serving() {
		t.Fatal("serving before any source synced")
	}
	if s.sourceSynced("kubernetes") {
		t.Fatal("the first of two sources counted as the last")
	}
	if s.sourceSynced("kubernetes") || s.sourceSynced("manifest") {
		t.Fatal("a source syncing again, or one not waited for, counted as the last")
	}
	if !s.sourceSynced("istio") {
		t.Fatal("the last source not counted as the last")
	}
	if s.barriersSent(2) {
		t.Fatal("synced with two zones yet to answer the barrier")
	}
	if s.barrierDone() {
		t.Fatal("synced with a zone yet to answer the barrier")
	}
	if !s.barrierDone() {
		t.Fatal("not synced once every zone answered the barrier")
	}
}

func TestFirstSyncWithoutZones(t *testing.T) {
	s := newFirstSync([]string{"kubernetes"})
	if !s.sourceSynced("kubernetes") || !s.barriersSent(0) {
		t.Fatal("with no zone to wait for, the last source's sync is the node's")
	}
}

// After the startup timeout what is known is served, though readiness
// still waits; once synced, the timeout changes nothing.
func TestFirstSyncTimeout(t *testing.T) {
	s := newFirstSync([]string{"kubernetes"})
	if !s.timeout() || !s.serving() {
		t.Fatal("the startup timeout does not make the node serve what it knows")
	}
	if s.synced {
		t.Fatal("the startup timeout made the node synced")
	}
	done := newFirstSync(nil)
	done.synced = true
	if done.timeout() {
		t.Fatal("a timeout after the sync changed what is served")
	}
}
