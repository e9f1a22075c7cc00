//go:build !linux

package overhead

import (
	"errors"
	"syscall"
)

// sysProcAttr is nothing special: only Linux stops a child when its parent
// dies. The bare proxy still stops when its stdin closes.
func sysProcAttr() *syscall.SysProcAttr { return nil }

// The CPUs of a pinned run; only Linux pins.
const (
	loadCPU   = 0
	targetCPU = 1
)

// ownCPUs is nil: only Linux pins.
func ownCPUs() []int { return nil }

// pin is refused: only Linux pins.
func pin(pid int, cpus ...int) error {
	return errors.New("overhead: pinning a process is for Linux only")
}
