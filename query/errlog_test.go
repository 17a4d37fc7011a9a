package query

import (
	"bytes"
	"errors"
	"log/slog"
	"regexp"
	"strings"
	"testing"
	"time"
)

// Errors that match a rule are counted and summed up once a window, at
// the rule's level; the rest are logged as they come.
func TestConsolidatedErrorLog(t *testing.T) {
	for _, showFirst := range []bool{false, true} {
		var out bytes.Buffer
		var pending []func()
		after := func(_ time.Duration, f func()) { pending = append(pending, f) }
		log := ConsolidatedErrorLog(slog.New(slog.NewTextHandler(&out, nil)), []Consolidation{{
			Window: 30 * time.Second, Pattern: regexp.MustCompile(`i/o timeout$`), Level: slog.LevelError, ShowFirst: showFirst,
		}}, after).With("component", "errors")
		for range 3 {
			log.Warn("forwarding", "name", "a.example.", "err", errors.New("read udp 10.0.0.1:53: i/o timeout"))
		}
		log.Warn("forwarding", "name", "b.example.", "err", errors.New("connection refused"))
		lines := strings.Count(out.String(), "i/o timeout")
		if want := map[bool]int{false: 0, true: 1}[showFirst]; lines != want {
			t.Errorf("showFirst %v: %d timeouts logged before the window closed, want %d:\n%s", showFirst, lines, want, out.String())
		}
		if !strings.Contains(out.String(), "connection refused") {
			t.Errorf("showFirst %v: an error no rule matches was not logged:\n%s", showFirst, out.String())
		}
		if len(pending) != 1 {
			t.Fatalf("showFirst %v: %d summaries scheduled, want one for the window", showFirst, len(pending))
		}
		pending[0]()
		if !strings.Contains(out.String(), `level=ERROR msg="3 errors like 'i/o timeout$' occurred in last 30s"`) {
			t.Errorf("showFirst %v: no summary of 3 at level error:\n%s", showFirst, out.String())
		}
		log.Warn("forwarding", "err", errors.New("read udp: i/o timeout")) // a new window opens
		if len(pending) != 2 {
			t.Fatalf("showFirst %v: the next error after a summary opened no new window", showFirst)
		}
		before := out.Len()
		pending[1]()
		// One error alone: summed up, unless it was logged as it came.
		if summed := strings.Contains(out.String()[before:], "1 errors like"); summed == showFirst {
			t.Errorf("showFirst %v: a window of one error summed up: %v", showFirst, summed)
		}
	}
}
