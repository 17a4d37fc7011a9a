//go:build !race

package query

// raceEnabled: the race detector makes sync.Pool drop what is put back
// at random, so allocation counts are not the program's own.
const raceEnabled = false
