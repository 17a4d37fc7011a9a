package config

import (
	"bytes"
	"encoding/json"
	"fmt"
	"reflect"
	"strings"
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
	Hosts    *HostsConfig  `json:"hosts"`
	Rewrite  []RewriteRule `json:"rewrite"`
	Template []Template    `json:"template"`
	ACL      []ACLConfig   `json:"acl"`
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
// A list given, even empty or null, is the chain's; one left out is nil.
func (ch *ChainConfig) UnmarshalJSON(b []byte) error {
	var keys map[string]json.RawMessage
	if err := json.Unmarshal(b, &keys); err != nil {
		return err
	}
	defaults := reflect.ValueOf(Default()).Elem()
	p := ChainConfig{}
	fields := chainFields(reflect.ValueOf(&p).Elem())
	for key, raw := range keys {
		f, ok := fields[key]
		if !ok {
			return fmt.Errorf("unknown field %q", key)
		}
		if def, ok := configField(defaults, key); ok && f.Kind() == reflect.Pointer && f.Type().Elem().Kind() == reflect.Struct {
			v := reflect.New(def.Type()) // the section's defaults, the chain's own copy
			v.Elem().Set(def)
			f.Set(v)
		}
		into := f.Addr().Interface()
		if f.Kind() == reflect.Pointer && !f.IsNil() {
			into = f.Interface()
		}
		dec := json.NewDecoder(bytes.NewReader(raw))
		dec.DisallowUnknownFields()
		if err := dec.Decode(into); err != nil {
			return fmt.Errorf("%s: %w", key, err)
		}
		if f.Kind() == reflect.Slice && f.IsNil() {
			f.Set(reflect.MakeSlice(f.Type(), 0, 0)) // given: none, not the top level's
		}
	}
	*ch = p
	return nil
}

// chainFields are the fields of a ChainConfig value by their JSON key.
func chainFields(v reflect.Value) map[string]reflect.Value {
	out := map[string]reflect.Value{}
	for i := range v.NumField() {
		out[jsonKey(v.Type().Field(i))] = v.Field(i)
	}
	return out
}

// configField is the field of a Config value with the JSON key key.
func configField(c reflect.Value, key string) (reflect.Value, bool) {
	for i := range c.NumField() {
		if jsonKey(c.Type().Field(i)) == key {
			return c.Field(i), true
		}
	}
	return reflect.Value{}, false
}

func jsonKey(f reflect.StructField) string {
	name, _, _ := strings.Cut(f.Tag.Get("json"), ",")
	return name
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
// own. Nil ch is c itself. Servers and views are the top level's alone,
// and so are log.level and log.format.
func (c *Config) ForChain(ch *ChainConfig) *Config {
	if ch == nil {
		return c
	}
	out := *c
	o := reflect.ValueOf(&out).Elem()
	for key, f := range chainFields(reflect.ValueOf(ch).Elem()) {
		target, ok := configField(o, key)
		if !ok || f.IsNil() { // nil: the top level's
			continue
		}
		if f.Kind() == reflect.Pointer {
			f = f.Elem()
		}
		if f.Type() == target.Type() { // kubernetes and files only choose
			target.Set(f)
		}
	}
	out.Log.Level, out.Log.Format = c.Log.Level, c.Log.Format
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
