package overhead

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"strconv"
	"strings"
	"time"
)

// clockTicks is the kernel's USER_HZ, the unit of utime and stime in
// /proc/<pid>/stat: 100 on every architecture Go runs Linux on.
const clockTicks = 100

// cpuTime is the CPU time, user and system, that process pid has used so
// far, all its threads together.
func cpuTime(pid int) (time.Duration, error) {
	data, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return 0, fmt.Errorf("overhead: CPU time of process %d: %w", pid, err)
	}
	return parseStat(data)
}

// parseStat reads utime plus stime, fields 14 and 15, from the text of
// /proc/<pid>/stat. The second field, the command's name in parentheses,
// may itself hold spaces and parentheses, so fields are counted from the
// last ')'.
func parseStat(data []byte) (time.Duration, error) {
	end := bytes.LastIndexByte(data, ')')
	if end < 0 {
		return 0, errors.New("overhead: /proc stat: no command name")
	}
	fields := strings.Fields(string(data[end+1:])) // from field 3, the state
	if len(fields) < 13 {
		return 0, fmt.Errorf("overhead: /proc stat: %d fields after the command name, want at least 13", len(fields))
	}
	var ticks int64
	for _, f := range fields[11:13] {
		n, err := strconv.ParseInt(f, 10, 64)
		if err != nil || n < 0 {
			return 0, fmt.Errorf("overhead: /proc stat: CPU ticks %q", f)
		}
		ticks += n
	}
	return time.Duration(ticks) * time.Second / clockTicks, nil
}

// residentMemory is the memory of process pid resident in RAM, in bytes:
// VmRSS in /proc/<pid>/status.
func residentMemory(pid int) (int64, error) {
	data, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return 0, fmt.Errorf("overhead: resident memory of process %d: %w", pid, err)
	}
	return parseRSS(data)
}

// parseRSS reads VmRSS from the text of /proc/<pid>/status, a line such as
// "VmRSS:	   23456 kB", in bytes. The kernel writes it in kB, which are
// KiB.
func parseRSS(data []byte) (int64, error) {
	for line := range strings.Lines(string(data)) {
		value, found := strings.CutPrefix(line, "VmRSS:")
		if !found {
			continue
		}
		fields := strings.Fields(value)
		if len(fields) != 2 || fields[1] != "kB" {
			return 0, fmt.Errorf("overhead: /proc status: VmRSS %q", strings.TrimSpace(value))
		}
		kib, err := strconv.ParseInt(fields[0], 10, 64)
		if err != nil || kib < 0 {
			return 0, fmt.Errorf("overhead: /proc status: VmRSS %q", strings.TrimSpace(value))
		}
		return kib << 10, nil
	}
	return 0, errors.New("overhead: /proc status: no VmRSS")
}

// loadAverage is the machine's load average over 1, 5 and 15 minutes, as
// /proc/loadavg gives them; empty if it cannot be read.
func loadAverage() string {
	data, err := os.ReadFile("/proc/loadavg")
	if err != nil {
		return ""
	}
	return firstFields(string(data), 3)
}

// firstFields is the first n fields of s, joined by single spaces.
func firstFields(s string, n int) string {
	f := strings.Fields(s)
	return strings.Join(f[:min(n, len(f))], " ")
}
