package corefile

import (
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	"github.com/shardns/shardns/config"
)

// forward to tls:// upstreams, with CoreDNS's options about them.
func TestConvertForwardTLS(t *testing.T) {
	cases := []convertCase[config.ForwardConfig]{
		{
			name: "cloudflare over TLS",
			src:  ".:53 {\n  forward . tls://1.1.1.1 tls://1.0.0.1 {\n    tls_servername cloudflare-dns.com\n    health_check 5s\n    max_idle_conns 8\n    expire 30s\n  }\n}\n",
			check: func(t *testing.T, f config.ForwardConfig) {
				if !reflect.DeepEqual(f.Upstreams, []string{"tls://1.1.1.1:853", "tls://1.0.0.1:853"}) ||
					f.TLS != (config.UpstreamTLSConfig{ServerName: "cloudflare-dns.com"}) || f.MaxIdleConns != 8 || f.Expire.D().Seconds() != 30 {
					t.Errorf("forward %+v", f)
				}
			},
			clean: true,
		},
		{
			name: "tls CA, CERT KEY, CERT KEY CA, read from root",
			src: ".:53 {\n  root /etc/coredns\n  forward . tls://127.0.0.1:8853 {\n    tls client.pem client.key ca.pem\n  }\n}\n" +
				"a.example:53 {\n  forward . tls://10.0.0.1 {\n    tls /pki/ca.pem\n  }\n}\n" +
				"b.example:53 {\n  forward . tls://10.0.0.2 {\n    tls /pki/c.pem /pki/c.key\n  }\n}\n",
			check: func(t *testing.T, f config.ForwardConfig) {
				want := config.UpstreamTLSConfig{CertFile: "/etc/coredns/client.pem", KeyFile: "/etc/coredns/client.key", CAFile: "/etc/coredns/ca.pem"}
				if f.TLS != want || !reflect.DeepEqual(f.Upstreams, []string{"tls://127.0.0.1:8853"}) {
					t.Errorf("forward.tls %+v upstreams %q, want %+v", f.TLS, f.Upstreams, want)
				}
				if len(f.Stubs) != 2 || f.Stubs[0].TLS != (config.UpstreamTLSConfig{CAFile: "/pki/ca.pem"}) ||
					f.Stubs[1].TLS != (config.UpstreamTLSConfig{CertFile: "/pki/c.pem", KeyFile: "/pki/c.key"}) {
					t.Errorf("stubs %+v: each with its own tls", f.Stubs)
				}
			},
			clean: true,
		},
		{
			name: "plain and TLS upstreams mixed, as CoreDNS allows",
			src:  ".:53 {\n  forward . 10.0.0.53 tls://9.9.9.9 {\n    tls\n    tls_servername dns.quad9.net\n  }\n}\n",
			check: func(t *testing.T, f config.ForwardConfig) {
				if !reflect.DeepEqual(f.Upstreams, []string{"10.0.0.53", "tls://9.9.9.9:853"}) || f.TLS.ServerName != "dns.quad9.net" {
					t.Errorf("forward %+v", f)
				}
			},
			clean: true,
		},
		{
			name: "a server name on the upstreams",
			src:  ".:53 {\n  forward . tls://9.9.9.9%dns.quad9.net tls://[2620:fe::fe%dns.quad9.net]:10853\n}\n",
			check: func(t *testing.T, f config.ForwardConfig) {
				if !reflect.DeepEqual(f.Upstreams, []string{"tls://9.9.9.9:853", "tls://[2620:fe::fe]:10853"}) || f.TLS.ServerName != "dns.quad9.net" {
					t.Errorf("forward %+v", f)
				}
			},
			clean: true,
		},
		{
			name: "server names on the upstreams and tls_servername",
			src:  ".:53 {\n  forward . tls://9.9.9.9%dns.quad9.net {\n    tls_servername other.example\n  }\n}\n",
			want: []string{"Corefile:2: forward: tls_servername and a server name on an upstream (tls://IP%NAME) are both set, which CoreDNS refuses too"},
		},
		{
			name: "different server names on the upstreams",
			src:  ".:53 {\n  forward . tls://9.9.9.9%dns.quad9.net tls://1.1.1.1%cloudflare-dns.com\n}\n",
			want: []string{"Corefile:2: forward: upstreams with different TLS server names; shardns has one per forwarder: write a server block per name (as CoreDNS's forward README does) or one tls_servername"},
		},
		{
			name: "bad option values",
			src:  ".:53 {\n  forward . tls://9.9.9.9 {\n    tls_servername \"dns quad9\"\n    max_idle_conns -1\n    expire soon\n    tls a b c d\n  }\n}\n",
			want: []string{
				"Corefile:3: tls_servername dns quad9: not a host name",
				"Corefile:4: max_idle_conns -1: not a number of 0 or more",
				"Corefile:5: expire soon: not a duration",
				"Corefile:6: tls a b c d: takes CERT KEY CA, CERT KEY, CA or nothing",
			},
		},
		{
			name: "TLS options without a tls:// upstream",
			src:  ".:53 {\n  forward . 10.0.0.53 {\n    tls_servername dns.example\n  }\n}\n",
			want: []string{"Corefile:2: note: forward: tls and tls_servername apply to tls:// and https:// upstreams only, and there is none"},
		},
		{
			name: "a stub's pool options differ from the root's",
			src:  ".:53 {\n  forward . tls://9.9.9.9 {\n    expire 5s\n  }\n}\ncorp.example:53 {\n  forward . tls://10.0.0.1 {\n    expire 20s\n    max_idle_conns 2\n  }\n}\n",
			want: []string{
				"Corefile:7: expire for stub domain corp.example: one expire for every upstream (forward.*)",
				"Corefile:7: max_idle_conns for stub domain corp.example: one max_idle_conns for every upstream (forward.*)",
			},
		},
		{
			name: "other transports stay unmapped",
			src:  ".:53 {\n  forward . quic://9.9.9.9\n}\n",
			want: []string{"Corefile:2: forward upstream quic://9.9.9.9: shardns forwards plain DNS to an IP, IP:port or a resolv.conf path, " +
				"DNS over TLS to tls://IP[:port] and DNS over HTTPS to https://IP[:port] (forward only)"},
		},
		{
			name: "quad9 over HTTPS, as CoreDNS's README has it",
			src:  ".:53 {\n  forward . https://9.9.9.9 https://[2620:fe::fe]:8443 {\n    tls_servername dns.quad9.net\n    health_check 5s\n    doh_method POST\n    max_idle_conns 4\n  }\n}\n",
			check: func(t *testing.T, f config.ForwardConfig) {
				if !reflect.DeepEqual(f.Upstreams, []string{"https://9.9.9.9:443/dns-query", "https://[2620:fe::fe]:8443/dns-query"}) ||
					f.TLS != (config.UpstreamTLSConfig{ServerName: "dns.quad9.net"}) || f.HealthCheck.D().Seconds() != 5 || f.MaxIdleConns != 4 {
					t.Errorf("forward %+v", f)
				}
			},
			clean: true,
		},
		{
			name: "DoH beside plain and TLS upstreams, with a CA",
			src:  ".:53 {\n  forward . 10.0.0.53 tls://10.0.0.54 https://10.0.0.55 {\n    tls /pki/ca.pem\n  }\n}\n",
			check: func(t *testing.T, f config.ForwardConfig) {
				if !reflect.DeepEqual(f.Upstreams, []string{"10.0.0.53", "tls://10.0.0.54:853", "https://10.0.0.55:443/dns-query"}) ||
					f.TLS != (config.UpstreamTLSConfig{CAFile: "/pki/ca.pem"}) {
					t.Errorf("forward %+v", f)
				}
			},
			clean: true,
		},
		{
			name: "a stub domain over HTTPS, TLS options used",
			src:  ".:53 {\n  forward . 10.0.0.53\n}\ncorp.example:53 {\n  forward . https://10.0.0.1 {\n    tls_servername dns.corp.example\n  }\n}\n",
			check: func(t *testing.T, f config.ForwardConfig) {
				if len(f.Stubs) != 1 || !reflect.DeepEqual(f.Stubs[0].Upstreams, []string{"https://10.0.0.1:443/dns-query"}) ||
					f.Stubs[0].TLS.ServerName != "dns.corp.example" {
					t.Errorf("stubs %+v", f.Stubs)
				}
			},
			clean: true,
		},
		{
			name:  "doh_method GET is asked with POST",
			src:   ".:53 {\n  forward . https://9.9.9.9 {\n    doh_method GET\n  }\n}\n",
			want:  []string{"Corefile:3: note: doh_method GET: shardns asks DNS over HTTPS upstreams with POST, which they all answer alike"},
			clean: true,
		},
		{
			name: "a bad doh_method",
			src:  ".:53 {\n  forward . https://9.9.9.9 {\n    doh_method PUT\n  }\n}\n",
			want: []string{"Corefile:3: doh_method PUT: must be GET or POST"},
		},
		{
			name: "a server name on an https:// upstream is ignored, as by CoreDNS",
			src:  ".:53 {\n  forward . https://9.9.9.9%dns.quad9.net\n}\n",
			check: func(t *testing.T, f config.ForwardConfig) {
				if !reflect.DeepEqual(f.Upstreams, []string{"https://9.9.9.9:443/dns-query"}) || f.TLS.ServerName != "" {
					t.Errorf("forward %+v", f)
				}
			},
			want:  []string{"Corefile:2: note: forward upstream https://9.9.9.9%dns.quad9.net: CoreDNS ignores a server name on an https:// upstream, and so does shardns (tls_servername sets it)"},
			clean: true,
		},
		{
			name: "an https:// upstream beside a named tls:// one",
			src:  ".:53 {\n  forward . tls://9.9.9.9%dns.quad9.net https://9.9.9.9\n}\n",
			want: []string{"Corefile:2: forward: upstreams with different TLS server names; shardns has one per forwarder: write a server block per name (as CoreDNS's forward README does) or one tls_servername"},
		},
		{
			name: "a path on an https:// upstream, which CoreDNS refuses",
			src:  ".:53 {\n  forward . https://9.9.9.9/dns-query\n}\n",
			want: []string{"Corefile:2: forward upstream https://9.9.9.9/dns-query: CoreDNS refuses a path on https:// upstreams (it asks /dns-query)"},
		},
		{
			name: "a host name after https:// stays unmapped",
			src:  ".:53 {\n  forward . https://dns.quad9.net\n}\n",
			want: []string{"Corefile:2: forward upstream https://dns.quad9.net: shardns asks DNS over HTTPS at https://IP[:port] and looks no upstream name up (write the IP, and the name in tls_servername)"},
		},
		{
			name: "proxy has no https:// upstreams",
			src:  ".:53 {\n  proxy . https://9.9.9.9\n}\n",
			want: []string{"Corefile:2: proxy upstream https://9.9.9.9: shardns forwards plain DNS to an IP, IP:port or a resolv.conf path, DNS over TLS to tls://IP[:port] and DNS over HTTPS to https://IP[:port] (forward only)"},
		},
		{
			name: "a host name after tls:// stays unmapped",
			src:  ".:53 {\n  forward . tls://dns.quad9.net\n}\n",
			want: []string{"Corefile:2: forward upstream tls://dns.quad9.net: shardns forwards plain DNS to an IP, IP:port or a resolv.conf path, DNS over TLS to tls://IP[:port] and DNS over HTTPS to https://IP[:port] (forward only)"},
		},
	}
	runConvertCases(t, cases, forwardConfig)
}

