package harness

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"testing"

	"github.com/shardns/shardns/integration/kubeapi"
)

// Bin is the shardns binary Main built for the tier's tests.
var Bin string

// Main is a tier's TestMain: it builds the shardns binary into Bin, runs
// the tests, stops the apiserver they shared (kubeapi.Shared) and exits
// with their status. A test binary started again as a helper Process (an
// attacker) sets one of helperEnv and runs without building.
func Main(m *testing.M, helperEnv ...string) {
	for _, name := range helperEnv {
		if os.Getenv(name) != "" {
			os.Exit(m.Run())
		}
	}
	dir, err := os.MkdirTemp("", "shardns-it-")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	Bin = filepath.Join(dir, "shardns")
	// Built as scripts/image.sh builds what ships: a static binary. One
	// built with cgo maps libc and the dynamic loader as well, and its
	// memory (TestShardedIngest, TestShardedMemory) would not be the
	// deployed replica's.
	build := exec.Command("go", "build", "-trimpath", "-ldflags", "-s -w", "-o", Bin, "github.com/shardns/shardns/cmd/shardns")
	build.Env = append(os.Environ(), "CGO_ENABLED=0")
	build.Stdout, build.Stderr = os.Stderr, os.Stderr
	if err := build.Run(); err != nil {
		fmt.Fprintln(os.Stderr, "building shardns:", err)
		os.Exit(1)
	}
	code := m.Run()
	kubeapi.StopShared()
	os.RemoveAll(dir)
	os.Exit(code)
}
