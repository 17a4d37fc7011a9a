package config

import (
	"reflect"
	"strings"
	"testing"
)

// A chain's keys take the top level's place for its block; what it
// leaves out is the top level's; inside a section, defaults fill in.
func TestChainResolves(t *testing.T) {
	cfg, err := Parse([]byte(`
forward: {upstreams: [10.0.0.1], policy: sequential}
cache: {maxTTL: 60}
rewrite: [{field: name, match: exact, from: a.example., to: b.example.}]
servers:
- listen: ["127.0.0.1:5300"]
  zones: [example.org]
  chain:
    kubernetes: false
    cache: {maxTTL: 10}
    rewrite: []
    log: {queries: true}
`))
	if err != nil {
		t.Fatal(err)
	}
	ch := cfg.Servers[0].Chain
	if ch == nil || ch.AnswersCluster() || !ch.AnswersFiles() {
		t.Fatalf("chain %+v: want no cluster names, zone files kept", ch)
	}
	r := cfg.ForChain(ch)
	switch {
	case r.Cache.MaxTTL != 10 || r.Cache.Size != Default().Cache.Size || !r.Cache.Enabled:
		t.Errorf("cache %+v: want maxTTL 10 and the default size, enabled", r.Cache)
	case r.Forward.Policy != "sequential" || len(r.Forward.Upstreams) != 1:
		t.Errorf("forward %+v: want the top level's", r.Forward)
	case r.Rewrite == nil || len(r.Rewrite) != 0:
		t.Errorf("rewrite %+v: want none ([] in the chain)", r.Rewrite)
	case !r.Log.Queries || r.Log.Level != "info":
		t.Errorf("log %+v: want queries logged at the process's level", r.Log)
	}
	if cfg.ForChain(nil) != cfg {
		t.Error("no chain: want the top level itself")
	}
}

// A bad value in a chain is named under its server's key.
func TestChainErrorsNameTheKey(t *testing.T) {
	for _, c := range []struct{ chain, want string }{
		{`{cache: {maxTTL: -1}}`, "servers[0].chain.cache.maxTTL: must not be negative"},
		{`{forward: {policy: nearest}}`, "servers[0].chain.forward.policy: must be random"},
		{`{nope: true}`, `unknown field "nope"`},
		{`{bufsize: {size: 100}}`, "servers[0].chain.bufsize.size"},
	} {
		_, err := Parse([]byte("servers:\n- listen: [\"127.0.0.1:5300\"]\n  chain: " + c.chain + "\n"))
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("chain %s: error %v, want %q", c.chain, err, c.want)
		}
	}
}

// Every chain key but kubernetes and files is a top-level key of the
// same type, which ForChain puts in its place: a field added to one and
// not the other would silently do nothing.
func TestChainKeysAreTopLevelKeys(t *testing.T) {
	top := reflect.ValueOf(Default()).Elem()
	for key, f := range chainFields(reflect.ValueOf(&ChainConfig{}).Elem()) {
		if key == "kubernetes" || key == "files" {
			continue
		}
		target, ok := configField(top, key)
		typ := f.Type()
		if typ.Kind() == reflect.Pointer {
			typ = typ.Elem()
		}
		if !ok || target.Type() != typ {
			t.Errorf("chain key %q: no top-level key of type %s", key, typ)
		}
	}
}
