package membership

import (
	"context"
	"log"
	"log/slog"
	"strings"
)

// newStdLogger returns a std logger for memberlist that forwards every
// line to l at debug level. memberlist logs at [ERR] and [WARN] during
// ordinary failure detection (every probe of a dead peer), so its levels
// are kept as an attribute rather than mapped: what an operator needs
// (joins, failures, conflicts) this package logs itself.
//
// memberlist tells of gossip it refused (a key that does not decrypt it,
// another cluster's label) only in its log, so the lines that say so are
// also passed to rejected, when set, with the sender's address.
func newStdLogger(l *slog.Logger, rejected func(addr, name, reason string)) *log.Logger {
	return log.New(slogWriter{l, rejected}, "", 0)
}

type slogWriter struct {
	l        *slog.Logger
	rejected func(addr, name, reason string)
}

// refusals maps what memberlist v0.7 logs when it drops gossip to the
// reason it is counted under.
var refusals = []struct{ text, reason string }{
	{"Decrypt packet failed", "key"},
	{"could decrypt the message", "key"},
	{"remote state is not encrypted", "key"},
	{"encryption is not configured", "key"},
	{"unacceptable label", "label"},
}

// Write receives one formatted line per memberlist log call.
func (w slogWriter) Write(p []byte) (int, error) {
	ctx := context.Background()
	if w.rejected != nil {
		w.classify(string(p))
	}
	if !w.l.Enabled(ctx, slog.LevelDebug) {
		return len(p), nil
	}
	line := strings.TrimRight(string(p), "\n")
	level := ""
	if strings.HasPrefix(line, "[") {
		if end := strings.IndexByte(line, ']'); end > 0 {
			level, line = line[1:end], strings.TrimSpace(line[end+1:])
		}
	}
	line = strings.TrimPrefix(line, "memberlist: ")
	w.l.Log(ctx, slog.LevelDebug, line, "component", "memberlist", "memberlist_level", level)
	return len(p), nil
}

// classify reports a line that tells of refused gossip.
func (w slogWriter) classify(line string) {
	for _, r := range refusals {
		if !strings.Contains(line, r.text) {
			continue
		}
		_, from, ok := strings.Cut(line, "from=")
		if !ok {
			return
		}
		if i := strings.IndexAny(from, " \n"); i >= 0 {
			from = from[:i]
		}
		w.rejected(from, "", r.reason)
		return
	}
}
