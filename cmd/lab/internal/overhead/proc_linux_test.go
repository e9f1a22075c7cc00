package overhead

import (
	"os/exec"
	"slices"
	"testing"

	"golang.org/x/sys/unix"
)

func TestPinKeepsAProcessOnTheCPUsGiven(t *testing.T) {
	cpus := ownCPUs()
	if len(cpus) < 2 {
		t.Skipf("this process may run on CPUs %v; pinning needs two", cpus)
	}
	cmd := exec.Command("sleep", "30")
	if err := cmd.Start(); err != nil {
		t.Skipf("no sleep to pin: %v", err)
	}
	defer cmd.Process.Kill()
	if err := pin(cmd.Process.Pid, cpus[1]); err != nil {
		t.Fatal(err)
	}
	var set unix.CPUSet
	if err := unix.SchedGetaffinity(cmd.Process.Pid, &set); err != nil {
		t.Fatal(err)
	}
	if set.Count() != 1 || !set.IsSet(cpus[1]) {
		t.Errorf("process pinned to CPU %d may run on %d CPUs, CPU %d among them: %v", cpus[1], set.Count(), cpus[1], set.IsSet(cpus[1]))
	}
	if !slices.Equal(ownCPUs(), cpus) {
		t.Errorf("pinning a child moved this process: CPUs %v, before %v", ownCPUs(), cpus)
	}
}
