//go:build !linux

package gatewayproc

import "syscall"

// sysProcAttr is nothing special: only Linux stops a child when its
// parent dies.
func sysProcAttr() *syscall.SysProcAttr { return nil }