// Served as it is, a Corefile whose forward tls file is missing or holds
// no certificate fails at start naming the line, as CoreDNS fails.
func TestLoadedForwardTLSFileNamesTheLine(t *testing.T) {
	dir := t.TempDir()
	notPEM := filepath.Join(dir, "not.pem")
	if err := os.WriteFile(notPEM, []byte("hello\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	missing := filepath.Join(dir, "missing.pem")
	src := ".:53 {\n  forward . tls://127.0.0.1 {\n    tls " + missing + "\n  }\n}\n" +
		"corp.example:53 {\n  forward . tls://127.0.0.2 {\n    tls " + notPEM + "\n  }\n}\n"
	path := filepath.Join(dir, "Corefile")
	if err := os.WriteFile(path, []byte(src), 0o644); err != nil {
		t.Fatal(err)
	}
	l, err := LoadFile(path, nil, NodeCache{})
	if err != nil {
		t.Fatal(err)
	}
	_, err = l.Config()
	want := []string{path + ":3: forward tls: caFile: open " + missing, path + ":8: forward tls: caFile: " + notPEM + " holds no PEM certificate"}
	for _, w := range want {
		if err == nil || !strings.Contains(err.Error(), w) {
			t.Errorf("Config() = %v, want %q", err, w)
		}
	}
}
