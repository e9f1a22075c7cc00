package poll

import (
	"fmt"
	"runtime"
	"testing"
	"testing/synctest"
	"time"
)

// fatalT records the message Fatalf fails with, and stops the goroutine as testing.T does.
type fatalT struct {
	testing.TB
	failed string
}

func (f *fatalT) Helper() {}

func (f *fatalT) Fatalf(format string, args ...any) {
	f.failed = fmt.Sprintf(format, args...)
	runtime.Goexit()
}

func TestUntil(t *testing.T) {
	tests := []struct {
		name string
		// holdsAt is the check at which the condition first holds, counting from 1; 0 for never.
		holdsAt    int
		wantChecks int
		wantAfter  time.Duration
		wantFailed string
	}{
		{name: "holds at once", holdsAt: 1, wantChecks: 1, wantAfter: 0},
		{name: "holds at the third check", holdsAt: 3, wantChecks: 3, wantAfter: 2 * Interval},
		{name: "never holds", wantChecks: 12, wantAfter: time.Second + Interval,
			wantFailed: "timed out after 1s waiting for the sky to fall"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				ft := &fatalT{TB: t}
				checks := 0
				start := time.Now()
				done := make(chan struct{})
				go func() {
					defer close(done)
					Until(ft, time.Second, "the sky to fall", func() bool { checks++; return checks == tc.holdsAt })
				}()
				<-done
				if after := time.Since(start); checks != tc.wantChecks || after != tc.wantAfter || ft.failed != tc.wantFailed {
					t.Errorf("Until: %d checks over %s, failed %q; want %d over %s, failed %q",
						checks, after, ft.failed, tc.wantChecks, tc.wantAfter, tc.wantFailed)
				}
			})
		})
	}
}
