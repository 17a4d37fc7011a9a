package kubeclient

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// NewDynamic honours kubernetes.context as the Kubernetes source does:
// a context the kubeconfig lacks fails at once, naming the key.
func TestNewDynamicContext(t *testing.T) {
	path := filepath.Join(t.TempDir(), "kubeconfig")
	kubeconfig := `apiVersion: v1
kind: Config
clusters:
- {name: a, cluster: {server: "https://a.example:6443"}}
- {name: b, cluster: {server: "https://b.example:6443"}}
users:
- {name: u, user: {token: t}}
contexts:
- {name: a, context: {cluster: a, user: u}}
- {name: b, context: {cluster: b, user: u}}
current-context: a
`
	if err := os.WriteFile(path, []byte(kubeconfig), 0o600); err != nil {
		t.Fatal(err)
	}
	cases := []struct {
		context, err string
	}{
		{context: ""},
		{context: "b"},
		{context: "nope", err: `kubernetes.context "nope": no such context in ` + path},
	}
	for _, c := range cases {
		t.Run(c.context, func(t *testing.T) {
			client, disc, err := NewDynamic(path, c.context, "shardns/test")
			if c.err == "" {
				if err != nil || client == nil || disc == nil {
					t.Fatalf("clients %v %v, error %v", client, disc, err)
				}
				return
			}
			if err == nil || !strings.Contains(err.Error(), c.err) {
				t.Fatalf("error %v, want one with %q", err, c.err)
			}
		})
	}
}
