package config

import (
	"fmt"
	"net/netip"
	"strings"

	"github.com/miekg/dns"
)

// ACLConfig is one access list, as one `acl` of CoreDNS: its policies
// are tried in order for questions in its zones, and the first whose
// types and networks match the question and its source address decides.
type ACLConfig struct {
	// Zones the list applies to; empty: every name.
	Zones []string `json:"zones,omitempty"`
	// Policies, in order.
	Policies []ACLPolicy `json:"policies"`
}

// ACLPolicy is one line of an access list.
type ACLPolicy struct {
	// Action is allow (answer, and skip the lists after this one), block
	// (REFUSED), filter (NOERROR with no records) or drop (no answer).
	Action string `json:"action"`
	// Types are the question types it matches (A, AAAA, ...); empty or
	// "*": every type.
	Types []string `json:"types,omitempty"`
	// Nets are the source networks it matches, CIDRs or addresses;
	// empty or "*": every source.
	Nets []string `json:"nets,omitempty"`
}

// ACL actions.
const (
	ACLAllow  = "allow"
	ACLBlock  = "block"
	ACLFilter = "filter"
	ACLDrop   = "drop"
)

func (c *Config) validateACL(bad func(key, format string, args ...any)) {
	validateACLs(bad, "acl", c.ACL)
}

// validateACLs checks the access lists under key.
func validateACLs(bad func(key, format string, args ...any), key string, lists []ACLConfig) {
	for i, l := range lists {
		key := fmt.Sprintf("%s[%d]", key, i)
		checkZones(bad, key+".zones", l.Zones, true)
		if len(l.Policies) == 0 {
			bad(key+".policies", "is empty: an access list needs at least one policy")
		}
		for j, p := range l.Policies {
			pkey := fmt.Sprintf("%s.policies[%d]", key, j)
			switch p.Action {
			case ACLAllow, ACLBlock, ACLFilter, ACLDrop:
			default:
				bad(pkey+".action", "must be allow, block, filter or drop, got %q", p.Action)
			}
			for _, t := range p.Types {
				if _, ok := dns.StringToType[strings.ToUpper(t)]; !ok && t != "*" {
					bad(pkey+".types", "%q is not a DNS type", t)
				}
			}
			for _, n := range p.Nets {
				if _, err := ParseACLNet(n); err != nil && n != "*" {
					bad(pkey+".nets", "%v", err)
				}
			}
		}
	}
}

// ParseACLNet reads a source network of an access list: a CIDR, or an
// address standing for itself alone.
func ParseACLNet(s string) (netip.Prefix, error) {
	if strings.Contains(s, "/") {
		p, err := netip.ParsePrefix(s)
		if err != nil {
			return netip.Prefix{}, fmt.Errorf("%q is not a CIDR", s)
		}
		return p.Masked(), nil
	}
	a, err := netip.ParseAddr(s)
	if err != nil {
		return netip.Prefix{}, fmt.Errorf("%q is neither a CIDR nor an address", s)
	}
	return netip.PrefixFrom(a, a.BitLen()), nil
}
