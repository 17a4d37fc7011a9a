package kubeclient

import (
	"errors"
	"fmt"
	"testing"
	"time"
)

// A resource not served is reported once and asked again; an API server
// that cannot be asked is retried; WaitServed returns when the resource is
// served, or when stopped.
func TestWaitServed(t *testing.T) {
	results := []error{
		errors.New("connection refused"),
		fmt.Errorf("no ServiceEntries: %w", ErrNotServed),
		fmt.Errorf("no ServiceEntries: %w", ErrNotServed),
		nil,
	}
	asked, missing, failed := 0, 0, 0
	found := WaitServed(make(chan struct{}), Waits{Retry: time.Millisecond, Recheck: time.Millisecond},
		func() error { asked++; return results[asked-1] },
		func(error) { missing++ },
		func(error, time.Duration) { failed++ })
	if !found || asked != 4 || missing != 1 || failed != 1 {
		t.Errorf("found %v after %d questions, %d missing and %d failed reports; want true after 4, 1 and 1", found, asked, missing, failed)
	}

	stop := make(chan struct{})
	close(stop)
	if WaitServed(stop, Waits{Retry: time.Hour, Recheck: time.Hour}, func() error { return ErrNotServed },
		func(error) {}, func(error, time.Duration) {}) {
		t.Error("stopped wait reported the resource served")
	}
}
