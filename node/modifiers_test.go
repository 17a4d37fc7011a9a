package node

import (
	"os"
	"testing"

	"github.com/shardns/shardns/config"
)

// No modifier configured leaves the handler without any, which keeps the
// fast path; nsid without data sends the hostname, as CoreDNS does.
func TestModifiersFromConfig(t *testing.T) {
	if m := modifiers(config.Default(), "dns://test", nil); m != nil {
		t.Fatalf("defaults built modifiers %+v, want none", m)
	}
	cfg := config.Default()
	cfg.NSID.Enabled = true
	cfg.Header.Response = []config.HeaderRule{{Action: "clear", Flags: []string{"AA", "rd"}}}
	m := modifiers(cfg, "dns://test", nil)
	host, _ := os.Hostname()
	if m == nil || string(m.NSID) != host || len(m.ResponseFlags) != 2 || m.ResponseFlags[0].Flag != "aa" || m.ResponseFlags[0].Set {
		t.Fatalf("got %+v, want NSID %q and aa, rd cleared", m, host)
	}
}
