// Package ticker sends an actor a message at a fixed interval.
//
// protoactor-go's scheduler.SendRepeatedly reads its timer state without
// synchronisation (a data race when a tick meets its cancel, as on every
// reload), and sends through the actor's own context from a timer
// goroutine. This sends through the system's root context from a goroutine
// of its own, and stops cleanly.
package ticker

import (
	"sync"
	"time"

	"github.com/asynkron/protoactor-go/actor"
)

// Every sends msg to pid every interval until the returned stop is called.
// stop may be called more than once.
func Every(system *actor.ActorSystem, pid *actor.PID, interval time.Duration, msg any) (stop func()) {
	done := make(chan struct{})
	t := time.NewTicker(interval)
	go func() {
		defer t.Stop()
		for {
			select {
			case <-done:
				return
			case <-t.C:
				system.Root.Send(pid, msg)
			}
		}
	}()
	var once sync.Once
	return func() { once.Do(func() { close(done) }) }
}
