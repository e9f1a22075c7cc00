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
