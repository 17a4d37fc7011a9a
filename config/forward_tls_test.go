package config

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// DNS over TLS upstreams: forward.tls and each stub's tls, the pool's
// keys, their defaults, and files read from the configuration's folder.
func TestParseForwardTLS(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "shardns.yaml")
	yaml := `
kubernetes: {enabled: false}
forward:
  upstreams: ["tls://1.1.1.1", "tls://1.0.0.1", 10.0.0.53]
  tls: {serverName: cloudflare-dns.com, caFile: ca.pem}
  maxIdleConns: 4
  stubs:
  - {zones: [corp.example], upstreams: ["tls://10.0.0.53:8853"], tls: {serverName: dns.corp.example, certFile: /etc/c.pem, keyFile: c.key}}
`
	if err := os.WriteFile(path, []byte(yaml), 0o644); err != nil {
		t.Fatal(err)
	}
	cfg, err := Load(path)
	if err != nil {
		t.Fatal(err)
	}
	f := cfg.Forward
	if f.TLS.ServerName != "cloudflare-dns.com" || f.TLS.CAFile != filepath.Join(dir, "ca.pem") || f.MaxIdleConns != 4 ||
		f.Expire.D().Seconds() != 10 {
		t.Errorf("forward: tls %+v, maxIdleConns %d, expire %v; want the name, ca.pem beside the file, 4 and the default 10s",
			f.TLS, f.MaxIdleConns, f.Expire.D())
	}
	if st := f.Stubs[0].TLS; st.ServerName != "dns.corp.example" || st.CertFile != "/etc/c.pem" || st.KeyFile != filepath.Join(dir, "c.key") || st.CAFile != "" {
		t.Errorf("stub tls %+v: its own, not forward.tls", st)
	}
}

func TestParseForwardTLSRejects(t *testing.T) {
	for _, c := range []struct{ name, yaml, want string }{
		{"server name with a space", "forward: {tls: {serverName: \"dns example\"}}\n", `forward.tls.serverName: "dns example" is neither a host name nor an IP address`},
		{"server name with a scheme", "forward: {tls: {serverName: \"tls://dns.example\"}}\n", "forward.tls.serverName"},
		{"cert without key", "forward: {tls: {certFile: c.pem}}\n", "forward.tls: certFile and keyFile"},
		{"stub key without cert", "forward: {stubs: [{zones: [corp.example], upstreams: [10.0.0.53], tls: {keyFile: k.pem}}]}\n", "forward.stubs[0].tls: certFile and keyFile"},
		{"stub server name", "forward: {stubs: [{zones: [corp.example], upstreams: [10.0.0.53], tls: {serverName: \"a..b\"}}]}\n", "forward.stubs[0].tls.serverName"},
		{"negative maxIdleConns", "forward: {maxIdleConns: -1}\n", "forward.maxIdleConns"},
		{"negative expire", "forward: {expire: -1s}\n", "forward.expire"},
	} {
		t.Run(c.name, func(t *testing.T) {
			_, err := Parse([]byte("kubernetes: {enabled: false}\n" + c.yaml))
			if err == nil || !strings.Contains(err.Error(), c.want) {
				t.Fatalf("error %v, want %q", err, c.want)
			}
		})
	}
	if _, err := Parse([]byte("kubernetes: {enabled: false}\nforward: {tls: {serverName: 9.9.9.9}, expire: 0s}\n")); err != nil {
		t.Errorf("an IP address as server name, expire 0: %v", err)
	}
}

// DNS over HTTPS upstreams are checked as the configuration is read,
// with the key of the one that cannot be asked.
func TestParseForwardDoH(t *testing.T) {
	cfg, err := Parse([]byte(`kubernetes: {enabled: false}
forward:
  upstreams: ["https://9.9.9.9", "https://[2620:fe::fe]:8443/resolve", "tls://1.1.1.1", 10.0.0.53, /etc/resolv.conf]
  tls: {serverName: dns.quad9.net}
  stubs:
  - {zones: [corp.example], upstreams: ["https://10.0.0.53/dns-query"]}
`))
	if err != nil {
		t.Fatal(err)
	}
	if u := cfg.Forward.Upstreams; len(u) != 5 || u[0] != "https://9.9.9.9" {
		t.Errorf("upstreams %q, want them as written", u)
	}
	for _, c := range []struct{ name, yaml, want string }{
		{"a host name", `forward: {upstreams: [10.0.0.53, "https://dns.quad9.net/dns-query"]}`,
			`forward.upstreams[1]: "https://dns.quad9.net/dns-query": "dns.quad9.net" is no IP address: upstream names are not looked up`},
		{"a query string", `forward: {upstreams: ["https://9.9.9.9/dns-query?dns=x"]}`, `forward.upstreams[0]: "https://9.9.9.9/dns-query?dns=x": want https://IP[:port][/path]`},
		{"a port out of range", `forward: {upstreams: ["https://9.9.9.9:65536"]}`, "forward.upstreams[0]"},
		{"plain HTTP", `forward: {upstreams: ["http://9.9.9.9"]}`, "forward.upstreams[0]"},
		{"in a stub", `forward: {stubs: [{zones: [corp.example], upstreams: ["https://dns.corp.example"]}]}`, "forward.stubs[0].upstreams[0]"},
		{"in a view", `views: [{name: v, expr: ["true"], forward: {upstreams: ["https://dns.example"]}}]`, "views[0].forward.upstreams[0]"},
	} {
		t.Run(c.name, func(t *testing.T) {
			_, err := Parse([]byte("kubernetes: {enabled: false}\n" + c.yaml + "\n"))
			if err == nil || !strings.Contains(err.Error(), c.want) {
				t.Fatalf("error %v, want %q", err, c.want)
			}
		})
	}
}
