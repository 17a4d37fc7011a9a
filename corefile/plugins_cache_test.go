package corefile

import (
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/shardns/shardns/config"
)

// The cache plugin's keepttl, servfail and zones.
func TestConvertCacheOptions(t *testing.T) {
	for _, c := range []struct {
		desc     string
		src      string
		keep     bool
		servfail time.Duration
		zones    []string
		finding  string
	}{
		{"CoreDNS's defaults", ".:53 {\n  cache 30\n}\n", false, 5 * time.Second, nil, ""},
		{"keepttl", ".:53 {\n  cache 30 {\n    keepttl\n  }\n}\n", true, 5 * time.Second, nil, ""},
		{"servfail", ".:53 {\n  cache {\n    servfail 30s\n  }\n}\n", false, 30 * time.Second, nil, ""},
		{"servfail 0 keeps none", ".:53 {\n  cache {\n    servfail 0\n  }\n}\n", false, 0, nil, ""},
		{"servfail over 5m", ".:53 {\n  cache {\n    servfail 10m\n  }\n}\n", false, 5 * time.Second, nil,
			"Corefile:3: servfail 10m: CoreDNS allows at most 5m"},
		{"zones", ".:53 {\n  cache 30 Example.org. corp\n}\n", false, 5 * time.Second, []string{"example.org", "corp"}, ""},
		{"zones without TTL", ".:53 {\n  cache example.org\n}\n", false, 5 * time.Second, []string{"example.org"}, ""},
		{"the root zone caches every name", ".:53 {\n  cache 30 . example.org\n}\n", false, 5 * time.Second, nil, ""},
		{"the block's own zones cache every name it gets", "example.org:53 {\n  cache 30 example.org\n}\n", false, 5 * time.Second, nil, ""},
		{"a zone that is not a name", ".:53 {\n  cache 30 a..b\n}\n", false, 5 * time.Second, nil,
			`Corefile:2: cache zone a..b: "a..b" is not a domain name`},
	} {
		t.Run(c.desc, func(t *testing.T) {
			res := convert(t, c.src)
			if _, err := res.YAML(); err != nil {
				t.Fatal(err)
			}
			ca := res.Config.Cache
			if ca.KeepTTL != c.keep || ca.ServfailTTL != config.Duration(c.servfail) || !reflect.DeepEqual(ca.Zones, c.zones) {
				t.Errorf("cache keepTTL %v servfailTTL %s zones %q, want %v %s %q", ca.KeepTTL, ca.ServfailTTL.D(), ca.Zones,
					c.keep, c.servfail, c.zones)
			}
			if c.finding != "" && !hasFinding(res, c.finding) {
				t.Errorf("missing finding %s\ngot:\n%s", c.finding, strings.Join(findings(res), "\n"))
			}
		})
	}
}
