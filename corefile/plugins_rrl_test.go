package corefile

import (
	"strings"
	"testing"
	"time"

	"github.com/shardns/shardns/config"
)

// rrl becomes dns.rrl (and its requests-per-second dns.rateLimit); the
// converted configuration loads with the same limits.
func TestConvertRRL(t *testing.T) {
	src := ". {\n  rrl . {\n    responses-per-second 10\n    nxdomains-per-second 0\n    errors-per-second 3\n" +
		"    window 5\n    slip-ratio 1\n    ipv4-prefix-length 28\n    ipv6-prefix-length 64\n" +
		"    max-table-size 5000\n    report-only\n    requests-per-second 100\n  }\n  forward . 127.0.0.1\n}\n"
	res := convert(t, src)
	cfg, err := config.Parse(mustYAML(t, res))
	if err != nil {
		t.Fatalf("the converted configuration does not load: %v\nfindings:\n%s", err, strings.Join(findings(res), "\n"))
	}
	r := cfg.DNS.RRL
	if got, want := r.Rates(), [5]int{10, 10, 0, 10, 3}; got != want {
		t.Errorf("rates %v, want %v", got, want)
	}
	if r.Window.D() != 5*time.Second || r.SlipRatio() != 1 || r.IPv4PrefixLength != 28 || r.IPv6PrefixLength != 64 ||
		r.MaxTableSize != 5000 || !r.ReportOnly || cfg.DNS.RateLimit.PerSecond != 100 {
		t.Errorf("dns.rrl %+v, rateLimit %+v", r, cfg.DNS.RateLimit)
	}
}

func TestConvertRRLBadOptions(t *testing.T) {
	res := convert(t, ". {\n  rrl example.org {\n    window 0\n    slip-ratio many\n    log\n  }\n  forward . 127.0.0.1\n}\n")
	for _, w := range []string{
		"Corefile:3: window 0: must be a number from 1 to 3600",
		"Corefile:4: slip-ratio many: must be a number from 0 to 1073741824",
		`Corefile:5: rrl option "log" has no shardns equivalent`,
		"Corefile:2: note: rrl example.org: shardns limits the answers of every zone",
	} {
		if !hasFinding(res, w) {
			t.Errorf("missing finding %s\ngot:\n%s", w, strings.Join(findings(res), "\n"))
		}
	}
}
