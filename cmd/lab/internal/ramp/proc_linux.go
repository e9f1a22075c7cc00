package ramp

import "syscall"

// sysProcAttr has the kernel stop the gateway if the ramp dies without
// stopping it.
func sysProcAttr() *syscall.SysProcAttr {
	return &syscall.SysProcAttr{Pdeathsig: syscall.SIGTERM}
}
