package kubenode

import (
	"fmt"
	"os"
	"os/exec"
	"strings"
	"syscall"
	"time"

	"github.com/shardns/shardns/integration/kubeapi"
)

// proc is a running server of the node whose output goes to a log file.
type proc struct {
	name string
	log  string
	cmd  *exec.Cmd
	done chan struct{} // closed when the process has exited
	err  error         // Wait's error, set before done is closed
}

// startProc starts bin with args, its stdout and stderr appended to
// logPath. The kernel kills it when the test binary dies without its
// cleanups (Pdeathsig), so no control plane outlives a killed run; what
// the servers started themselves (containerd's shims, the pods) does, and
// is what removeLeftovers is for.
func startProc(name, logPath, bin string, args ...string) (*proc, error) {
	f, err := os.OpenFile(logPath, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return nil, err
	}
	defer f.Close() // the child has its own descriptor
	fmt.Fprintf(f, "=== kubenode: %s: %s %s\n", time.Now().Format(time.RFC3339Nano), bin, strings.Join(args, " "))
	cmd := exec.Command(bin, args...)
	cmd.Stdout, cmd.Stderr = f, f
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	if err := cmd.Start(); err != nil {
		return nil, fmt.Errorf("kubenode: starting %s: %w", name, err)
	}
	p := &proc{name: name, log: logPath, cmd: cmd, done: make(chan struct{})}
	go func() {
		p.err = cmd.Wait()
		close(p.done)
	}()
	return p, nil
}

// waitReady polls ready every 200ms until it returns nil, the process exits
// or timeout passes. Its errors carry ready's last error and the end of
// the log.
func (p *proc) waitReady(timeout time.Duration, ready func() error) error {
	deadline := time.Now().Add(timeout)
	tick := time.NewTicker(200 * time.Millisecond)
	defer tick.Stop()
	for {
		err := ready()
		if err == nil {
			return nil
		}
		select {
		case <-p.done:
			return fmt.Errorf("kubenode: %s exited before it was ready (%v); last %d lines of %s:\n%s",
				p.name, p.err, logTailLines, p.log, kubeapi.Tail(p.log, logTailLines))
		case <-tick.C:
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("kubenode: %s not ready after %v (%v); last %d lines of %s:\n%s",
				p.name, timeout, err, logTailLines, p.log, kubeapi.Tail(p.log, logTailLines))
		}
	}
}

// exited reports whether the process has exited, with its error.
func (p *proc) exited() (bool, error) {
	select {
	case <-p.done:
		return true, p.err
	default:
		return false, nil
	}
}

// stop sends SIGTERM, waits up to grace for the process to exit, then
// kills it and waits again. It does nothing on a nil or exited process.
func (p *proc) stop(grace time.Duration) {
	if p == nil {
		return
	}
	_ = p.cmd.Process.Signal(syscall.SIGTERM) // fails only if it has exited
	timer := time.NewTimer(grace)
	defer timer.Stop()
	select {
	case <-p.done:
		return
	case <-timer.C:
	}
	_ = p.cmd.Process.Kill()
	<-p.done
}

// run runs a command to completion and returns its combined output, with
// the command line in its error.
func run(name string, args ...string) (string, error) {
	out, err := exec.Command(name, args...).CombinedOutput()
	if err != nil {
		return string(out), fmt.Errorf("%s %s: %v: %s", name, strings.Join(args, " "), err, strings.TrimSpace(string(out)))
	}
	return string(out), nil
}
