package harness

import (
	"testing"

	"github.com/shardns/shardns/internal/testutil"
)

// FreePort is a loopback port that was free for UDP and TCP a moment ago
// (testutil.FreePort).
func FreePort(t testing.TB) int {
	t.Helper()
	port, err := testutil.FreePort()
	if err != nil {
		t.Fatal(err)
	}
	return port
}

// FreeUDPPort is FreePort, named for where a UDP port is meant.
func FreeUDPPort(t testing.TB) int {
	t.Helper()
	return FreePort(t)
}
