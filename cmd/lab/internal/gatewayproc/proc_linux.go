package gatewayproc

import "syscall"

// sysProcAttr has the kernel stop the gateway if the lab dies without
// stopping it.
func sysProcAttr() *syscall.SysProcAttr {
	return &syscall.SysProcAttr{Pdeathsig: syscall.SIGTERM}
}
