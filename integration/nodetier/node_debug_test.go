package nodetier

import (
	"strings"
	"testing"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
)

// kubeNodeAddr is the test node's address (kubenode's hostIP, its
// bridge's): the test process reaches the pods from it.
const kubeNodeAddr = "10.244.0.1"

// allowNodeDebug returns objs with every shardns configuration among them
// given http.debug for the node's address, so that the test reads the
// replicas' /debug/ring through their pod addresses, as
// deploy/README.md tells an operator to allow it. deploy/ itself serves
// /debug/ring to each pod's own loopback only. objs is left as it was.
func allowNodeDebug(t *testing.T, objs []*unstructured.Unstructured) []*unstructured.Unstructured {
	t.Helper()
	out := make([]*unstructured.Unstructured, len(objs))
	for i, o := range objs {
		out[i] = o
		text, found, _ := unstructured.NestedString(o.Object, "data", "shardns.yaml")
		if o.GetKind() != "ConfigMap" || !found {
			continue
		}
		head, rest, ok := strings.Cut(text, "\nhttp:\n")
		if !ok {
			continue // no http section: a node-local process's /debug/ring is read from the node itself
		}
		patched := o.DeepCopy()
		text = head + "\nhttp:\n  debug: [\"" + kubeNodeAddr + "\"]\n" + rest
		if err := unstructured.SetNestedField(patched.Object, text, "data", "shardns.yaml"); err != nil {
			t.Fatal(err)
		}
		out[i] = patched
	}
	return out
}

// The patch lands in the http section of deploy/'s configuration, which
// stays valid.
func TestAllowNodeDebug(t *testing.T) {
	objs := render(t, deployDir)
	cm := find(t, allowNodeDebug(t, objs), "ConfigMap", "shardns-", nil)
	text, _, _ := unstructured.NestedString(cm.Object, "data", "shardns.yaml")
	cfg := checkConfig(t, cm)
	if got := cfg.HTTP.DebugNetworks(); len(got) != 1 || got[0].Addr().String() != kubeNodeAddr {
		t.Errorf("http.debug after the patch: %v, want %s\n%s", got, kubeNodeAddr, text)
	}
	before, _, _ := unstructured.NestedString(find(t, objs, "ConfigMap", "shardns-", nil).Object, "data", "shardns.yaml")
	if strings.Contains(before, "debug:") {
		t.Errorf("deploy/'s own configuration sets http.debug, or the patch changed it in place:\n%s", before)
	}
}
