//go:build !linux

package kubeapi

import "syscall"

// sysProcAttr has nothing to add where there is no parent-death signal:
// servers of a test binary that dies without its cleanups keep running.
func sysProcAttr() *syscall.SysProcAttr { return nil }

// LockFile does not lock: concurrent first builds of the apiserver are only
// guarded on Linux, where the tests run.
func LockFile(string) (unlock func(), err error) { return func() {}, nil }
