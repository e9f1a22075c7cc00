//go:build unix

package main

import "syscall"

// descriptorLimit is the most file descriptors the process may open, and whether it is known.
// Go raises the soft limit to the hard one at start, so this is what the process has.
func descriptorLimit() (uint64, bool) {
	var l syscall.Rlimit
	if err := syscall.Getrlimit(syscall.RLIMIT_NOFILE, &l); err != nil {
		return 0, false
	}
	return uint64(l.Cur), true
}
