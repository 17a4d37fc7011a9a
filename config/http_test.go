package config

import (
	"net/netip"
	"slices"
	"strings"
	"testing"
)

// http.debug takes CIDRs and addresses; anything else names its entry.
func TestHTTPDebug(t *testing.T) {
	c, err := Parse([]byte(`http: {debug: ["10.244.0.0/16", "192.0.2.7", "::/0"]}`))
	if err != nil {
		t.Fatal(err)
	}
	want := []netip.Prefix{netip.MustParsePrefix("10.244.0.0/16"), netip.MustParsePrefix("192.0.2.7/32"), netip.MustParsePrefix("::/0")}
	if got := c.HTTP.DebugNetworks(); !slices.Equal(got, want) {
		t.Errorf("http.debug networks %v, want %v", got, want)
	}
	if got := Default().HTTP.DebugNetworks(); len(got) != 0 {
		t.Errorf("default http.debug %v, want none (this host only)", got)
	}
	_, err = Parse([]byte(`http: {debug: ["10.244.0.0/16", "everywhere"]}`))
	if err == nil || !strings.Contains(err.Error(), "http.debug[1]") {
		t.Errorf("http.debug with a name: %v, want an error naming http.debug[1]", err)
	}
}
