package corefile

import (
	"strings"
	"testing"
)

// NodeLocal DNSCache's Corefile as its installer leaves it (link-local
// address, domain and kube-dns ClusterIP filled by sed), with node-cache's
// placeholders still in it.
const nodeCacheTemplate = `cluster.local:53 {
    cache {
            success 9984 30
            denial 9984 5
    }
    bind 169.254.20.10 __PILLAR__DNS__SERVER__
    forward . __PILLAR__CLUSTER__DNS__ {
            force_tcp
    }
    health 169.254.20.10:8080
    }
.:53 {
    bind __PILLAR__LOCAL__DNS__
    forward . __PILLAR__UPSTREAM__SERVERS__
    }
`

func TestFillNodeCache(t *testing.T) {
	env := func(vars ...string) func(string) (string, bool) {
		return func(name string) (string, bool) {
			for i := 0; i+1 < len(vars); i += 2 {
				if vars[i] == name {
					return vars[i+1], true
				}
			}
			return "", false
		}
	}
	tests := []struct {
		name string
		src  string
		nc   NodeCache
		want []string // lines of the result that must be there
		err  string   // the error must hold it
	}{{
		name: "the DaemonSet's flags and environment",
		src:  nodeCacheTemplate,
		nc: NodeCache{LocalIP: "169.254.20.10,10.96.0.10", UpstreamSvc: "kube-dns-upstream",
			Getenv: env("KUBE_DNS_UPSTREAM_SERVICE_HOST", "10.96.0.11")},
		want: []string{"    bind 169.254.20.10 ", "    forward . 10.96.0.11 {", "    bind 169.254.20.10 10.96.0.10",
			"    forward . /etc/resolv.conf"},
	}, {
		name: "--upstreamsvc defaults to kube-dns",
		src:  "cluster.local {\n forward . __PILLAR__CLUSTER__DNS__\n}\n",
		nc:   NodeCache{Getenv: env("KUBE_DNS_SERVICE_HOST", "fd00:10:96::a")},
		want: []string{" forward . fd00:10:96::a"},
	}, {
		name: "--cluster-dns wins over the environment",
		src:  "cluster.local {\n forward . __PILLAR__CLUSTER__DNS__\n}\n",
		nc:   NodeCache{ClusterDNS: "127.0.0.5:5301", Getenv: env("KUBE_DNS_SERVICE_HOST", "10.96.0.10")},
		want: []string{" forward . 127.0.0.5:5301"},
	}, {
		name: "upstream servers, comma-separated",
		src:  ". {\n forward . __PILLAR__UPSTREAM__SERVERS__\n}\n",
		nc:   NodeCache{UpstreamServers: "10.0.0.53,10.0.1.53:5353"},
		want: []string{" forward . 10.0.0.53 10.0.1.53:5353"},
	}, {
		name: "no placeholder: unchanged",
		src:  ". {\n forward . 8.8.8.8\n}\n",
		want: []string{" forward . 8.8.8.8"},
	}, {
		name: "the Service's variable is not set",
		src:  nodeCacheTemplate,
		nc:   NodeCache{LocalIP: "169.254.20.10", UpstreamSvc: "kube-dns-upstream", Getenv: env()},
		err:  "Corefile:7: __PILLAR__CLUSTER__DNS__: the ClusterIP of Service kube-dns-upstream (--upstreamsvc) is unknown: KUBE_DNS_UPSTREAM_SERVICE_HOST is not set",
	}, {
		name: "the Service's variable is no IP",
		src:  "cluster.local {\n forward . __PILLAR__CLUSTER__DNS__\n}\n",
		nc:   NodeCache{Getenv: env("KUBE_DNS_SERVICE_HOST", "kube-dns.kube-system")},
		err:  `KUBE_DNS_SERVICE_HOST="kube-dns.kube-system" (the ClusterIP of Service kube-dns) is not an IP address`,
	}, {
		name: "no --localip",
		src:  nodeCacheTemplate,
		nc:   NodeCache{ClusterDNS: "10.96.0.11"},
		err:  "Corefile:13: __PILLAR__LOCAL__DNS__: node-cache fills it from -localip: give --localip",
	}, {
		name: "a --localip that is no address",
		src:  ". {\n bind __PILLAR__LOCAL__DNS__\n}\n",
		nc:   NodeCache{LocalIP: "169.254.20.10,node"},
		err:  `--localip "169.254.20.10,node": "node" is not an IP address`,
	}, {
		name: "the installer's domain left in",
		src:  "__PILLAR__DNS__DOMAIN__:53 {\n forward . 10.96.0.11\n}\n",
		err:  "Corefile:1: __PILLAR__DNS__DOMAIN__: NodeLocal DNSCache's installer fills it",
	}, {
		name: "an unknown placeholder",
		src:  ". {\n forward . 10.96.0.11\n prometheus __PILLAR__METRICS__\n}\n",
		err:  "Corefile:3: __PILLAR__METRICS__: not a placeholder node-cache fills",
	}, {
		name: "an upstream server that would break the Corefile",
		src:  ". {\n forward . __PILLAR__UPSTREAM__SERVERS__\n}\n",
		nc:   NodeCache{UpstreamServers: "10.0.0.53 }"},
		err:  `--upstream-servers "10.0.0.53 }": "}" is not an IP`,
	}}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			out, err := FillNodeCache("Corefile", []byte(tt.src), tt.nc)
			if errorWanted(t, err, tt.err) {
				return
			}
			lines := strings.Split(string(out), "\n")
			if len(lines) != len(strings.Split(tt.src, "\n")) {
				t.Errorf("the lines moved:\n%s", out)
			}
			for _, w := range tt.want {
				found := false
				for _, l := range lines {
					found = found || l == w
				}
				if !found {
					t.Errorf("no line %q in\n%s", w, out)
				}
			}
			if strings.Contains(string(out), "__PILLAR__") {
				t.Errorf("a placeholder is left:\n%s", out)
			}
		})
	}
}
