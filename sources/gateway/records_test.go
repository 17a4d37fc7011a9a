package gateway

import (
	"net/netip"
	"slices"
	"strings"
	"testing"

	"github.com/miekg/dns"
)

func addrs(s ...string) []netip.Addr {
	var out []netip.Addr
	for _, a := range s {
		out = append(out, netip.MustParseAddr(a))
	}
	return out
}

// cluster is a small cluster as k8s_gateway's README and tests describe
// one: two Gateways, routes of every kind, an Ingress and Services.
func cluster() *Objects {
	return &Objects{
		Gateways: []Gateway{
			{Namespace: "infra", Name: "public", Addrs: addrs("198.51.100.4", "2001:db8::4")},
			{Namespace: "apps", Name: "local", Addrs: addrs("198.51.100.5")},
			{Namespace: "apps", Name: "pending"}, // no address yet
		},
		Routes: []Route{
			{Kind: KindHTTPRoute, Namespace: "apps", Name: "a", Hostnames: []string{"myservicea.gw.foo.org", "other.example.net"},
				Parents: []Gateway{{Namespace: "infra", Name: "public"}}},
			// Two Gateways: both sets of addresses, each once.
			{Kind: KindHTTPRoute, Namespace: "apps", Name: "d", Hostnames: []string{"myserviced.gw.foo.org"},
				Parents: []Gateway{{Namespace: "infra", Name: "public"}, {Namespace: "apps", Name: "local"}, {Namespace: "infra", Name: "public"}}},
			{Kind: KindHTTPRoute, Namespace: "apps", Name: "wild", Hostnames: []string{"*.wild.foo.org", "a.*.foo.org"},
				Parents: []Gateway{{Namespace: "apps", Name: "local"}}},
			{Kind: KindHTTPRoute, Namespace: "apps", Name: "unattached", Hostnames: []string{"pending.foo.org"},
				Parents: []Gateway{{Namespace: "apps", Name: "pending"}, {Namespace: "apps", Name: "missing"}}},
			{Kind: KindTLSRoute, Namespace: "apps", Name: "tls", Hostnames: []string{"tls.foo.org", "shared.foo.org"},
				Parents: []Gateway{{Namespace: "apps", Name: "local"}}},
			{Kind: KindGRPCRoute, Namespace: "apps", Name: "grpc", Hostnames: []string{"grpc.foo.org"},
				Parents: []Gateway{{Namespace: "infra", Name: "public"}}},
		},
		Ingress: []Ingress{
			{Namespace: "apps", Name: "web", Hosts: []string{"myservicea.foo.org", "shared.foo.org"}, Addrs: addrs("198.51.100.0")},
			{Namespace: "apps", Name: "nolb", Hosts: []string{"nolb.foo.org"}},
		},
		Services: []Service{
			{Namespace: "default", Name: "test", Addrs: addrs("198.51.100.3")},
			{Namespace: "default", Name: "annotated", Hostname: "good.ok", Addrs: addrs("198.51.100.6")},
			{Namespace: "default", Name: "full", Hostname: "full.foo.org", Addrs: addrs("fd00::7")},
			{Namespace: "kube-system", Name: "dns1", Addrs: addrs("192.0.2.53")},
		},
	}
}

