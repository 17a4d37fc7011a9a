package config

import (
	"strings"
	"testing"
)

func TestMemoryLimit(t *testing.T) {
	cases := []struct {
		limit string
		bytes int64
		auto  bool
		err   string
	}{
		{limit: "auto", auto: true},
		{limit: "none"},
		{limit: "512Mi", bytes: 512 << 20},
		{limit: "2Gi", bytes: 2 << 30},
		{limit: "1G", bytes: 1e9},
		{limit: "100000000", bytes: 1e8},
		{limit: "16Mi", err: "below the smallest limit"},
		{limit: "0", err: "below the smallest limit"},
		{limit: "lots", err: `got "lots"`},
		{limit: "-1Gi", err: `got "-1Gi"`},
		{limit: "", err: `got ""`},
		{limit: "99999999999Ti", err: `got "99999999999Ti"`},
	}
	for _, c := range cases {
		t.Run(c.limit, func(t *testing.T) {
			cfg, err := Parse([]byte("kubernetes: {enabled: false}\nmemory: {limit: \"" + c.limit + "\"}\n"))
			if c.err != "" {
				if err == nil || !strings.Contains(err.Error(), "memory.limit") || !strings.Contains(err.Error(), c.err) {
					t.Fatalf("error %v, want one naming memory.limit and saying %s", err, c.err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			bytes, auto, err := cfg.Memory.LimitBytes()
			if err != nil || bytes != c.bytes || auto != c.auto {
				t.Fatalf("LimitBytes = %d %v %v, want %d %v", bytes, auto, err, c.bytes, c.auto)
			}
		})
	}
	cfg, err := Parse([]byte("kubernetes: {enabled: false}\n"))
	if err != nil || cfg.Memory.Limit != MemoryLimitAuto {
		t.Fatalf("default memory.limit = %q %v, want auto", cfg.Memory.Limit, err)
	}
}
