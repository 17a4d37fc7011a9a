package node

import (
	"log/slog"
	"regexp"

	"github.com/shardns/shardns/config"
	"github.com/shardns/shardns/query"
)

// consolidations are the errors log's consolidation rules of a
// configuration (log.errorsConsolidate), validated when it was read.
func consolidations(rules []config.ConsolidateConfig) []query.Consolidation {
	var out []query.Consolidation
	for _, r := range rules {
		re, err := regexp.Compile(r.Pattern)
		if err != nil {
			continue // refused by validation
		}
		level := slog.LevelError
		if r.Level != "" {
			level.UnmarshalText([]byte(r.Level))
		}
		out = append(out, query.Consolidation{Window: r.Window.D(), Pattern: re, Level: level, ShowFirst: r.ShowFirst})
	}
	return out
}
