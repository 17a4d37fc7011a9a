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
func newStdLogger(l *slog.Logger) *log.Logger {
	return log.New(slogWriter{l}, "", 0)
}

type slogWriter struct{ l *slog.Logger }

// Write receives one formatted line per memberlist log call.
func (w slogWriter) Write(p []byte) (int, error) {
	ctx := context.Background()
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
