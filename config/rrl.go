package config

// RRLConfig is response rate limiting on UDP answers (dns.rrl), as BIND,
// Knot and CoreDNS's external rrl plugin define it. Off unless a rate is
// set: pods of one node share a /24 and a node-local cache asks for all
// of them from one address, so no default rate is safe for every
// cluster.
type RRLConfig struct {
	// ResponsesPerSecond is the positive answers a second for one name
	// and type per client prefix; 0: not limited.
	ResponsesPerSecond int `json:"responsesPerSecond"`
	// NodataPerSecond is the NODATA answers a second for one name and
	// type per prefix; unset: ResponsesPerSecond, 0: not limited.
	NodataPerSecond *int `json:"nodataPerSecond,omitempty"`
	// NXDomainsPerSecond is the NXDOMAIN answers a second for one zone
	// per prefix; unset: ResponsesPerSecond, 0: not limited.
	NXDomainsPerSecond *int `json:"nxdomainsPerSecond,omitempty"`
	// ReferralsPerSecond is the referrals a second for one name per
	// prefix; unset: ResponsesPerSecond, 0: not limited.
	ReferralsPerSecond *int `json:"referralsPerSecond,omitempty"`
	// ErrorsPerSecond is the error answers (SERVFAIL, REFUSED, FORMERR,
	// ...) a second per prefix, whatever the name; unset:
	// ResponsesPerSecond, 0: not limited.
	ErrorsPerSecond *int `json:"errorsPerSecond,omitempty"`
	// Window is how long a prefix that flooded stays limited once quiet
	// (the debt an account may run up); default 15s.
	Window Duration `json:"window"`
	// Slip sends every Slip-th limited answer empty with TC set, so a
	// real client retries over TCP; 0 drops them all, 1 slips them all;
	// unset: 2.
	Slip *int `json:"slip,omitempty"`
	// IPv4PrefixLength groups IPv4 clients; default 24.
	IPv4PrefixLength int `json:"ipv4PrefixLength"`
	// IPv6PrefixLength groups IPv6 clients; default 56.
	IPv6PrefixLength int `json:"ipv6PrefixLength"`
	// MaxTableSize bounds the accounts held, about 24 bytes each;
	// default 100000.
	MaxTableSize int `json:"maxTableSize"`
	// ReportOnly counts what would be limited in
	// shardns_dns_rrl_responses_total and sends it anyway.
	ReportOnly bool `json:"reportOnly"`
}

// Rates are the per-second rates of answers, NODATA, NXDOMAIN,
// referrals and errors, in that order, with the unset ones filled in.
func (r *RRLConfig) Rates() [5]int {
	or := func(p *int) int {
		if p == nil {
			return r.ResponsesPerSecond
		}
		return *p
	}
	return [5]int{r.ResponsesPerSecond, or(r.NodataPerSecond), or(r.NXDomainsPerSecond),
		or(r.ReferralsPerSecond), or(r.ErrorsPerSecond)}
}

// SlipRatio is Slip with its default.
func (r *RRLConfig) SlipRatio() int {
	if r.Slip == nil {
		return 2
	}
	return *r.Slip
}

// validateRRL fills dns.rrl's defaults and checks its bounds.
func validateRRL(bad func(key, format string, args ...any), r *RRLConfig) {
	for i, rate := range r.Rates() {
		if rate < 0 {
			bad("dns.rrl", "%s must not be negative", [...]string{"responsesPerSecond",
				"nodataPerSecond", "nxdomainsPerSecond", "referralsPerSecond", "errorsPerSecond"}[i])
		}
	}
	if r.Window == 0 {
		r.Window = Duration(15e9)
	}
	if r.Window < Duration(1e9) {
		bad("dns.rrl.window", "must be at least 1s")
	}
	if r.Slip != nil && (*r.Slip < 0 || *r.Slip > 10) {
		bad("dns.rrl.slip", "must be 0 to 10, got %d", *r.Slip)
	}
	if r.IPv4PrefixLength == 0 {
		r.IPv4PrefixLength = 24
	}
	if r.IPv6PrefixLength == 0 {
		r.IPv6PrefixLength = 56
	}
	if r.IPv4PrefixLength < 0 || r.IPv4PrefixLength > 32 {
		bad("dns.rrl.ipv4PrefixLength", "must be 1 to 32, got %d", r.IPv4PrefixLength)
	}
	if r.IPv6PrefixLength < 0 || r.IPv6PrefixLength > 128 {
		bad("dns.rrl.ipv6PrefixLength", "must be 1 to 128, got %d", r.IPv6PrefixLength)
	}
	if r.MaxTableSize == 0 {
		r.MaxTableSize = 100000
	}
	if r.MaxTableSize < 0 || r.MaxTableSize > 1<<24 {
		bad("dns.rrl.maxTableSize", "must be 1 to 16777216, got %d", r.MaxTableSize)
	}
}
