package node

import (
	"io"
	"log/slog"
	"math"
	"os"
	"runtime/debug"
	"testing"

	"github.com/shardns/shardns/config"
)

func TestMemoryLimitFollowsConfig(t *testing.T) {
	if _, ok := os.LookupEnv("GOMEMLIMIT"); ok {
		t.Skip("GOMEMLIMIT is set: memory.limit does not apply")
	}
	previous := debug.SetMemoryLimit(-1)
	t.Cleanup(func() { debug.SetMemoryLimit(previous) })
	log := slog.New(slog.NewTextHandler(io.Discard, nil))

	applyMemoryLimit(config.MemoryConfig{Limit: "512Mi"}, log)
	if got := debug.SetMemoryLimit(-1); got != 512<<20 {
		t.Fatalf("memory.limit 512Mi: heap limit %d", got)
	}
	applyMemoryLimit(config.MemoryConfig{Limit: "none"}, log)
	if got := debug.SetMemoryLimit(-1); got != math.MaxInt64 {
		t.Fatalf("memory.limit none: heap limit %d, want none", got)
	}
}
