package kubeapi

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"strings"
	"syscall"
	"time"
)

// harness.ErrPortTaken marks a server that exited because its port was taken, which
// a first start retries on another port.
var errPortTaken = errors.New("port already in use")

// process is a running server whose output goes to a log file.
type process struct {
	name   string
	log    string
	offset int64 // size of the log before this run, to tell its lines apart
	cmd    *exec.Cmd
	done   chan struct{} // closed when the process has exited
	err    error         // Wait's error, set before done is closed
}

// startProcess starts bin with args, appending its stdout and stderr to the
// log file at logPath after a header line, so that the log of a restarted
// server keeps the previous runs.
func startProcess(name, logPath, bin string, args ...string) (*process, error) {
	f, err := os.OpenFile(logPath, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return nil, err
	}
	defer f.Close() // the child has its own descriptor
	st, err := f.Stat()
	if err != nil {
		return nil, err
	}
	fmt.Fprintf(f, "=== kubeapi: %s: %s %s\n", time.Now().Format(time.RFC3339Nano), bin, strings.Join(args, " "))
	cmd := exec.Command(bin, args...)
	// An *os.File is handed to the child as is: no copying goroutine, so
	// Wait returns as soon as the process exits.
	cmd.Stdout, cmd.Stderr = f, f
	cmd.SysProcAttr = sysProcAttr()
	if err := cmd.Start(); err != nil {
		return nil, fmt.Errorf("kubeapi: starting %s: %w", name, err)
	}
	p := &process{name: name, log: logPath, offset: st.Size(), cmd: cmd, done: make(chan struct{})}
	go func() {
		p.err = cmd.Wait()
		close(p.done)
	}()
	return p, nil
}

// waitReady polls ready until it reports true, the process exits or timeout
// passes. Its errors carry the end of the log.
func (p *process) waitReady(timeout time.Duration, ready func() bool) error {
	deadline := time.Now().Add(timeout)
	tick := time.NewTicker(100 * time.Millisecond)
	defer tick.Stop()
	for {
		if ready() {
			return nil
		}
		select {
		case <-p.done:
			err := fmt.Errorf("kubeapi: %s exited before it was ready (%v); last %d lines of %s:\n%s",
				p.name, p.err, logTailLines, p.log, Tail(p.log, logTailLines))
			if p.logSinceStartContains("address already in use") {
				err = fmt.Errorf("%w: %w", errPortTaken, err)
			}
			return err
		case <-tick.C:
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("kubeapi: %s not ready after %v; last %d lines of %s:\n%s",
				p.name, timeout, logTailLines, p.log, Tail(p.log, logTailLines))
		}
	}
}

// stop sends SIGTERM, waits up to grace for the process to exit, then kills
// it and waits again. It does nothing on a nil or exited process.
func (p *process) stop(grace time.Duration) {
	if p == nil {
		return
	}
	// Errors only say that the process has already exited.
	_ = p.cmd.Process.Signal(syscall.SIGTERM)
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

// logSinceStartContains reports whether this run's part of the log
// contains s.
func (p *process) logSinceStartContains(s string) bool {
	f, err := os.Open(p.log)
	if err != nil {
		return false
	}
	defer f.Close()
	if _, err := f.Seek(p.offset, io.SeekStart); err != nil {
		return false
	}
	b, err := io.ReadAll(f)
	return err == nil && bytes.Contains(b, []byte(s))
}

// Tail returns the last n lines of the file at path, reading at most its
// last 256 KiB (apiserver logs grow large), or a note on why it cannot.
// The node tier (integration/kubenode) shows its components' logs with it.
func Tail(path string, n int) string {
	f, err := os.Open(path)
	if err != nil {
		return fmt.Sprintf("(no log: %v)", err)
	}
	defer f.Close()
	const maxRead = 256 << 10
	if st, err := f.Stat(); err == nil && st.Size() > maxRead {
		f.Seek(st.Size()-maxRead, io.SeekStart)
	}
	b, err := io.ReadAll(f)
	if err != nil {
		return fmt.Sprintf("(reading log: %v)", err)
	}
	lines := strings.Split(strings.TrimRight(string(b), "\n"), "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, "\n")
}
