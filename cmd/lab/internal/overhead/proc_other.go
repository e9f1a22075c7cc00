//go:build !linux

package overhead

import "syscall"

// sysProcAttr is nothing special: only Linux stops a child when its parent
// dies. The bare proxy still stops when its stdin closes.
func sysProcAttr() *syscall.SysProcAttr { return nil }
