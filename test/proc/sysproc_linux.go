package proc

import "syscall"

// sysProcAttr returns attr (or new attributes when nil) with the child in a process group of its
// own, so Stop reaches its children, and killed by the kernel if the test process dies without
// stopping it (a panic, a timeout).
func sysProcAttr(attr *syscall.SysProcAttr) *syscall.SysProcAttr {
	if attr == nil {
		attr = &syscall.SysProcAttr{}
	}
	attr.Setpgid, attr.Pdeathsig = true, syscall.SIGKILL
	return attr
}
