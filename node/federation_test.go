package node

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"testing"
	"time"

	"github.com/shardns/shardns/query"
)

// The node's locality is read until it is known, and read again so that
// a relabelled node moves the CNAME targets; a read that fails keeps the
// last locality, and an unchanged one is not set again.
func TestLocalityWatch(t *testing.T) {
	results := []struct {
		zone, region string
		err          error
	}{
		{err: errors.New(`node "n1" has no topology labels`)},
		{zone: "Zone-A", region: "region-1"},
		{err: errors.New("apiserver unreachable")},
		{zone: "zone-a", region: "region-1"},
		{zone: "zone-b", region: "region-1"},
	}
	n := 0
	read := func(ctx context.Context, node string) (string, string, error) {
		r := results[min(n, len(results)-1)] // the watch reads one at a time
		n++
		return r.zone, r.region, r.err
	}
	set := make(chan query.Locality, 8)
	w := &localityWatch{read: read, node: "n1", failing: "failing", set: func(l query.Locality) { set <- l },
		log: slog.New(slog.NewTextHandler(io.Discard, nil)), refresh: time.Millisecond, retry: time.Millisecond}
	w.start()
	for _, want := range []query.Locality{{Zone: "zone-a", Region: "region-1"}, {Zone: "zone-b", Region: "region-1"}} {
		select {
		case got := <-set:
			if got != want {
				w.stop()
				t.Fatalf("locality %+v, want %+v", got, want)
			}
		case <-time.After(10 * time.Second):
			w.stop()
			t.Fatalf("locality %+v never set", want)
		}
	}
	w.stop()
	if len(set) != 0 {
		t.Errorf("an unchanged locality was set again: %+v", <-set)
	}
}