func TestNames(t *testing.T) {
	for _, tc := range []struct {
		name      string
		resources []string
		want      map[string]string // name → addresses, space separated
	}{
		{
			name: "every kind, in k8s_gateway's order",
			want: map[string]string{
				"myservicea.gw.foo.org.":    "198.51.100.4 2001:db8::4",
				"myserviced.gw.foo.org.":    "198.51.100.4 198.51.100.5 2001:db8::4",
				"*.wild.foo.org.":           "198.51.100.5",
				"tls.foo.org.":              "198.51.100.5",
				"shared.foo.org.":           "198.51.100.5", // the TLSRoute comes before the Ingress
				"grpc.foo.org.":             "198.51.100.4 2001:db8::4",
				"myservicea.foo.org.":       "198.51.100.0",
				"test.default.foo.org.":     "198.51.100.3",
				"good.ok.foo.org.":          "198.51.100.6",
				"full.foo.org.":             "fd00::7",
				"dns1.kube-system.foo.org.": "192.0.2.53",
			},
		},
		{
			name:      "resources in another order, and a subset",
			resources: []string{KindIngress, KindTLSRoute},
			want: map[string]string{
				"myservicea.foo.org.": "198.51.100.0",
				"shared.foo.org.":     "198.51.100.0",
				"tls.foo.org.":        "198.51.100.5",
			},
		},
		{
			name:      "services only",
			resources: []string{KindService},
			want: map[string]string{
				"test.default.foo.org.": "198.51.100.3", "good.ok.foo.org.": "198.51.100.6",
				"full.foo.org.": "fd00::7", "dns1.kube-system.foo.org.": "192.0.2.53",
			},
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := Names(Settings{Resources: tc.resources}, "Foo.Org", cluster())
			text := map[string]string{}
			for n, as := range got {
				var s []string
				for _, a := range as {
					s = append(s, a.String())
				}
				text[n] = strings.Join(s, " ")
			}
			for n, w := range tc.want {
				if text[n] != w {
					t.Errorf("%s: %q, want %q", n, text[n], w)
				}
			}
			for n := range text {
				if _, ok := tc.want[n]; !ok {
					t.Errorf("unexpected name %s: %s", n, text[n])
				}
			}
		})
	}
}

// The zone holds the SOA and NS records k8s_gateway answers at the apex,
// the secondary's NS when set, and the address records with the
// configured TTL.
func TestBuild(t *testing.T) {
	objs := &Objects{Services: []Service{{Namespace: "kube-system", Name: "dns1", Addrs: addrs("192.0.2.53", "2001:db8::53")}}}
	z, err := Build(Settings{TTL: 30, Apex: "dns1.kube-system", Secondary: "dns2.kube-system"}, "example.com", 7, objs)
	if err != nil {
		t.Fatal(err)
	}
	want := []string{
		"example.com.\t60\tIN\tSOA\tdns1.kube-system.example.com. hostmaster.dns1.kube-system.example.com. 7 7200 1800 86400 60",
		"example.com.\t60\tIN\tNS\tdns1.kube-system.example.com.",
		"example.com.\t60\tIN\tNS\tdns2.kube-system.example.com.",
		"dns1.kube-system.example.com.\t30\tIN\tA\t192.0.2.53",
		"dns1.kube-system.example.com.\t30\tIN\tAAAA\t2001:db8::53",
	}
	var got []string
	for _, rr := range z.Records {
		got = append(got, rr.String())
	}
	if !slices.Equal(got, want) {
		t.Errorf("records\n%s\nwant\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
	if z.Origin != "example.com." || z.Serial != 7 {
		t.Errorf("origin %s serial %d", z.Origin, z.Serial)
	}
	if _, ok := z.Records[3].(*dns.A); !ok {
		t.Errorf("record %s is not an A record", z.Records[3])
	}
}

// A host is in the zone when it is the apex or below it; only a leading
// "*" label is a wildcard.
func TestInZone(t *testing.T) {
	for host, want := range map[string]string{
		"a.foo.org":     "a.foo.org.",
		"A.Foo.Org.":    "a.foo.org.",
		"foo.org":       "foo.org.",
		"*.foo.org":     "*.foo.org.",
		"a.*.foo.org":   "",
		"*a.foo.org":    "",
		"barfoo.org":    "",
		"a.example.net": "",
		"":              "",
		"bad..foo.org":  "",
	} {
		if got := inZone(host, "foo.org."); got != want {
			t.Errorf("inZone(%q) = %q, want %q", host, got, want)
		}
	}
}
