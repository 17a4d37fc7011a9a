package config

import (
	"reflect"
	"strings"
	"testing"
	"time"
)

// The forward options CoreDNS's Corefiles use parse at the top level, in
// a stub domain and in a server block's own chain.
func TestParseForwardOptions(t *testing.T) {
	cfg, err := Parse([]byte(`
kubernetes: {enabled: false}
forward:
  upstreams: [10.0.0.53]
  forceTCP: true
  preferUDP: true
  maxAge: 30s
  failover: [SERVFAIL, refused]
  except: [corp.example]
  stubs:
  - {zones: [lab.example], upstreams: [10.0.0.54], preferUDP: true, next: [NXDOMAIN], except: [x.lab.example]}
servers:
- zones: [other.example]
  listen: ["127.0.0.1:1053"]
  chain: {forward: {upstreams: [10.0.0.55], forceTCP: true, stubs: [{zones: [a.other.example], upstreams: [10.0.0.56], next: [nxdomain]}]}}
`))
	if err != nil {
		t.Fatal(err)
	}
	f := cfg.Forward
	want := ForwardOptions{ForceTCP: true, PreferUDP: true, Failover: []string{"SERVFAIL", "refused"}, Except: []string{"corp.example"}}
	if !reflect.DeepEqual(f.ForwardOptions, want) || f.MaxAge.D() != 30*time.Second {
		t.Fatalf("forward options %+v, maxAge %s", f.ForwardOptions, f.MaxAge.D())
	}
	st := f.Stubs[0]
	if !st.PreferUDP || st.ForceTCP || !reflect.DeepEqual(st.Next, []string{"NXDOMAIN"}) || !reflect.DeepEqual(st.Except, []string{"x.lab.example"}) {
		t.Fatalf("stub %+v", st)
	}
	ch := cfg.Servers[0].Chain.Forward
	if !ch.ForceTCP || !reflect.DeepEqual(ch.Stubs[0].Next, []string{"nxdomain"}) {
		t.Fatalf("chain forward %+v", ch)
	}
	if rc, err := ParseRcodes(st.Next); err != nil || !reflect.DeepEqual(rc, []int{3}) {
		t.Fatalf("ParseRcodes(%q) = %v, %v", st.Next, rc, err)
	}
}

func TestParseForwardOptionsRejects(t *testing.T) {
	const k = "kubernetes: {enabled: false}\n"
	for _, c := range []struct{ name, yaml, want string }{
		{"failover NOERROR", k + "forward: {failover: [NOERROR]}\n", "forward.failover[0]: NOERROR is an answer"},
		{"failover no rcode", k + "forward: {failover: [SERVFAIL, BOGUS]}\n", `forward.failover[1]: "BOGUS" is not an rcode`},
		{"except not a domain", k + "forward: {except: [\"a b\"]}\n", `forward.except[0]: "a b" is not a domain name`},
		{"except root", k + "forward: {except: [\".\"]}\n", `forward.except[0]: "." is not a domain name`},
		{"maxAge below expire", k + "forward: {expire: 10s, maxAge: 5s}\n", "forward.maxAge: must be 0 or at least forward.expire (10s), got 5s"},
		{"maxAge negative", k + "forward: {maxAge: -1s}\n", "forward.maxAge: must not be negative"},
		{"stub next no rcode", k + "forward: {stubs: [{zones: [lab.example], upstreams: [10.0.0.54], next: [NXDOMAINS]}]}\n",
			`forward.stubs[0].next[0]: "NXDOMAINS" is not an rcode`},
		{"stub failover NOERROR", k + "forward: {stubs: [{zones: [lab.example], upstreams: [10.0.0.54], failover: [noerror]}]}\n",
			"forward.stubs[0].failover[0]: NOERROR is an answer"},
		{"next at the top level", k + "forward: {next: [NXDOMAIN]}\n", `unknown field "next"`},
		{"chain forward maxAge", k + "servers: [{zones: [other.example], listen: [\"127.0.0.1:1053\"], chain: {forward: {maxAge: 1s}}}]\n",
			"forward.maxAge: must be 0 or at least forward.expire (10s), got 1s"},
	} {
		t.Run(c.name, func(t *testing.T) {
			_, err := Parse([]byte(c.yaml))
			if err == nil || !strings.Contains(err.Error(), c.want) {
				t.Fatalf("error %v, want %q", err, c.want)
			}
		})
	}
}
