package config

import (
	"fmt"
	"net/netip"
	"strings"
)

// The settings here change requests and responses rather than answer
// them, as CoreDNS's bufsize, nsid, header and dns64 plugins do. Each is
// off unless configured, and any of them sends every query through the
// full query path (not the fast path of packed answers).

// BufSizeConfig caps the EDNS0 UDP buffer size of requests (CoreDNS's
// bufsize): a client that offers more is answered, and its question
// forwarded, as if it had offered Size, so UDP answers stay below common
// MTUs and are not fragmented.
type BufSizeConfig struct {
	// Enabled applies the cap.
	Enabled bool `json:"enabled"`
	// Size is the cap, 512–4096 bytes; 1232 by default (DNS flag day 2020).
	Size int `json:"size"`
}

// NSIDConfig adds an NSID option (RFC 5001) identifying this server to
// the answers of queries that ask for it (CoreDNS's nsid).
type NSIDConfig struct {
	// Enabled answers NSID requests.
	Enabled bool `json:"enabled"`
	// Data is the identifier, at most MaxNSIDLength bytes; "": the
	// hostname.
	Data string `json:"data"`
}

// MaxNSIDLength bounds nsid.data: the option rides in every answer that
// asks for it, and a long one pushes UDP answers into truncation.
const MaxNSIDLength = 255

// HeaderConfig sets or clears header flags of queries and responses
// (CoreDNS's header).
type HeaderConfig struct {
	// Query rules change each query before it is answered (and
	// forwarded): "set rd" makes the answer echo RD.
	Query []HeaderRule `json:"query"`
	// Response rules change each answer; later rules win.
	Response []HeaderRule `json:"response"`
}

// HeaderRule sets or clears flags.
type HeaderRule struct {
	// Action is set or clear.
	Action string `json:"action"`
	// Flags are aa, ra and rd, the flags CoreDNS's header changes.
	Flags []string `json:"flags"`
}

// DNS64Config synthesises AAAA records from A records (RFC 6147,
// CoreDNS's dns64) for names without AAAA records, so IPv6-only clients
// behind NAT64 reach IPv4-only hosts.
type DNS64Config struct {
	// Enabled synthesises.
	Enabled bool `json:"enabled"`
	// Prefix is the IPv6 prefix the IPv4 address is embedded in (RFC 6052:
	// /32, /40, /48, /56, /64 or /96); "": the well-known 64:ff9b::/96.
	Prefix string `json:"prefix"`
	// TranslateAll synthesises even for names that have AAAA records.
	TranslateAll bool `json:"translateAll"`
	// AllowIPv4 synthesises for clients that ask over IPv4 too; by
	// default only questions that arrive over IPv6 are.
	AllowIPv4 bool `json:"allowIPv4"`
}

// DefaultDNS64Prefix is the well-known prefix of RFC 6052.
const DefaultDNS64Prefix = "64:ff9b::/96"

// DNS64Prefix returns the prefix synthesised addresses are built in; the
// configuration has been validated.
func (c *Config) DNS64Prefix() netip.Prefix {
	p, _ := netip.ParsePrefix(c.DNS64.Prefix)
	return p.Masked()
}

func (c *Config) validateModifiers(bad func(key, format string, args ...any)) {
	if b := c.BufSize; b.Size < 512 || b.Size > 4096 {
		bad("bufsize.size", "must be between 512 and 4096, got %d", b.Size)
	}
	if n := len(c.NSID.Data); n > MaxNSIDLength {
		bad("nsid.data", "is %d bytes, at most %d are allowed", n, MaxNSIDLength)
	}
	for i, r := range c.Header.Query {
		validateHeaderRule(bad, fmt.Sprintf("header.query[%d]", i), r)
	}
	for i, r := range c.Header.Response {
		validateHeaderRule(bad, fmt.Sprintf("header.response[%d]", i), r)
	}
	if c.DNS64.Prefix == "" {
		c.DNS64.Prefix = DefaultDNS64Prefix
	}
	if err := CheckDNS64Prefix(c.DNS64.Prefix); err != nil {
		bad("dns64.prefix", "%v", err)
	}
	if c.DNS.TCPReadTimeout < 0 {
		bad("dns.tcpReadTimeout", "must not be negative")
	}
	if c.DNS.TCPWriteTimeout < 0 {
		bad("dns.tcpWriteTimeout", "must not be negative")
	}
}

func validateHeaderRule(bad func(key, format string, args ...any), key string, r HeaderRule) {
	if r.Action != "set" && r.Action != "clear" {
		bad(key+".action", "must be set or clear, got %q", r.Action)
	}
	if len(r.Flags) == 0 {
		bad(key+".flags", "needs at least one flag")
	}
	for j, f := range r.Flags {
		if !IsHeaderFlag(f) {
			bad(fmt.Sprintf("%s.flags[%d]", key, j), "must be aa, ra or rd, got %q", f)
		}
	}
}

// IsHeaderFlag reports whether f is a flag header rules change: aa, ra
// or rd, as CoreDNS's header plugin.
func IsHeaderFlag(f string) bool {
	switch strings.ToLower(f) {
	case "aa", "ra", "rd":
		return true
	}
	return false
}

// CheckDNS64Prefix checks a DNS64 prefix as CoreDNS does: an IPv6 CIDR
// of one of RFC 6052's lengths.
func CheckDNS64Prefix(s string) error {
	p, err := netip.ParsePrefix(s)
	if err != nil || !p.Addr().Is6() {
		return fmt.Errorf("%q is not an IPv6 prefix such as %s", s, DefaultDNS64Prefix)
	}
	switch p.Bits() {
	case 32, 40, 48, 56, 64, 96:
		return nil
	}
	return fmt.Errorf("%s: the length must be 32, 40, 48, 56, 64 or 96 (RFC 6052), got %d", s, p.Bits())
}
