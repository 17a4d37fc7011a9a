package kubeclient

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// twoContexts is a kubeconfig whose current context is "a"; context "b"
// reaches another API server.
const twoContexts = `apiVersion: v1
kind: Config
clusters:
- name: a
  cluster: {server: "https://a.example:6443"}
- name: b
  cluster: {server: "https://b.example:6443"}
users:
- name: u
  user: {token: t}
contexts:
- name: a
  context: {cluster: a, user: u}
- name: b
  context: {cluster: b, user: u}
current-context: a
`

func writeKubeconfig(t *testing.T, text string) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), "kubeconfig")
	if err := os.WriteFile(path, []byte(text), 0o600); err != nil {
		t.Fatal(err)
	}
	return path
}

func TestRESTConfigContext(t *testing.T) {
	path := writeKubeconfig(t, twoContexts)
	missing := filepath.Join(t.TempDir(), "absent")
	cases := []struct {
		name                string
		kubeconfig, context string
		host                string // wanted rest.Config Host, when no error
		err                 string // wanted in the error
	}{
		{name: "current context", kubeconfig: path, host: "https://a.example:6443"},
		{name: "the current context by name", kubeconfig: path, context: "a", host: "https://a.example:6443"},
		{name: "another context", kubeconfig: path, context: "b", host: "https://b.example:6443"},
		{name: "unknown context", kubeconfig: path, context: "nope",
			err: `kubernetes.context "nope": no such context in ` + path},
		{name: "context of a missing file", kubeconfig: missing, context: "b", err: "kubernetes.kubeconfig: "},
		{name: "context without a kubeconfig", context: "b", err: "kubernetes.context needs kubernetes.kubeconfig"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			cfg, err := RESTConfig(c.kubeconfig, c.context, "shardns/test")
			if c.err != "" {
				if err == nil || !strings.Contains(err.Error(), c.err) {
					t.Fatalf("error %v, want one with %q", err, c.err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if cfg.Host != c.host || cfg.UserAgent != "shardns/test" || cfg.ContentType != protobuf {
				t.Fatalf("host %q user agent %q content type %q, want %q shardns/test %s",
					cfg.Host, cfg.UserAgent, cfg.ContentType, c.host, protobuf)
			}
		})
	}
}

// NewClient, which has no context to pass, and NewClientContext build
// clients from the same file; the unknown context fails before any
// request is made.
func TestNewClientContext(t *testing.T) {
	path := writeKubeconfig(t, twoContexts)
	if _, err := NewClient(path, "shardns/test"); err != nil {
		t.Fatalf("NewClient: %v", err)
	}
	if _, err := NewClientContext(path, "b", "shardns/test"); err != nil {
		t.Fatalf("NewClientContext b: %v", err)
	}
	if _, err := NewClientContext(path, "nope", "shardns/test"); err == nil || !strings.Contains(err.Error(), `kubernetes.context "nope"`) {
		t.Fatalf("NewClientContext nope: error %v, want one naming kubernetes.context", err)
	}
}
