package overhead

import (
	"os"
	"testing"
	"time"
)

func TestParseStat(t *testing.T) {
	// The fields after the command's name, from field 3, with utime 250
	// and stime 37 ticks.
	const rest = " S 1 1234 1234 0 -1 4194560 1024 0 0 0 250 37 0 0 20 0 8 0 5000 1000000 2000 18446744073709551615"
	tests := []struct {
		name    string
		stat    string
		want    time.Duration
		wantErr bool
	}{
		{name: "utime plus stime", stat: "1234 (gateway)" + rest, want: 2870 * time.Millisecond},
		{name: "a name with spaces and parentheses", stat: "1234 (lab (overhead) x)" + rest, want: 2870 * time.Millisecond},
		{name: "nothing used yet", stat: "1 (init) S 0 1 1 0 -1 4194560 1 0 0 0 0 0 0 0 20 0 1 0 1 1 1", want: 0},
		{name: "no name", stat: "1234 gateway" + rest, wantErr: true},
		{name: "cut short", stat: "1234 (gateway) S 1 1234 1234 0 -1 4194560 1024 0 0 0 250", wantErr: true},
		{name: "ticks that are not a number", stat: "1234 (gateway) S 1 1234 1234 0 -1 4194560 1024 0 0 0 x 37 0", wantErr: true},
		{name: "negative ticks", stat: "1234 (gateway) S 1 1234 1234 0 -1 4194560 1024 0 0 0 -5 37 0", wantErr: true},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got, err := parseStat([]byte(tc.stat))
			if (err != nil) != tc.wantErr || got != tc.want {
				t.Errorf("parseStat(%q) = %s, %v; want %s, error %t", tc.stat, got, err, tc.want, tc.wantErr)
			}
		})
	}
}

func TestCPUTimeOfThisProcess(t *testing.T) {
	if _, err := os.Stat("/proc/self/stat"); err != nil {
		t.Skip("no /proc")
	}
	before, err := cpuTime(os.Getpid())
	if err != nil {
		t.Fatal(err)
	}
	for end := time.Now().Add(5 * time.Second); time.Now().Before(end); { // spinning
		after, err := cpuTime(os.Getpid())
		if err != nil {
			t.Fatal(err)
		}
		if after > before {
			return
		}
	}
	t.Errorf("after 5s of spinning, the CPU time is still %s", before)
}

func TestFirstFields(t *testing.T) {
	tests := []struct{ in, want string }{
		{in: "2.83 3.06 2.61 3/412 12345\n", want: "2.83 3.06 2.61"},
		{in: "0.10  0.20", want: "0.10 0.20"},
		{in: "", want: ""},
	}
	for _, tc := range tests {
		if got := firstFields(tc.in, 3); got != tc.want {
			t.Errorf("firstFields(%q, 3) = %q; want %q", tc.in, got, tc.want)
		}
	}
}

func TestParseRSS(t *testing.T) {
	// status is the start of a /proc/<pid>/status, with rss as its VmRSS
	// line.
	status := func(rss string) string {
		return "Name:\tgateway\nUmask:\t0022\nState:\tS (sleeping)\nVmPeak:\t 1300000 kB\nVmHWM:\t   40000 kB\n" + rss + "RssAnon:\t   20000 kB\nThreads:\t8\n"
	}
	tests := []struct {
		name    string
		status  string
		want    int64
		wantErr bool
	}{
		{name: "in kB, which are KiB", status: status("VmRSS:\t   23456 kB\n"), want: 23456 << 10},
		{name: "nothing resident", status: status("VmRSS:\t       0 kB\n"), want: 0},
		{name: "the last line, unended", status: "Name:\tproxy\nVmRSS:\t12 kB", want: 12 << 10},
		{name: "no VmRSS, as of a zombie", status: status(""), wantErr: true},
		{name: "no unit", status: status("VmRSS:\t   23456\n"), wantErr: true},
		{name: "another unit", status: status("VmRSS:\t   23 MB\n"), wantErr: true},
		{name: "not a number", status: status("VmRSS:\t   lots kB\n"), wantErr: true},
		{name: "negative", status: status("VmRSS:\t   -5 kB\n"), wantErr: true},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got, err := parseRSS([]byte(tc.status))
			if (err != nil) != tc.wantErr || got != tc.want {
				t.Errorf("parseRSS(%q) = %d, %v; want %d, error %t", tc.status, got, err, tc.want, tc.wantErr)
			}
		})
	}
}

func TestResidentMemoryOfThisProcess(t *testing.T) {
	if _, err := os.Stat("/proc/self/status"); err != nil {
		t.Skip("no /proc")
	}
	rss, err := residentMemory(os.Getpid())
	if err != nil {
		t.Fatal(err)
	}
	if rss <= 0 {
		t.Errorf("this process's resident memory = %d bytes; want some", rss)
	}
}
