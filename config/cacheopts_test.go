package config

import (
	"reflect"
	"strings"
	"testing"
	"time"
)

func TestParseCacheOptions(t *testing.T) {
	def, err := Parse([]byte("kubernetes: {enabled: false}\n"))
	if err != nil {
		t.Fatal(err)
	}
	if def.Cache.ServfailTTL.D() != 5*time.Second || def.Cache.KeepTTL || def.Cache.Zones != nil {
		t.Fatalf("defaults %+v, want CoreDNS's: servfail 5s, no keepttl, every zone", def.Cache)
	}
	cfg, err := Parse([]byte("kubernetes: {enabled: false}\ncache: {keepTTL: true, servfailTTL: 0s, zones: [Example.ORG, corp.]}\n"))
	if err != nil {
		t.Fatal(err)
	}
	if ca := cfg.Cache; !ca.KeepTTL || ca.ServfailTTL != 0 || !reflect.DeepEqual(ca.Zones, []string{"example.org.", "corp."}) {
		t.Fatalf("cache %+v", ca)
	}
	for _, c := range []struct{ yaml, want string }{
		{"cache: {servfailTTL: 6m}\n", "cache.servfailTTL: must be between 0s and 5m, got 6m0s"},
		{"cache: {servfailTTL: -1s}\n", "cache.servfailTTL"},
		{"cache: {zones: [\"a..b\"]}\n", `cache.zones[0]: "a..b" is not a domain name`},
		{"servers: [{listen: [\"127.0.0.1:5300\"], chain: {cache: {enabled: true, size: 10, servfailTTL: 1h}}}]\n",
			"servers[0].chain.cache.servfailTTL"},
	} {
		if _, err := Parse([]byte("kubernetes: {enabled: false}\n" + c.yaml)); err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: error %v, want %q", strings.TrimSpace(c.yaml), err, c.want)
		}
	}
}
