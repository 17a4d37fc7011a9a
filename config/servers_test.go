package config

import (
	"strings"
	"testing"
)

// Entries on one address share a listener: they may split zones between
// them, and each error names the entry a user has to fix.
func TestServersSharingAnAddress(t *testing.T) {
	const base = "kubernetes: {enabled: false}\ndns: {listen: [\"127.0.0.1:53\"]}\n"
	const pem = `tls: {certFile: c.pem, keyFile: k.pem}`
	accepted := []struct{ name, servers string }{
		{"zones split on one port", `[{listen: ["127.0.0.1:54"], zones: [a.org]}, {listen: ["127.0.0.1:54"], zones: [b.org], whoami: true}]`},
		{"a zone beside dns.listen", `[{listen: ["127.0.0.1:53"], zones: [whoami.example], whoami: true}]`},
		{"port 0 never shares", `[{listen: ["127.0.0.1:0"]}, {listen: ["127.0.0.1:0"], transport: tls, ` + pem + `}]`},
		{"one certificate for two blocks", `[{listen: ["127.0.0.1:853"], transport: tls, zones: [a.org], ` + pem + `}, {listen: ["127.0.0.1:853"], transport: tls, zones: [b.org], ` + pem + `}]`},
	}
	for _, c := range accepted {
		t.Run(c.name, func(t *testing.T) {
			if _, err := Parse([]byte(base + "servers: " + c.servers + "\n")); err != nil {
				t.Fatal(err)
			}
		})
	}
	rejected := []struct{ name, servers, want string }{
		{"a zone twice", `[{listen: ["127.0.0.1:54"], zones: [a.org]}, {listen: ["127.0.0.1:54"], zones: [A.org.]}]`,
			"servers[1].listen[0]: zone a.org. on 127.0.0.1:54 is served by servers[0].listen[0] already"},
		{"the root beside dns.listen", `[{listen: ["127.0.0.1:53"]}]`,
			"servers[0].listen[0]: zone . on 127.0.0.1:53 is served by dns.listen already"},
		{"two transports", `[{listen: ["127.0.0.1:53"], transport: tls, zones: [a.org], ` + pem + `}]`,
			"servers[0].listen[0]: 127.0.0.1:53 is served over dns by dns.listen"},
		{"two certificates", `[{listen: ["127.0.0.1:853"], transport: tls, zones: [a.org], ` + pem + `}, {listen: ["127.0.0.1:853"], transport: tls, zones: [b.org], tls: {certFile: d.pem, keyFile: k.pem}}]`,
			"servers[1].listen[0]: 127.0.0.1:853 is shared with servers[0].listen[0], so tls and path must be the same"},
		{"two paths", `[{listen: ["127.0.0.1:443"], transport: https, zones: [a.org], ` + pem + `}, {listen: ["127.0.0.1:443"], transport: https, zones: [b.org], path: /q, ` + pem + `}]`,
			"servers[1].listen[0]: 127.0.0.1:443 is shared with servers[0].listen[0]"},
	}
	for _, c := range rejected {
		t.Run(c.name, func(t *testing.T) {
			_, err := Parse([]byte(base + "servers: " + c.servers + "\n"))
			if err == nil || !strings.Contains(err.Error(), c.want) {
				t.Fatalf("err = %v, want it to say %q", err, c.want)
			}
		})
	}
}
