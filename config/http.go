package config

import (
	"fmt"
	"net/netip"
)

// validateDebug checks http.debug: every entry a CIDR or an address.
func validateDebug(bad func(key, format string, args ...any), h *HTTPConfig) {
	for i, s := range h.Debug {
		if _, err := ParseACLNet(s); err != nil {
			bad(fmt.Sprintf("http.debug[%d]", i), "%v", err)
		}
	}
}

// DebugNetworks are the networks of http.debug, whose clients may read
// /debug/ beside this host's own.
func (h HTTPConfig) DebugNetworks() []netip.Prefix {
	out := make([]netip.Prefix, 0, len(h.Debug))
	for _, s := range h.Debug {
		if p, err := ParseACLNet(s); err == nil {
			out = append(out, p)
		}
	}
	return out
}
