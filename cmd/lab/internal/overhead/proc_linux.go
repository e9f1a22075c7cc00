package overhead

import (
	"fmt"
	"os"
	"strconv"
	"syscall"

	"golang.org/x/sys/unix"
)

// sysProcAttr has the kernel stop a child if the run dies without stopping
// it.
func sysProcAttr() *syscall.SysProcAttr {
	return &syscall.SysProcAttr{Pdeathsig: syscall.SIGTERM}
}

// The CPUs of a pinned run: the load and the stub on loadCPU, the target
// measured on targetCPU, so that neither takes the other's core.
const (
	loadCPU   = 0
	targetCPU = 1
)

// ownCPUs are the CPUs this process may run on, which a pinned run needs
// loadCPU and targetCPU among, and restores when it ends; nil if unknown.
func ownCPUs() []int {
	var set unix.CPUSet
	if err := unix.SchedGetaffinity(0, &set); err != nil {
		return nil
	}
	var cpus []int
	for cpu := range 64 * len(set) { // a CPUSet is a bitmask of uint64s
		if set.IsSet(cpu) {
			cpus = append(cpus, cpu)
		}
	}
	return cpus
}

// pin keeps every thread of process pid on cpus; the threads it starts
// later inherit them. A Go program started by a process pinned to one CPU
// runs with GOMAXPROCS 1.
func pin(pid int, cpus ...int) error {
	var set unix.CPUSet
	for _, cpu := range cpus {
		set.Set(cpu)
	}
	tasks, err := os.ReadDir(fmt.Sprintf("/proc/%d/task", pid))
	if err != nil {
		return fmt.Errorf("overhead: threads of process %d: %w", pid, err)
	}
	for _, task := range tasks {
		tid, err := strconv.Atoi(task.Name())
		if err != nil {
			continue
		}
		if err := unix.SchedSetaffinity(tid, &set); err != nil && err != unix.ESRCH { // ESRCH: the thread has ended
			return fmt.Errorf("overhead: pin thread %d of process %d to CPUs %v: %w", tid, pid, cpus, err)
		}
	}
	return nil
}
