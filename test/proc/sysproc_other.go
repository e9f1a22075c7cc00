//go:build !linux

package proc

import "syscall"

// sysProcAttr puts the child in a process group of its own, so Stop reaches its children.
func sysProcAttr() *syscall.SysProcAttr {
	return &syscall.SysProcAttr{Setpgid: true}
}
