package config

import (
	"bytes"
	"encoding/json"
	"fmt"

	"github.com/shardns/shardns/template"
)

// ChainConfig is the plugin chain of one server block (servers[].chain):
// what answers the names the block's zones route to it on its listener,
// as a Corefile server block is a chain of its own in CoreDNS. Each key
// takes the place of the top-level key of the same name for this block;
// a key the chain leaves out is the top level's. The cluster's records,
// zone files, sources, sharding and process settings are shared by every
// block; a chain only chooses whether it answers from them.
//
// The single-chain configuration is the case with no chain at all: every
// listener answers through the top-level keys.
type ChainConfig struct {
	// Kubernetes, when false, takes the cluster's names (kubernetes,
	// reverse, pod, external, multicluster and mesh zones, federations)
	// out of this block: they go to its forward like any other name, as
	// in a Corefile block without the kubernetes plugin. Unset: true.
	Kubernetes *bool `json:"kubernetes"`
	// Files, when false, takes the zone files out of this block (a block
	// without the file plugin). Unset: true.
	Files *bool `json:"files"`
	// Forward is this block's forward: upstreams, policy, timeouts,
	// stubs. Keys it leaves out take their defaults, not the top level's.
	Forward *ForwardConfig `json:"forward"`
	// Cache is this block's own response cache; keys it leaves out take
	// their defaults.
	Cache *CacheConfig `json:"cache"`
	// Hosts, Rewrite, Template and ACL are as the top-level keys; an
	// empty list ([]) is none, a list left out the top level's.
	Hosts    *HostsConfig      `json:"hosts"`
	Rewrite  []RewriteRule     `json:"rewrite"`
	Template []template.Config `json:"template"`
	ACL      []ACLConfig       `json:"acl"`
	// Log is which queries and errors this block logs; log.level and
	// log.format stay the process's.
	Log         *LogConfig         `json:"log"`
	Chaos       *ChaosConfig       `json:"chaos"`
	LoadBalance *LoadBalanceConfig `json:"loadbalance"`
	BufSize     *BufSizeConfig     `json:"bufsize"`
	NSID        *NSIDConfig        `json:"nsid"`
	Header      *HeaderConfig      `json:"header"`
	DNS64       *DNS64Config       `json:"dns64"`
}

// UnmarshalJSON reads a chain whose sections start from their defaults,
// as Parse starts the whole file from Default, and rejects unknown keys.
func (ch *ChainConfig) UnmarshalJSON(b []byte) error {
	var keys map[string]json.RawMessage
	if err := json.Unmarshal(b, &keys); err != nil {
		return err
	}
	d := Default()
	p := ChainConfig{}
	for key, raw := range keys {
		var into any
		switch key {
		case "kubernetes":
			into = &p.Kubernetes
		case "files":
			into = &p.Files
		case "forward":
			p.Forward = &d.Forward
			into = p.Forward
		case "cache":
			p.Cache = &d.Cache
			into = p.Cache
		case "hosts":
			p.Hosts = &d.Hosts
			into = p.Hosts
		case "rewrite":
			into = &p.Rewrite
		case "template":
			into = &p.Template
		case "acl":
			into = &p.ACL
		case "log":
			p.Log = &d.Log
			into = p.Log
		case "chaos":
			p.Chaos = &d.Chaos
			into = p.Chaos
		case "loadbalance":
			p.LoadBalance = &d.LoadBalance
			into = p.LoadBalance
		case "bufsize":
			p.BufSize = &d.BufSize
			into = p.BufSize
		case "nsid":
			p.NSID = &d.NSID
			into = p.NSID
		case "header":
			p.Header = &d.Header
			into = p.Header
		case "dns64":
			p.DNS64 = &d.DNS64
			into = p.DNS64
		default:
			return fmt.Errorf("unknown field %q", key)
		}
		dec := json.NewDecoder(bytes.NewReader(raw))
		dec.DisallowUnknownFields()
		if err := dec.Decode(into); err != nil {
			return fmt.Errorf("%s: %w", key, err)
		}
	}
	// An explicit [] means none; JSON null or absence means inherit.
	for key, s := range map[string]*[]RewriteRule{"rewrite": &p.Rewrite} {
		if _, ok := keys[key]; ok && *s == nil {
			*s = []RewriteRule{}
		}
	}
	if _, ok := keys["template"]; ok && p.Template == nil {
		p.Template = []template.Config{}
	}
	if _, ok := keys["acl"]; ok && p.ACL == nil {
		p.ACL = []ACLConfig{}
	}
	*ch = p
	return nil
}

