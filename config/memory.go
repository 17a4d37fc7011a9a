package config

import (
	"fmt"
	"strconv"
	"strings"
)

// MemoryConfig is how the process manages its memory.
type MemoryConfig struct {
	// Limit is the soft limit of the Go heap (the runtime's GOMEMLIMIT):
	// near it, garbage is collected sooner rather than letting the
	// process grow. "auto" is 90% of the container's memory limit (none
	// without one); a size such as "400Mi" or "1G" sets it; "none" sets
	// none. GOMEMLIMIT in the environment wins over it.
	Limit string `json:"limit"`
}

// MemoryLimitAuto is memory.limit's default: a share of the container's
// memory limit.
const MemoryLimitAuto = "auto"

// minMemoryLimit keeps a typo such as "40Ki" from making the collector
// run without pause.
const minMemoryLimit = 32 << 20

// LimitBytes is memory.limit in bytes: 0 for none, and auto set for a
// share of the container's limit.
func (m MemoryConfig) LimitBytes() (bytes int64, auto bool, err error) {
	switch m.Limit {
	case MemoryLimitAuto:
		return 0, true, nil
	case "none":
		return 0, false, nil
	}
	bytes, err = parseSize(m.Limit)
	if err != nil {
		return 0, false, err
	}
	if bytes < minMemoryLimit {
		return 0, false, fmt.Errorf("%q is below the smallest limit, 32Mi", m.Limit)
	}
	return bytes, false, nil
}

// DefaultCacheMaxBytes is cache.maxBytes's default: 10,000 usual answers
// (a few records each) count about 3–5 MB, so the bound bites only on
// large answers; the garbage collector may let the heap grow to twice
// what is held, so a full cache costs up to 16 MiB of RSS.
const DefaultCacheMaxBytes = "8Mi"

// minCacheMaxBytes leaves each of a cache's 16 shards room for a few
// answers of the usual UDP limit (4 KiB) with their records.
const minCacheMaxBytes = 256 << 10

// Bytes is cache.maxBytes in bytes (0 when it does not parse, which
// Validate refuses).
func (c CacheConfig) Bytes() int64 {
	n, _ := parseSize(c.MaxBytes)
	return n
}

// sizeUnits are the suffixes Kubernetes quantities use for bytes.
var sizeUnits = []struct {
	suffix string
	factor int64
}{
	{"Ki", 1 << 10}, {"Mi", 1 << 20}, {"Gi", 1 << 30}, {"Ti", 1 << 40},
	{"K", 1e3}, {"k", 1e3}, {"M", 1e6}, {"G", 1e9}, {"T", 1e12},
}

// parseSize reads a byte count written as a Kubernetes quantity: a whole
// number with an optional suffix (Ki, Mi, Gi, Ti, K, M, G, T).
func parseSize(s string) (int64, error) {
	digits, factor := s, int64(1)
	for _, u := range sizeUnits {
		if d, ok := strings.CutSuffix(s, u.suffix); ok {
			digits, factor = d, u.factor
			break
		}
	}
	n, err := strconv.ParseInt(digits, 10, 64)
	if err != nil || n < 0 || n > (1<<62)/factor || digits[0] == '+' {
		return 0, fmt.Errorf("must be auto, none or a size such as 512Mi, got %q", s)
	}
	return n * factor, nil
}

func (c *Config) validateMemory(bad func(key, format string, args ...any)) {
	if _, _, err := c.Memory.LimitBytes(); err != nil {
		bad("memory.limit", "%v", err)
	}
}
