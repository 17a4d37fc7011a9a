package kubenode

import (
	"net/netip"
	"slices"
	"testing"
)

func TestSplitRule(t *testing.T) {
	for _, tc := range []struct {
		line string
		want []string
	}{
		{"-A FORWARD -s 10.244.0.0/24 -m comment --comment shardns-kubenode -j ACCEPT",
			[]string{"-A", "FORWARD", "-s", "10.244.0.0/24", "-m", "comment", "--comment", "shardns-kubenode", "-j", "ACCEPT"}},
		{`-A PREROUTING -m comment --comment "kubernetes service \"portals\"" -j KUBE-SERVICES`,
			[]string{"-A", "PREROUTING", "-m", "comment", "--comment", `kubernetes service "portals"`, "-j", "KUBE-SERVICES"}},
		{"-N KUBE-FIREWALL", []string{"-N", "KUBE-FIREWALL"}},
		{"", nil},
	} {
		if got := splitRule(tc.line); !slices.Equal(got, tc.want) {
			t.Errorf("splitRule(%q) = %q, want %q", tc.line, got, tc.want)
		}
	}
}

func TestNormalize(t *testing.T) {
	for ref, want := range map[string]string{
		"shardns:latest":           "docker.io/library/shardns:latest",
		"library/busybox:1":        "docker.io/library/busybox:1",
		"shardns.test/pause:1":     "shardns.test/pause:1",
		"localhost/x:1":            "localhost/x:1",
		"registry:5000/a/b:c":      "registry:5000/a/b:c",
		"docker.io/library/x:1":    "docker.io/library/x:1",
		"shardns.test/shardns-1:t": "shardns.test/shardns-1:t",
	} {
		if got := normalize(ref); got != want {
			t.Errorf("normalize(%q) = %q, want %q", ref, got, want)
		}
	}
}

func TestHexIPv4(t *testing.T) {
	// /proc/net/route writes addresses little-endian: 0x0000F40A is 10.244.0.0.
	got, err := hexIPv4("0000F40A")
	if err != nil || got != netip.MustParseAddr("10.244.0.0") {
		t.Errorf("hexIPv4(0000F40A) = %v, %v; want 10.244.0.0", got, err)
	}
	if _, err := hexIPv4("zz"); err == nil {
		t.Error("hexIPv4(zz): want an error")
	}
}