// AnswersCluster reports whether the block answers the cluster's names.
func (ch *ChainConfig) AnswersCluster() bool {
	return ch == nil || ch.Kubernetes == nil || *ch.Kubernetes
}

// AnswersFiles reports whether the block answers its zone files' names.
func (ch *ChainConfig) AnswersFiles() bool {
	return ch == nil || ch.Files == nil || *ch.Files
}

// ForChain is the configuration whose resolver plane answers for a block
// with chain ch: the top level's with the chain's keys in place of its
// own. Nil ch is c itself. Servers and views are the top level's alone.
func (c *Config) ForChain(ch *ChainConfig) *Config {
	if ch == nil {
		return c
	}
	out := *c
	if ch.Forward != nil {
		out.Forward = *ch.Forward
	}
	if ch.Cache != nil {
		out.Cache = *ch.Cache
	}
	if ch.Hosts != nil {
		out.Hosts = *ch.Hosts
	}
	if ch.Rewrite != nil {
		out.Rewrite = ch.Rewrite
	}
	if ch.Template != nil {
		out.Template = ch.Template
	}
	if ch.ACL != nil {
		out.ACL = ch.ACL
	}
	if ch.Log != nil {
		level, format := out.Log.Level, out.Log.Format
		out.Log = *ch.Log
		out.Log.Level, out.Log.Format = level, format
	}
	if ch.Chaos != nil {
		out.Chaos = *ch.Chaos
	}
	if ch.LoadBalance != nil {
		out.LoadBalance = *ch.LoadBalance
	}
	if ch.BufSize != nil {
		out.BufSize = *ch.BufSize
	}
	if ch.NSID != nil {
		out.NSID = *ch.NSID
	}
	if ch.Header != nil {
		out.Header = *ch.Header
	}
	if ch.DNS64 != nil {
		out.DNS64 = *ch.DNS64
	}
	out.Views = nil
	return &out
}

// validateChains checks each chain as the top-level keys are checked,
// its errors named under servers[i].chain.
func (c *Config) validateChains(bad func(key, format string, args ...any)) {
	for i := range c.Servers {
		s := &c.Servers[i]
		if s.Chain == nil {
			continue
		}
		prefix := fmt.Sprintf("servers[%d].chain.", i)
		if s.Whoami {
			bad(prefix[:len(prefix)-1], "a whoami server answers every name itself; it has no chain")
		}
		r := c.ForChain(s.Chain)
		chainBad := func(key, format string, args ...any) { bad(prefix+key, format, args...) }
		if s.Chain.Forward != nil || s.Chain.Cache != nil {
			r.validateResolver(chainBad)
			stubs := r
			if !s.Chain.AnswersCluster() { // its stubs may take cluster names: they never reach the cluster
				stubs = r.withoutCluster()
			}
			stubs.validateStubs(chainBad, "forward.stubs", r.Forward.Stubs)
		}
		if s.Chain.Hosts != nil {
			validateHosts(chainBad, "hosts", &r.Hosts)
		}
		if s.Chain.Rewrite != nil {
			validateRewrites(chainBad, "rewrite", r.Rewrite)
		}
		if s.Chain.Template != nil {
			validateTemplates(chainBad, "template", r.Template)
		}
		if s.Chain.ACL != nil {
			validateACLs(chainBad, "acl", r.ACL)
		}
		if s.Chain.Log != nil {
			validateQueryLog(chainBad, "log", &r.Log)
		}
		if s.Chain.BufSize != nil || s.Chain.NSID != nil || s.Chain.Header != nil || s.Chain.DNS64 != nil {
			r.validateModifiers(chainBad)
		}
	}
}

// withoutCluster is c answering no cluster name: for the checks of a
// chain whose block leaves the kubernetes plugin out.
func (c *Config) withoutCluster() *Config {
	out := *c
	out.Kubernetes.Zones, out.Kubernetes.ReverseZones, out.Kubernetes.Multicluster = nil, nil, nil
	out.Kubernetes.External = nil
	return &out
}
