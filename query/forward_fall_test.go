package query

import "testing"

// A name's NXDOMAIN goes upstream as the longest zone holding it says:
// the kubernetes plugin's fallthrough zones pass reverse names on, but
// k8s_external's zones inside them end there unless its own fallthrough
// names them.
func TestUpstreamFallsThrough(t *testing.T) {
	kube := []string{"in-addr.arpa.", "ip6.arpa."}
	cases := []struct {
		name        string
		fall, final []string
		qname       string
		want        bool
	}{
		{"kubernetes fallthrough", kube, nil, "1.0.0.10.in-addr.arpa.", true},
		{"outside every zone", kube, nil, "www.example.com.", false},
		{"an external reverse zone ends it", kube, []string{"example.org.", "2.0.192.in-addr.arpa."}, "1.2.0.192.in-addr.arpa.", false},
		{"beside it, the kubernetes fallthrough", kube, []string{"2.0.192.in-addr.arpa."}, "1.3.0.192.in-addr.arpa.", true},
		{"k8s_external's own fallthrough", append(kube, "2.0.192.in-addr.arpa."), []string{"2.0.192.in-addr.arpa."}, "1.2.0.192.in-addr.arpa.", true},
		{"an external name, kubernetes falling through everything", []string{"."}, []string{"example.org."}, "x.ns.example.org.", false},
		{"an external name with its fallthrough", []string{"example.org."}, []string{"example.org."}, "x.ns.example.org.", true},
	}
	for _, c := range cases {
		u := &Upstream{Fallthrough: c.fall, Final: c.final}
		if got := u.fallsThrough(c.qname); got != c.want {
			t.Errorf("%s: fallsThrough(%s) = %v, want %v", c.name, c.qname, got, c.want)
		}
	}
}
