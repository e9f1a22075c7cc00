package overhead

import "syscall"

// sysProcAttr has the kernel stop a child if the run dies without stopping
// it.
func sysProcAttr() *syscall.SysProcAttr {
	return &syscall.SysProcAttr{Pdeathsig: syscall.SIGTERM}
}
