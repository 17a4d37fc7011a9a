package integration

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/shardns/shardns/integration/kubeapi"
	"github.com/shardns/shardns/internal/testutil"
)

// shardnsBin is built once for the package by TestMain.
var shardnsBin string

func TestMain(m *testing.M) {
	if os.Getenv("SHARDNS_FORGERY_ATTACK") != "" || os.Getenv("SHARDNS_HOSTILE_ATTACK") != "" {
		os.Exit(m.Run()) // an attacker process: it needs no binary (TestForgeryAttacker, TestHostileAttacker)
	}
	dir, err := os.MkdirTemp("", "shardns-it-")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	shardnsBin = filepath.Join(dir, "shardns")
	// Built as scripts/image.sh builds what ships: a static binary. One
	// built with cgo maps libc and the dynamic loader as well, and its
	// memory (TestShardedIngest, TestShardedMemory) would not be the
	// deployed replica's.
	build := exec.Command("go", "build", "-trimpath", "-ldflags", "-s -w", "-o", shardnsBin, "../cmd/shardns")
	build.Env = append(os.Environ(), "CGO_ENABLED=0")
	build.Stdout, build.Stderr = os.Stderr, os.Stderr
	if err := build.Run(); err != nil {
		fmt.Fprintln(os.Stderr, "building shardns:", err)
		os.Exit(1)
	}
	code := m.Run()
	kubeapi.StopShared()
	os.RemoveAll(dir)
	os.Exit(code)
}

// process is a running shardns binary.
type process struct {
	cmd   *exec.Cmd
	addr  string // DNS address, the first of its started line
	httpc chan string
	done  chan error
	log   testutil.SyncBuffer // what it wrote to stderr
}

// waitLog waits until the process has written a line containing s.
func (p *process) waitLog(t *testing.T, s string, timeout time.Duration) {
	t.Helper()
	testutil.Eventually(t, timeout, func() error {
		if !strings.Contains(p.log.String(), s) {
			return fmt.Errorf("no log line with %q yet", s)
		}
		return nil
	})
}

// waitReady waits until /ready answers 200.
func (p *process) waitReady(t *testing.T) {
	t.Helper()
	addr := p.httpAddr(t)
	p.httpc <- addr // keep it for later callers
	testutil.Eventually(t, 20*time.Second, func() error {
		if code := httpStatus(t, "http://"+addr+"/ready"); code != 200 {
			return fmt.Errorf("/ready = %d", code)
		}
		return nil
	})
}

// httpAddr is the HTTP address from the "shardns started" log line.
func (p *process) httpAddr(t *testing.T) string {
	t.Helper()
	select {
	case a := <-p.httpc:
		return a
	case <-time.After(20 * time.Second):
		t.Fatal("no started line with the HTTP address")
	}
	return ""
}

var (
	startedRE = regexp.MustCompile(`msg="shardns started".* http=(\S+)`)
	// firstDNSRE is the first DNS address of the started line, which lists
	// them in the configuration's order (an IPv6 one as [::1]:port). It is
	// the only source of a process's address: a process listening on
	// several addresses logs its listening lines in whatever order its
	// listeners start, before the started line.
	firstDNSRE = regexp.MustCompile(`msg="shardns started".* dns="?\[(\[[^\]]+\]:\d+|[^ \]"]+)`)
)

// startShardns runs `shardns serve --config` with cfg written next to the
// demo cluster, waits for its started line and stops it at test end.
func startShardns(t *testing.T, cfg string) *process {
	t.Helper()
	p, err := tryStartShardns(t, cfg)
	if err != nil {
		t.Fatal(err)
	}
	return p
}

// tryStartShardns is startShardns that returns, rather than fails on, a
// process that exits before listening (errPortTaken when it could not
// bind an address).
func tryStartShardns(t *testing.T, cfg string) (*process, error) {
	t.Helper()
	dir := t.TempDir()
	demo, err := os.ReadFile("../deploy/local/demo-cluster.yaml")
	if err != nil {
		t.Fatal(err)
	}
	os.WriteFile(filepath.Join(dir, "demo-cluster.yaml"), demo, 0o644)
	path := filepath.Join(dir, "shardns.yaml")
	os.WriteFile(path, []byte(cfg), 0o644)
	return tryStartServeIn(t, "", "--config", path)
}

