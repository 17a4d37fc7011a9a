package functional

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/shardns/shardns/integration/harness"
	"github.com/shardns/shardns/internal/testutil"
)

func TestMain(m *testing.M) {
	// TestForgeryAttacker and TestHostileAttacker run in a test binary
	// started again with these set.
	harness.Main(m, "SHARDNS_FORGERY_ATTACK", "SHARDNS_HOSTILE_ATTACK")
}

// The README's dig commands, answered by the demo cluster over UDP and TCP.
func TestDigDemoCluster(t *testing.T) {
	p := harness.Start(t, harness.Options{Config: harness.DemoConfig})
	p.WaitReady(t)
	cases := []struct {
		args []string
		want []string
	}{
		{[]string{"frontend.shop.svc.cluster.local"}, []string{"10.96.10.10"}},
		{[]string{"cart.shop.svc.cluster.local"}, []string{"10.96.10.11"}},
		{[]string{"redis.data.svc.cluster.local"}, []string{"10.96.20.10"}},
		{[]string{"api.shop.svc.cluster.local", "AAAA"}, []string{"fd00:10:96::c"}},
		{[]string{"api.shop.svc.cluster.local", "A"}, []string{"10.96.10.12"}},
		{[]string{"postgres.data.svc.cluster.local"}, []string{"10.244.3.20", "10.244.3.21"}},
		{[]string{"postgres-0.postgres.data.svc.cluster.local"}, []string{"10.244.3.20"}},
		{[]string{"payments.shop.svc.cluster.local", "CNAME"}, []string{"payments.example.com."}},
		{[]string{"_grpc._tcp.cart.shop.svc.cluster.local", "SRV"}, []string{"0 100 9090 cart.shop.svc.cluster.local."}},
		{[]string{"-x", "10.96.10.10"}, []string{"frontend.shop.svc.cluster.local."}},
		{[]string{"dns-version.cluster.local", "TXT"}, []string{`"1.1.0"`}},
		{[]string{"service1.test.global"}, []string{"127.255.0.2"}},
	}
	for _, tcp := range []bool{false, true} {
		for _, c := range cases {
			args := c.args
			if tcp {
				args = append([]string{"+tcp"}, args...)
			}
			if got := harness.Dig(t, p.Addr, args...); !slices.Equal(got, c.want) {
				t.Errorf("dig %v = %q, want %q", args, got, c.want)
			}
		}
	}
	if s := harness.DigStatus(t, p.Addr, "nope.shop.svc.cluster.local"); s != "NXDOMAIN" {
		t.Errorf("nope.shop: status %s, want NXDOMAIN", s)
	}
	if s := harness.DigStatus(t, p.Addr, "redis.data.svc.cluster.local", "AAAA"); s != "NOERROR" {
		t.Errorf("AAAA of an IPv4 service: status %s, want NOERROR", s)
	}
}

func TestRingCommand(t *testing.T) {
	p := harness.Start(t, harness.Options{Config: harness.DemoConfig})
	p.WaitReady(t)
	out, err := exec.Command(harness.Bin, "ring", "--http", p.HTTPAddr(t)).CombinedOutput()
	if err != nil || !strings.Contains(string(out), "shop.svc.cluster.local.") || !strings.Contains(string(out), "(this replica)") {
		t.Fatalf("shardns ring: %v\n%s", err, out)
	}
}

func TestSIGTERMStopsCleanly(t *testing.T) {
	p := harness.Start(t, harness.Options{Config: harness.DemoConfig})
	p.Cmd.Process.Signal(syscall.SIGTERM)
	select {
	case err := <-p.Done:
		if err != nil {
			t.Fatalf("exit after SIGTERM: %v", err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("still running 10s after SIGTERM")
	}
}

// SIGTERM: /ready fails at once, /health and DNS keep answering for the
// lameduck period, then the process exits cleanly.
func TestLameduck(t *testing.T) {
	cfg := strings.Replace(harness.DemoConfig, `http: {listen: "127.0.0.1:0"}`, `http: {listen: "127.0.0.1:0", lameduck: 3s}`, 1)
	p := harness.Start(t, harness.Options{Config: cfg})
	httpAddr := p.HTTPAddr(t)
	p.Cmd.Process.Signal(syscall.SIGTERM)
	testutil.Eventually(t, 2*time.Second, func() error {
		if code := harness.HTTPStatus(t, "http://"+httpAddr+"/ready"); code != 503 {
			return fmt.Errorf("/ready = %d during lameduck, want 503", code)
		}
		return nil
	})
	if code := harness.HTTPStatus(t, "http://"+httpAddr+"/health"); code != 200 {
		t.Fatalf("/health = %d during lameduck, want 200", code)
	}
	if got := harness.Dig(t, p.Addr, "frontend.shop.svc.cluster.local"); !slices.Equal(got, []string{"10.96.10.10"}) {
		t.Fatalf("DNS during lameduck: %q", got)
	}
	select {
	case err := <-p.Done:
		if err != nil {
			t.Fatalf("exit after lameduck: %v", err)
		}
	case <-time.After(15 * time.Second):
		t.Fatal("still running 15s after SIGTERM")
	}
}

func TestCheckEmbeddedDemo(t *testing.T) {
	out, err := exec.Command(harness.Bin, "check").CombinedOutput()
	if err != nil || !strings.Contains(string(out), "configuration OK") {
		t.Fatalf("shardns check: %v\n%s", err, out)
	}
}

// A kubeconfig context that cannot be used stops the start, naming the
// key, before anything is served.
func TestBadKubeconfigContextExits(t *testing.T) {
	dir := t.TempDir()
	kubeconfig := filepath.Join(dir, "kubeconfig")
	os.WriteFile(kubeconfig, []byte(`apiVersion: v1
kind: Config
clusters: [{name: a, cluster: {server: "https://127.0.0.1:1"}}]
users: [{name: u, user: {token: t}}]
contexts: [{name: a, context: {cluster: a, user: u}}]
current-context: a
`), 0o600)
	cases := []struct{ name, kube, want string }{
		{"unknown context", fmt.Sprintf("{enabled: true, kubeconfig: %q, context: nope}", kubeconfig),
			`kubernetes.context "nope": no such context in ` + kubeconfig},
		{"context without a kubeconfig", "{enabled: true, context: a}", "kubernetes.context: needs kubernetes.kubeconfig"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			path := filepath.Join(dir, "shardns.yaml")
			os.WriteFile(path, []byte("dns: {listen: [\"127.0.0.1:0\"]}\nhttp: {listen: \"\"}\nkubernetes: "+c.kube+"\n"), 0o644)
			out, err := exec.Command(harness.Bin, "serve", "--config", path).CombinedOutput()
			if err == nil {
				t.Fatal("serve started")
			}
			if !strings.Contains(string(out), c.want) {
				t.Fatalf("output lacks %q:\n%s", c.want, out)
			}
		})
	}
}

func TestBadConfigExitsNamingTheKey(t *testing.T) {
	path := filepath.Join(t.TempDir(), "bad.yaml")
	os.WriteFile(path, []byte("kubernetes: {enabled: false, ttl: 9000}\n"), 0o644)
	out, err := exec.Command(harness.Bin, "serve", "--config", path).CombinedOutput()
	if err == nil {
		t.Fatal("serve accepted ttl 9000")
	}
	if !strings.Contains(string(out), "kubernetes.ttl") {
		t.Fatalf("error does not name the key:\n%s", out)
	}
}
