//go:build !linux

package proc

import "syscall"

// sysProcAttr returns attr (or new attributes when nil) with the child in a process group of its
// own, so Stop reaches its children.
func sysProcAttr(attr *syscall.SysProcAttr) *syscall.SysProcAttr {
	if attr == nil {
		attr = &syscall.SysProcAttr{}
	}
	attr.Setpgid = true
	return attr
}
