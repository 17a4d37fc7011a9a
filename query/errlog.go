package query

import (
	"context"
	"fmt"
	"log/slog"
	"regexp"
	"sync"
	"time"
)

// Consolidation gathers the errors whose text matches Pattern into one
// line per Window, as CoreDNS's errors plugin's consolidate: under a
// storm of one failure (an upstream timing out) the log says how many,
// not each.
type Consolidation struct {
	Window    time.Duration
	Pattern   *regexp.Regexp
	Level     slog.Level
	ShowFirst bool // log the window's first match as it comes
}

// ConsolidatedErrorLog returns log with the errors that match a rule
// counted instead of logged, and a summary logged a window after a
// rule's first match. after schedules the summary (time.AfterFunc; tests
// pass their own). The error's text is its "err" attribute, else the
// message.
func ConsolidatedErrorLog(log *slog.Logger, rules []Consolidation, after func(time.Duration, func())) *slog.Logger {
	if len(rules) == 0 {
		return log
	}
	c := &consolidating{next: log.Handler(), after: after}
	for _, r := range rules {
		c.rules = append(c.rules, &consolidated{Consolidation: r})
	}
	return slog.New(c)
}

type consolidating struct {
	next  slog.Handler
	rules []*consolidated
	after func(time.Duration, func())
}

// consolidated is one rule and the errors it counts in the window open.
type consolidated struct {
	Consolidation
	mu    sync.Mutex
	count int
}

func (c *consolidating) Enabled(ctx context.Context, l slog.Level) bool {
	return c.next.Enabled(ctx, l)
}

func (c *consolidating) WithAttrs(as []slog.Attr) slog.Handler {
	return &consolidating{next: c.next.WithAttrs(as), rules: c.rules, after: c.after}
}

func (c *consolidating) WithGroup(name string) slog.Handler {
	return &consolidating{next: c.next.WithGroup(name), rules: c.rules, after: c.after}
}

func (c *consolidating) Handle(ctx context.Context, r slog.Record) error {
	text := errorText(r)
	for _, rule := range c.rules {
		if !rule.Pattern.MatchString(text) {
			continue
		}
		if rule.count1() {
			c.after(rule.Window, func() { c.summarize(rule) })
			if rule.ShowFirst {
				return c.next.Handle(ctx, r)
			}
		}
		return nil
	}
	return c.next.Handle(ctx, r)
}

// count1 counts one error; it reports whether it opened the window.
func (r *consolidated) count1() bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.count++
	return r.count == 1
}

// summarize logs how many errors the rule counted, and closes its window.
func (c *consolidating) summarize(r *consolidated) {
	r.mu.Lock()
	n := r.count
	r.count = 0
	r.mu.Unlock()
	if n == 1 && r.ShowFirst {
		return // logged as it came
	}
	msg := fmt.Sprintf("%d errors like '%s' occurred in last %s", n, r.Pattern, r.Window)
	c.next.Handle(context.Background(), slog.NewRecord(time.Now(), r.Level, msg, 0))
}

// errorText is the text a rule matches: the "err" attribute, as the
// errors plugin matches the error, else the message.
func errorText(r slog.Record) string {
	text := r.Message
	r.Attrs(func(a slog.Attr) bool {
		if a.Key == "err" || a.Key == "error" {
			text = a.Value.String()
			return false
		}
		return true
	})
	return text
}
