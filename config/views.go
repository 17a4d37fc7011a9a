package config

import (
	"bytes"
	"encoding/json"
	"fmt"

	"github.com/shardns/shardns/expression"
)

// ViewConfig is a resolver plane for the queries its expressions hold
// for (CoreDNS's view plugin: a server block tried before the blocks of
// the same zone and port below it). Views are tried in order; a query
// no view holds for is answered by the top-level keys. A view has its
// own hosts, rewrite rules, templates, access lists and upstreams, and
// only those: what it leaves out, it does not have (no upstreams: names
// outside the zones get REFUSED). It shares the cluster zones, zone
// files, cache settings and everything else with the top level.
type ViewConfig struct {
	// Name labels the view in logs.
	Name string `json:"name"`
	// Expr are expr-lang expressions over the query (CoreDNS's
	// functions: name(), type(), client_ip(), incidr(), ...); all must be
	// true.
	Expr []string `json:"expr"`
	// Hosts, Rewrite, Template and ACL are as the top-level keys.
	Hosts    HostsConfig   `json:"hosts"`
	Rewrite  []RewriteRule `json:"rewrite"`
	Template []Template    `json:"template"`
	ACL      []ACLConfig   `json:"acl"`
	// Forward is the view's upstreams; timeouts and health checks are
	// the top-level forward's.
	Forward ViewForwardConfig `json:"forward"`
}

// ViewForwardConfig is the upstreams of a view, as in forward.
type ViewForwardConfig struct {
	Upstreams []string          `json:"upstreams"`
	Policy    string            `json:"policy"` // empty: forward.policy
	TLS       UpstreamTLSConfig `json:"tls"`
	Stubs     []StubConfig      `json:"stubs"`
}

// UnmarshalJSON starts a view from the defaults of its keys, as Parse
// starts the whole file from Default, and rejects unknown keys.
func (v *ViewConfig) UnmarshalJSON(b []byte) error {
	type plain ViewConfig
	p := plain{Hosts: Default().Hosts}
	d := json.NewDecoder(bytes.NewReader(b))
	d.DisallowUnknownFields()
	if err := d.Decode(&p); err != nil {
		return err
	}
	*v = ViewConfig(p)
	return nil
}

// Resolved is the configuration whose plane the view's keys make: the
// top level's with the view's plane keys in place of its own.
func (c *Config) Resolved(v ViewConfig) *Config {
	out := *c
	out.Hosts, out.Rewrite, out.Template, out.ACL = v.Hosts, v.Rewrite, v.Template, v.ACL
	out.Forward.Upstreams, out.Forward.TLS, out.Forward.Stubs = v.Forward.Upstreams, v.Forward.TLS, v.Forward.Stubs
	if v.Forward.Policy != "" {
		out.Forward.Policy = v.Forward.Policy
	}
	out.Views = nil
	return &out
}

func (c *Config) validateViews(bad func(key, format string, args ...any)) {
	names := map[string]bool{}
	for i := range c.Views {
		v := &c.Views[i]
		key := fmt.Sprintf("views[%d]", i)
		if v.Name == "" {
			bad(key+".name", "is empty")
		} else if names[v.Name] {
			bad(key+".name", "%q names an earlier view too", v.Name)
		}
		names[v.Name] = true
		if len(v.Expr) == 0 {
			bad(key+".expr", "needs at least one expression")
		}
		for j, e := range v.Expr {
			if _, err := expression.Compile(e); err != nil {
				bad(fmt.Sprintf("%s.expr[%d]", key, j), "%v", err)
			}
		}
		validateHosts(bad, key+".hosts", &v.Hosts)
		validateRewrites(bad, key+".rewrite", v.Rewrite)
		validateTemplates(bad, key+".template", v.Template)
		validateACLs(bad, key+".acl", v.ACL)
		switch v.Forward.Policy {
		case "", "random", "round_robin", "sequential":
		default:
			bad(key+".forward.policy", "must be random, round_robin or sequential, got %q", v.Forward.Policy)
		}
		checkUpstreams(bad, key+".forward.upstreams", v.Forward.Upstreams)
		checkUpstreamTLS(bad, key+".forward.tls", v.Forward.TLS)
		c.validateStubs(bad, key+".forward.stubs", v.Forward.Stubs)
	}
}