// startServe runs `shardns serve` with args, waits for its started line
// and stops it at test end.
func startServe(t *testing.T, args ...string) *process {
	t.Helper()
	return startServeIn(t, "", args...)
}

// startServeIn is startServe run in dir ("" for the test's own): the
// folder relative paths of its configuration are read from, as CoreDNS
// reads a Corefile's.
func startServeIn(t *testing.T, dir string, args ...string) *process {
	t.Helper()
	p, err := tryStartServeIn(t, dir, args...)
	if err != nil {
		t.Fatal(err)
	}
	return p
}

// tryStartServeIn is startServeIn that returns the error of a process
// that did not start (errPortTaken among them) rather than fail t.
func tryStartServeIn(t *testing.T, dir string, args ...string) (*process, error) {
	t.Helper()
	cmd := exec.Command(shardnsBin, append([]string{"serve"}, args...)...)
	cmd.Dir = dir
	return tryStartCmd(t, cmd)
}

// startCmd runs cmd, a shardns serve (or a command that execs one, such
// as `ip netns exec`), waits for its started line and stops it at test
// end.
func startCmd(t *testing.T, cmd *exec.Cmd) *process {
	t.Helper()
	p, err := tryStartCmd(t, cmd)
	if err != nil {
		t.Fatal(err)
	}
	return p
}

// errPortTaken says a process exited because an address it was given
// was bound by another process meanwhile: the tests choose free ports
// before a process binds them, and another process (an outgoing
// connection's ephemeral port) may take one in between.
var errPortTaken = errors.New("a port chosen for shardns was taken before it bound it")

// tryStartCmd is startCmd that returns, rather than fails on, a process
// that exits before listening: errPortTaken when it could not bind.
func tryStartCmd(t *testing.T, cmd *exec.Cmd) (*process, error) {
	t.Helper()
	stderr, err := cmd.StderrPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	p := &process{cmd: cmd, done: make(chan error, 1), httpc: make(chan string, 1)}
	addrc := make(chan string, 1)
	var portTaken atomic.Bool
	scanned := make(chan struct{})
	go func() {
		defer close(scanned)
		sc := bufio.NewScanner(stderr)
		for sc.Scan() {
			t.Log(sc.Text())
			fmt.Fprintln(&p.log, sc.Text())
			if strings.Contains(sc.Text(), "bind: address already in use") {
				portTaken.Store(true)
			}
			if m := firstDNSRE.FindStringSubmatch(sc.Text()); m != nil {
				select {
				case addrc <- m[1]:
				default:
				}
			}
			if m := startedRE.FindStringSubmatch(sc.Text()); m != nil {
				select {
				case p.httpc <- m[1]:
				default:
				}
			}
		}
		io.Copy(io.Discard, stderr)
	}()
	go func() { p.done <- cmd.Wait() }()
	t.Cleanup(func() {
		cmd.Process.Signal(syscall.SIGTERM)
		select {
		case <-p.done:
		case <-time.After(10 * time.Second):
			cmd.Process.Kill()
		}
	})
	select {
	case p.addr = <-addrc:
	case err := <-p.done:
		<-scanned // every line it wrote is read
		if portTaken.Load() {
			return nil, errPortTaken
		}
		return nil, fmt.Errorf("shardns exited before listening: %v", err)
	case <-time.After(20 * time.Second):
		return nil, errors.New("shardns did not start listening within 20s")
	}
	return p, nil
}

const demoConfig = `
dns: {listen: ["127.0.0.1:0"]}
http: {listen: "127.0.0.1:0"}
kubernetes: {enabled: false}
manifests: {files: [demo-cluster.yaml]}
cluster: {replicationFactor: 0}
forward: {upstreams: []}
`

