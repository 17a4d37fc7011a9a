package harness

import (
	"os"
	"path/filepath"
	"testing"
)

// Root is the checkout's top folder (the one holding shardns's go.mod),
// found from the working directory: a test runs in its package's folder,
// at whatever depth below integration/ its tier lives.
func Root(t testing.TB) string {
	t.Helper()
	dir, err := os.Getwd()
	if err != nil {
		t.Fatal(err)
	}
	for d := dir; ; d = filepath.Dir(d) {
		if _, err := os.Stat(filepath.Join(d, "cmd", "shardns")); err == nil {
			return d
		}
		if filepath.Dir(d) == d {
			t.Fatalf("no shardns checkout above %s", dir)
		}
	}
}
