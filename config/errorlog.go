package config

import (
	"fmt"
	"regexp"
	"slices"
)

// ConsolidateConfig gathers the failures whose error matches Pattern:
// instead of a line each, one line says how many there were in Window
// (CoreDNS's errors { consolidate DURATION REGEXP [LEVEL] [show_first] }).
type ConsolidateConfig struct {
	// Window is how long matching errors are counted, from the first.
	Window Duration `json:"window"`
	// Pattern is a Go regular expression matched against the error's text.
	Pattern string `json:"pattern"`
	// Level of the summary line: debug, info, warn or error (default).
	Level string `json:"level"`
	// ShowFirst logs the first matching error of a window as it comes.
	ShowFirst bool `json:"showFirst"`
}

// ConsolidateLevels are the levels a summary line may be logged at.
var ConsolidateLevels = []string{"debug", "info", "warn", "error"}

// validateConsolidate checks the errors' consolidation rules under key.
func validateConsolidate(bad func(key, format string, args ...any), key string, rules []ConsolidateConfig) {
	for i, r := range rules {
		k := fmt.Sprintf("%s[%d]", key, i)
		if r.Window <= 0 {
			bad(k+".window", "must be positive")
		}
		if _, err := regexp.Compile(r.Pattern); err != nil || r.Pattern == "" {
			bad(k+".pattern", "must be a regular expression, got %q", r.Pattern)
		}
		if r.Level != "" && !slices.Contains(ConsolidateLevels, r.Level) {
			bad(k+".level", "must be debug, info, warn or error, got %q", r.Level)
		}
	}
}