// dig runs Debian's dig against addr and returns its +short lines, sorted.
func dig(t *testing.T, addr string, args ...string) []string {
	t.Helper()
	host, port, _ := strings.Cut(addr, ":")
	full := append([]string{"@" + host, "-p", port, "+short", "+tries=1", "+time=2"}, args...)
	out, err := exec.Command("dig", full...).CombinedOutput()
	if err != nil {
		t.Fatalf("dig %v: %v\n%s", full, err, out)
	}
	var lines []string
	for _, l := range strings.Split(strings.TrimSpace(string(out)), "\n") {
		if l != "" && !strings.HasPrefix(l, ";;") {
			lines = append(lines, l)
		}
	}
	slices.Sort(lines)
	return lines
}

// digStatus runs dig and returns the status of the header line.
func digStatus(t *testing.T, addr string, args ...string) string {
	t.Helper()
	host, port, _ := strings.Cut(addr, ":")
	full := append([]string{"@" + host, "-p", port, "+tries=1", "+time=2"}, args...)
	out, err := exec.Command("dig", full...).CombinedOutput()
	if err != nil {
		t.Fatalf("dig %v: %v\n%s", full, err, out)
	}
	m := regexp.MustCompile(`status: (\w+)`).FindSubmatch(out)
	if m == nil {
		t.Fatalf("no status in dig output:\n%s", out)
	}
	return string(m[1])
}

// The README's dig commands, answered by the demo cluster over UDP and TCP.
func TestDigDemoCluster(t *testing.T) {
	p := startShardns(t, demoConfig)
	p.waitReady(t)
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
			if got := dig(t, p.addr, args...); !slices.Equal(got, c.want) {
				t.Errorf("dig %v = %q, want %q", args, got, c.want)
			}
		}
	}
	if s := digStatus(t, p.addr, "nope.shop.svc.cluster.local"); s != "NXDOMAIN" {
		t.Errorf("nope.shop: status %s, want NXDOMAIN", s)
	}
	if s := digStatus(t, p.addr, "redis.data.svc.cluster.local", "AAAA"); s != "NOERROR" {
		t.Errorf("AAAA of an IPv4 service: status %s, want NOERROR", s)
	}
}

func TestRingCommand(t *testing.T) {
	p := startShardns(t, demoConfig)
	p.waitReady(t)
	out, err := exec.Command(shardnsBin, "ring", "--http", p.httpAddr(t)).CombinedOutput()
	if err != nil || !strings.Contains(string(out), "shop.svc.cluster.local.") || !strings.Contains(string(out), "(this replica)") {
		t.Fatalf("shardns ring: %v\n%s", err, out)
	}
}

func TestSIGTERMStopsCleanly(t *testing.T) {
	p := startShardns(t, demoConfig)
	p.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case err := <-p.done:
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
	cfg := strings.Replace(demoConfig, `http: {listen: "127.0.0.1:0"}`, `http: {listen: "127.0.0.1:0", lameduck: 3s}`, 1)
	p := startShardns(t, cfg)
	httpAddr := p.httpAddr(t)
	p.cmd.Process.Signal(syscall.SIGTERM)
	testutil.Eventually(t, 2*time.Second, func() error {
		if code := httpStatus(t, "http://"+httpAddr+"/ready"); code != 503 {
			return fmt.Errorf("/ready = %d during lameduck, want 503", code)
		}
		return nil
	})
	if code := httpStatus(t, "http://"+httpAddr+"/health"); code != 200 {
		t.Fatalf("/health = %d during lameduck, want 200", code)
	}
	if got := dig(t, p.addr, "frontend.shop.svc.cluster.local"); !slices.Equal(got, []string{"10.96.10.10"}) {
		t.Fatalf("DNS during lameduck: %q", got)
	}
	select {
	case err := <-p.done:
		if err != nil {
			t.Fatalf("exit after lameduck: %v", err)
		}
	case <-time.After(15 * time.Second):
		t.Fatal("still running 15s after SIGTERM")
	}
}

func TestCheckEmbeddedDemo(t *testing.T) {
	out, err := exec.Command(shardnsBin, "check").CombinedOutput()
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
			out, err := exec.Command(shardnsBin, "serve", "--config", path).CombinedOutput()
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
	out, err := exec.Command(shardnsBin, "serve", "--config", path).CombinedOutput()
	if err == nil {
		t.Fatal("serve accepted ttl 9000")
	}
	if !strings.Contains(string(out), "kubernetes.ttl") {
		t.Fatalf("error does not name the key:\n%s", out)
	}
}
