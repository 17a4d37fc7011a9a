package kubeapi

import (
	"os"
	"syscall"
)

// sysProcAttr makes the kernel kill a server when the test binary dies
// without its cleanups running (a -timeout panic, os.Exit, a kill), so that
// no etcd or apiserver outlives it. The signal is tied to the OS thread that
// started the server, which the Go runtime ends only for a goroutine that
// exits while locked to its thread; the tests here do not do that.
func sysProcAttr() *syscall.SysProcAttr {
	return &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
}

// LockFile takes an exclusive lock on the file at path, waiting for other
// processes holding it, and returns its release. The node tier
// (integration/kubenode) takes the same locks.
func LockFile(path string) (unlock func(), err error) {
	f, err := os.OpenFile(path, os.O_CREATE|os.O_RDWR, 0o666)
	if err != nil {
		return nil, err
	}
	if err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX); err != nil {
		f.Close()
		return nil, err
	}
	// Closing the file releases the lock.
	return func() { f.Close() }, nil
}
