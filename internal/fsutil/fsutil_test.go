package fsutil

import (
	"os"
	"path/filepath"
	"testing"
	"time"
)

// A changed file is ready at once when it was modified an interval ago or
// more; modified since, it is ready once a check finds it as the check
// before did, and a time in the future does not count as old.
func TestSettlingReady(t *testing.T) {
	path := filepath.Join(t.TempDir(), "f")
	stat := func(content string, mtime time.Time) os.FileInfo {
		t.Helper()
		if err := os.WriteFile(path, []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
		if err := os.Chtimes(path, mtime, mtime); err != nil {
			t.Fatal(err)
		}
		st, err := os.Stat(path)
		if err != nil {
			t.Fatal(err)
		}
		return st
	}
	var s Settling
	if !s.Ready(stat("old", time.Now().Add(-time.Minute)), time.Second) {
		t.Fatal("a file modified a minute ago, checked every second, is not ready")
	}
	now := time.Now()
	if s.Ready(stat("", now), time.Second) {
		t.Fatal("a file modified just now is ready at the first check")
	}
	if s.Ready(stat("written", now.Add(time.Millisecond)), time.Second) {
		t.Fatal("a file modified since the last check is ready")
	}
	if !s.Ready(stat("written", now.Add(time.Millisecond)), time.Second) {
		t.Fatal("a file unchanged since the last check is not ready")
	}
	future := time.Now().Add(time.Hour)
	if s.Ready(stat("skewed", future), time.Second) {
		t.Fatal("a modification time in the future counts as old")
	}
	if !s.Ready(stat("skewed", future), time.Second) {
		t.Fatal("a file with a future time, unchanged since the last check, is not ready")
	}
}
