package config

// validateStreamLimits checks the bounds of what DNS over TCP, TLS and
// HTTPS clients may hold (0 takes the listeners' defaults).
func (c *Config) validateStreamLimits(bad func(key, format string, args ...any)) {
	for _, l := range []struct {
		key string
		v   int
	}{
		{"dns.maxLargeMessages", c.DNS.MaxLargeMessages},
		{"dns.httpsMaxStreams", c.DNS.HTTPSMaxStreams},
		{"dns.httpsMaxInFlight", c.DNS.HTTPSMaxInFlight},
	} {
		if l.v < 0 {
			bad(l.key, "must not be negative")
		}
	}
	if c.DNS.HTTPSBodyTimeout < 0 {
		bad("dns.httpsBodyTimeout", "must not be negative")
	}
}
