//go:build race

package template

// raceEnabled: the race detector makes sync.Pool drop what is put back
// at random, so allocation counts are not the program's own.
const raceEnabled = true
