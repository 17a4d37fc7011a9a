package kubeclient

// The wait until the API server serves a custom resource a source
// watches (Istio's ServiceEntries, the Multi-Cluster Services API's
// ServiceImports). A cluster without the CRD is not an error: the source
// counts as synced, there being nothing to wait for, and asks again now
// and then, so installing the CRD later needs no restart.

import (
	"errors"
	"time"
)

// ErrNotServed is what a find function wraps when the API server answers
// that it serves no such resource.
var ErrNotServed = errors.New("not served by the API server")

// Waits are how long WaitServed waits between questions.
type Waits struct {
	// Retry is the longest wait while the API server cannot be asked
	// (the wait starts at a second and doubles up to it).
	Retry time.Duration
	// Recheck is the wait while it serves no such resource.
	Recheck time.Duration
}

// WaitServed calls find until it returns nil, and reports true then; false
// when stop closed first. The first time find says the resource is not
// served, missing is called with its error; failed is called with every
// other error and the wait before the next try.
func WaitServed(stop <-chan struct{}, w Waits, find func() error, missing func(error), failed func(err error, retryIn time.Duration)) bool {
	delay, reported := time.Second, false
	for {
		err := find()
		switch {
		case err == nil:
			return true
		case errors.Is(err, ErrNotServed):
			if !reported {
				missing(err)
				reported = true
			}
			delay = w.Recheck
		default:
			failed(err, delay)
			delay = min(2*delay, w.Retry)
		}
		t := time.NewTimer(delay)
		select {
		case <-stop:
			t.Stop()
			return false
		case <-t.C:
		}
	}
}
