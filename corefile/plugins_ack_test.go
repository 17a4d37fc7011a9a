package corefile

import (
	"strings"
	"testing"
)

// ACK's Corefile: kubeapi converts to nothing (its client serves
// k8s_event alone), k8s_event is reported.
func TestConvertACKPlugins(t *testing.T) {
	src := ".:53 {\n  errors\n  kubernetes cluster.local in-addr.arpa ip6.arpa {\n    pods insecure\n  }\n" +
		"  kubeapi {\n    kubeconfig /etc/kube/config other\n  }\n  k8s_event {\n    level info error warning\n  }\n" +
		"  kubeapi extra\n  forward . /etc/resolv.conf\n}\n" +
		"b.example:53 {\n  kubeapi {\n    tls a.pem b.pem\n    nope\n  }\n}\n"
	res := convert(t, src)
	if k := res.Config.Kubernetes; k.Kubeconfig != "" || k.Context != "" {
		t.Errorf("kubernetes.kubeconfig %q, context %q; want the kubernetes plugin's own (in-cluster)", k.Kubeconfig, k.Context)
	}
	for _, w := range []string{
		"Corefile:6: note: kubeapi: the API client of plugins such as k8s_event, not of the kubernetes plugin; " +
			"shardns connects once, with the kubernetes plugin's settings (kubernetes.kubeconfig, context)",
		"Corefile:9: k8s_event: shardns does not report its log as Kubernetes Events; its errors are in its log (log.errors) and its metrics",
		"Corefile:12: kubeapi extra: takes no arguments",
		"Corefile:17: kubeapi tls a.pem b.pem: wrong number of arguments, which CoreDNS refuses",
		`Corefile:18: kubeapi option "nope" has no shardns equivalent`,
	} {
		if !hasFinding(res, w) {
			t.Errorf("missing finding %s\ngot:\n%s", w, strings.Join(findings(res), "\n"))
		}
	}
}
