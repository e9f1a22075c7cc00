package proc

import "syscall"

// sysProcAttr puts the child in a process group of its own, so Stop reaches its children, and
// has the kernel kill it if the test process dies without stopping it (a panic, a timeout).
func sysProcAttr() *syscall.SysProcAttr {
	return &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
}
