package node

import (
	"os"
	"strings"

	"github.com/shardns/shardns/config"
	"github.com/shardns/shardns/metrics"
	"github.com/shardns/shardns/query"
)

// modifiers builds the query modifiers of cfg for the listener labelled
// server; nil when none is configured, which keeps the fast path.
func modifiers(cfg *config.Config, server string, m *metrics.All) *query.Modifiers {
	mod := &query.Modifiers{}
	on := false
	if cfg.BufSize.Enabled {
		mod.BufSize, on = uint16(cfg.BufSize.Size), true
	}
	if cfg.NSID.Enabled {
		mod.NSID, on = []byte(nsidData(cfg.NSID.Data)), true
	}
	mod.QueryFlags = flagRules(cfg.Header.Query)
	mod.ResponseFlags = flagRules(cfg.Header.Response)
	on = on || len(mod.QueryFlags) > 0 || len(mod.ResponseFlags) > 0
	if d := cfg.DNS64; d.Enabled {
		mod.DNS64 = &query.DNS64{Prefix: cfg.DNS64Prefix(), TranslateAll: d.TranslateAll, AllowIPv4: d.AllowIPv4}
		if m != nil {
			mod.DNS64.Translated = m.DNS.DNS64Translated.WithLabelValues(server)
		}
		on = true
	}
	if !on {
		return nil
	}
	return mod
}

// nsidData is the configured NSID, or the hostname as CoreDNS sends by
// default ("localhost" when it has none).
func nsidData(data string) string {
	if data != "" {
		return data
	}
	host, err := os.Hostname()
	if err != nil || host == "" {
		return "localhost"
	}
	return host
}

func flagRules(rules []config.HeaderRule) []query.FlagRule {
	var out []query.FlagRule
	for _, r := range rules {
		for _, f := range r.Flags {
			out = append(out, query.FlagRule{Flag: strings.ToLower(f), Set: r.Action == "set"})
		}
	}
	return out
}
