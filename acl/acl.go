// Package acl decides, from a question's name, type and source address,
// whether it is answered, refused, answered empty or dropped, as
// CoreDNS's acl plugin does. Lists are compiled once from the
// configuration; Check allocates nothing, so the fast path can ask it for
// every query.
package acl

import (
	"net/netip"
	"slices"
	"strings"

	"github.com/miekg/dns"

	"github.com/shardns/shardns/config"
	"github.com/shardns/shardns/zone"
)

// Action is what a list decides for a question.
type Action uint8

// Actions; None means no policy of any list matched, which answers.
const (
	None Action = iota
	Allow
	Block
	Filter
	Drop
)

func (a Action) String() string {
	return [...]string{"none", "allow", "block", "filter", "drop"}[a]
}

// Lists are the access lists of a configuration, in order.
type Lists struct {
	lists []list
}

type list struct {
	zones    []string // fully qualified, lower case; nil: every name
	policies []policy
}

type policy struct {
	action Action
	types  []uint16       // nil: every type
	nets   []netip.Prefix // nil: every source
}

// Compile builds the lists of cfg, which config validation has checked;
// nil when there are none.
func Compile(cfg []config.ACLConfig) *Lists {
	if len(cfg) == 0 {
		return nil
	}
	l := &Lists{}
	for _, c := range cfg {
		var li list
		for _, z := range c.Zones {
			if z == "." {
				li.zones = nil
				break
			}
			li.zones = append(li.zones, zone.Fqdn(z))
		}
		for _, p := range c.Policies {
			li.policies = append(li.policies, compilePolicy(p))
		}
		l.lists = append(l.lists, li)
	}
	return l
}

func compilePolicy(p config.ACLPolicy) policy {
	out := policy{action: map[string]Action{config.ACLAllow: Allow, config.ACLBlock: Block,
		config.ACLFilter: Filter, config.ACLDrop: Drop}[p.Action]}
	for _, t := range p.Types {
		if t == "*" {
			out.types = nil
			break
		}
		out.types = append(out.types, dns.StringToType[strings.ToUpper(t)])
	}
	for _, n := range p.Nets {
		if n == "*" {
			out.nets = nil
			break
		}
		prefix, _ := config.ParseACLNet(n)
		out.nets = append(out.nets, prefix)
	}
	return out
}

// Check returns what the lists decide for a question for name (lower
// case, fully qualified) of type qtype from client, and the zone of the
// list that decided (for metrics). The lists are tried in order; in each
// whose zones hold name, the first policy matching the type and the
// source decides, and Allow ends the search. None: nothing matched.
func (l *Lists) Check(name string, qtype uint16, client netip.Addr) (Action, string) {
	client = client.Unmap()
	for i := range l.lists {
		li := &l.lists[i]
		z, ok := li.match(name)
		if !ok {
			continue
		}
		if !client.IsValid() {
			return Block, z // a source that cannot be checked is refused, as CoreDNS does
		}
		switch a := li.decide(qtype, client); a {
		case None:
			continue
		default:
			return a, z
		}
	}
	return None, ""
}

// match returns the longest zone of the list that holds name, "." for a
// list of every name.
func (li *list) match(name string) (string, bool) {
	if li.zones == nil {
		return ".", true
	}
	best := ""
	for _, z := range li.zones {
		if zone.InZone(name, z) && len(z) > len(best) {
			best = z
		}
	}
	return best, best != ""
}

func (li *list) decide(qtype uint16, client netip.Addr) Action {
	for i := range li.policies {
		p := &li.policies[i]
		if p.types != nil && !slices.Contains(p.types, qtype) {
			continue
		}
		if p.nets != nil && !containsAddr(p.nets, client) {
			continue
		}
		return p.action
	}
	return None
}

func containsAddr(nets []netip.Prefix, a netip.Addr) bool {
	for _, n := range nets {
		if n.Contains(a) {
			return true
		}
	}
	return false
}
