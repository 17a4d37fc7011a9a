// Package ticker sends an actor a message at a fixed interval, and runs
// rounds of work at a fixed interval only while there is work to do.
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

// WhileNeeded sleeps until wake is signalled, then calls round every
// interval until round reports that nothing is left to do, and sleeps
// again; it returns when stop is closed. It is for rechecks (upstreams or
// members marked down) that must not wake an idle process every interval
// when nothing is down. Signal wake without blocking, on a channel with a
// buffer of one.
func WhileNeeded(stop, wake <-chan struct{}, interval time.Duration, round func() (more bool)) {
	for {
		select {
		case <-stop:
			return
		case <-wake:
		}
		if !roundsUntilDone(stop, interval, round) {
			return
		}
	}
}

// roundsUntilDone calls round every interval until it reports nothing is
// left; it reports false when stop is closed first.
func roundsUntilDone(stop <-chan struct{}, interval time.Duration, round func() bool) bool {
	t := time.NewTicker(interval)
	defer t.Stop()
	for {
		select {
		case <-stop:
			return false
		case <-t.C:
		}
		if !round() {
			return true
		}
	}
}
