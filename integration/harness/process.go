package harness

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/shardns/shardns/internal/testutil"
)

// Process is a running shardns binary.
type Process struct {
	Cmd     *exec.Cmd
	Addr    string        // DNS address, the first of its started line
	started chan struct{} // closed once http holds the started line's HTTP address
	http    string
	Done    chan error
	Log     testutil.SyncBuffer // what it wrote to stderr
}

// WaitLog waits until the Process has written a line containing s.
func (p *Process) WaitLog(t testing.TB, s string, timeout time.Duration) {
	t.Helper()
	testutil.Eventually(t, timeout, func() error {
		if !strings.Contains(p.Log.String(), s) {
			return fmt.Errorf("no log line with %q yet", s)
		}
		return nil
	})
}

// WaitReady waits until /ready answers 200.
func (p *Process) WaitReady(t testing.TB) {
	t.Helper()
	addr := p.HTTPAddr(t)
	testutil.Eventually(t, 20*time.Second, func() error {
		if code := HTTPStatus(t, "http://"+addr+"/ready"); code != 200 {
			return fmt.Errorf("/ready = %d", code)
		}
		return nil
	})
}

// HTTPAddr is the HTTP address from the "shardns started" log line.
func (p *Process) HTTPAddr(t testing.TB) string {
	t.Helper()
	select {
	case <-p.started:
		return p.http
	case <-time.After(20 * time.Second):
		t.Fatal("no started line with the HTTP address")
	}
	return ""
}

var (
	startedRE = regexp.MustCompile(`msg="shardns started".* http=(\S+)`)
	// firstDNSRE is the first DNS address of the started line, which lists
	// them in the configuration's order (an IPv6 one as [::1]:port). It is
	// the only source of a Process's address: a Process listening on
	// several addresses logs its listening lines in whatever order its
	// listeners start, before the started line.
	firstDNSRE = regexp.MustCompile(`msg="shardns started".* dns="?\[(\[[^\]]+\]:\d+|[^ \]"]+)`)
)

// Options say how Start runs shardns. Config, Args and Cmd are
// alternatives, tried in that order; with none of them the Process
// serves DemoConfig.
type Options struct {
	// Config is a configuration file's text, written next to a copy of
	// the demo cluster (so that `manifests: {files: [demo-cluster.yaml]}`
	// finds it) and served with `shardns serve --config`.
	Config string
	// Args are the arguments of `shardns serve` (flags, a --corefile).
	Args []string
	// Dir is the working directory, "" for the test's own: the folder
	// relative paths of a configuration are read from, as CoreDNS reads
	// a Corefile's.
	Dir string
	// Cmd is a command that is, or execs, a shardns serve (such as `ip
	// netns exec`), run as it is.
	Cmd *exec.Cmd
}

// Start runs shardns as o says, waits for its started line and stops it
// (SIGTERM, then SIGKILL after 10 s) when the test ends.
func Start(t testing.TB, o Options) *Process {
	t.Helper()
	p, err := TryStart(t, o)
	if err != nil {
		t.Fatal(err)
	}
	return p
}

// TryStart is Start that returns, rather than fails on, a Process that
// exits before listening: ErrPortTaken when it could not bind an address
// it was given.
func TryStart(t testing.TB, o Options) (*Process, error) {
	t.Helper()
	cmd := o.Cmd
	if cmd == nil {
		args := o.Args
		if args == nil {
			config := o.Config
			if config == "" {
				config = DemoConfig
			}
			args = []string{"--config", writeConfig(t, config)}
		}
		cmd = exec.Command(Bin, append([]string{"serve"}, args...)...)
		cmd.Dir = o.Dir
	}
	return tryStartCmd(t, cmd)
}

// writeConfig writes text as shardns.yaml in a new folder beside a copy
// of the demo cluster and returns its path.
func writeConfig(t testing.TB, text string) string {
	t.Helper()
	dir := t.TempDir()
	demo, err := os.ReadFile(filepath.Join(Root(t), "deploy", "local", "demo-cluster.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "demo-cluster.yaml"), demo, 0o644); err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(dir, "shardns.yaml")
	if err := os.WriteFile(path, []byte(text), 0o644); err != nil {
		t.Fatal(err)
	}
	return path
}

// ErrPortTaken says a Process exited because an address it was given
// was bound by another Process meanwhile: the tests choose free ports
// before a Process binds them, and another Process (an outgoing
// connection's ephemeral port) may take one in between.
var ErrPortTaken = errors.New("a port chosen for shardns was taken before it bound it")

// TryStartCmd runs cmd and waits for its started line; see TryStart.
func tryStartCmd(t testing.TB, cmd *exec.Cmd) (*Process, error) {
	t.Helper()
	stderr, err := cmd.StderrPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	p := &Process{Cmd: cmd, Done: make(chan error, 1), started: make(chan struct{})}
	addrc := make(chan string, 1)
	var portTaken atomic.Bool
	scanned := make(chan struct{})
	go func() {
		defer close(scanned)
		sc := bufio.NewScanner(stderr)
		for sc.Scan() {
			t.Log(sc.Text())
			fmt.Fprintln(&p.Log, sc.Text())
			if strings.Contains(sc.Text(), "bind: address already in use") {
				portTaken.Store(true)
			}
			if m := firstDNSRE.FindStringSubmatch(sc.Text()); m != nil {
				select {
				case addrc <- m[1]:
				default:
				}
			}
			if m := startedRE.FindStringSubmatch(sc.Text()); m != nil && p.http == "" {
				p.http = m[1]
				close(p.started)
			}
		}
		io.Copy(io.Discard, stderr)
	}()
	go func() { p.Done <- cmd.Wait() }()
	t.Cleanup(func() {
		cmd.Process.Signal(syscall.SIGTERM)
		select {
		case <-p.Done:
		case <-time.After(10 * time.Second):
			cmd.Process.Kill()
		}
	})
	select {
	case p.Addr = <-addrc:
	case err := <-p.Done:
		<-scanned // every line it wrote is read
		if portTaken.Load() {
			return nil, ErrPortTaken
		}
		return nil, fmt.Errorf("shardns exited before listening: %v", err)
	case <-time.After(20 * time.Second):
		return nil, errors.New("shardns did not start listening within 20s")
	}
	return p, nil
}

// DemoConfig serves the demo cluster from one Process, on loopback
// ports of the kernel's choice, without Kubernetes or upstreams.
const DemoConfig = `
dns: {listen: ["127.0.0.1:0"]}
http: {listen: "127.0.0.1:0"}
kubernetes: {enabled: false}
manifests: {files: [demo-cluster.yaml]}
cluster: {replicationFactor: 0}
forward: {upstreams: []}
`
