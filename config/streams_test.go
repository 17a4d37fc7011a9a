package config

import (
	"strings"
	"testing"
	"time"
)

// The bounds of DNS over TCP, TLS and HTTPS clients have defaults, take
// the values given, and refuse negative ones by name.
func TestParseStreamLimits(t *testing.T) {
	cfg, err := Parse([]byte("kubernetes: {enabled: false}\n"))
	if err != nil {
		t.Fatal(err)
	}
	if d := cfg.DNS; d.MaxLargeMessages != 64 || d.HTTPSMaxStreams != 32 || d.HTTPSMaxInFlight != 256 ||
		d.HTTPSBodyTimeout.D() != 2*time.Second {
		t.Fatalf("defaults: %+v", d)
	}
	cfg, err = Parse([]byte("kubernetes: {enabled: false}\ndns: {maxLargeMessages: 8, httpsMaxStreams: 4, httpsMaxInFlight: 16, httpsBodyTimeout: 500ms}\n"))
	if err != nil {
		t.Fatal(err)
	}
	if d := cfg.DNS; d.MaxLargeMessages != 8 || d.HTTPSMaxStreams != 4 || d.HTTPSMaxInFlight != 16 ||
		d.HTTPSBodyTimeout.D() != 500*time.Millisecond {
		t.Fatalf("given: %+v", d)
	}
	for _, key := range []string{"maxLargeMessages: -1", "httpsMaxStreams: -1", "httpsMaxInFlight: -1", "httpsBodyTimeout: -1s"} {
		_, err := Parse([]byte("kubernetes: {enabled: false}\ndns: {" + key + "}\n"))
		name, _, _ := strings.Cut(key, ":")
		if err == nil || !strings.Contains(err.Error(), "dns."+name+": must not be negative") {
			t.Errorf("%s: %v", key, err)
		}
	}
}
