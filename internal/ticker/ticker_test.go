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

// WhileNeeded runs rounds from a wake until one reports nothing left,
// runs none until the next wake, and returns on stop.
func TestWhileNeeded(t *testing.T) {
	stop, wake := make(chan struct{}), make(chan struct{}, 1)
	var rounds atomic.Int64
	left := atomic.Int64{} // rounds still to report work
	roundDone := make(chan struct{}, 100)
	returned := make(chan struct{})
	go func() {
		WhileNeeded(stop, wake, time.Millisecond, func() bool {
			rounds.Add(1)
			more := left.Add(-1) > 0
			roundDone <- struct{}{}
			return more
		})
		close(returned)
	}()
	awaitRounds := func(n int) {
		t.Helper()
		for range n {
			select {
			case <-roundDone:
			case <-time.After(5 * time.Second):
				t.Fatalf("%d rounds of %d within 5s", rounds.Load(), n)
			}
		}
	}

	for _, work := range []int64{3, 1} {
		before := rounds.Load()
		left.Store(work)
		wake <- struct{}{}
		awaitRounds(int(work))
		if got := rounds.Load() - before; got != work {
			t.Fatalf("%d rounds for work of %d, want %d", got, work, work)
		}
	}
	close(stop)
	select {
	case <-returned:
	case <-time.After(5 * time.Second):
		t.Fatal("WhileNeeded did not return on stop")
	}
	if len(roundDone) != 0 {
		t.Fatalf("%d rounds ran after the last one reported nothing left", len(roundDone))
	}
}
