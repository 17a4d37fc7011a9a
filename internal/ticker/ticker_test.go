package ticker

import (
	"sync/atomic"
	"testing"
	"time"

	"github.com/asynkron/protoactor-go/actor"
)

type tick struct{}

// Ticks arrive at the interval, and stop may be called twice.
func TestEvery(t *testing.T) {
	system := actor.NewActorSystem()
	defer system.Shutdown()
	var got atomic.Int64
	seen := make(chan struct{}, 100)
	pid := system.Root.Spawn(actor.PropsFromFunc(func(ctx actor.Context) {
		if _, ok := ctx.Message().(*tick); ok {
			got.Add(1)
			seen <- struct{}{}
		}
	}))
	stop := Every(system, pid, time.Millisecond, &tick{})
	for range 3 {
		select {
		case <-seen:
		case <-time.After(5 * time.Second):
			t.Fatal("no tick within 5s")
		}
	}
	stop()
	stop() // a second stop is harmless
	if n := got.Load(); n < 3 {
		t.Fatalf("%d ticks, want at least 3", n)
	}
}
