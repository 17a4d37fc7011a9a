//go:build race

package testutil

// RaceEnabled says the race detector is on. It makes sync.Pool drop what
// is put back at random, so a test's allocation counts are not the
// program's own then.
const RaceEnabled = true
