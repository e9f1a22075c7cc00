package labrun

import (
	"context"
	"fmt"
	"testing"
	"testing/synctest"
	"time"
)

func TestSleepUntil(t *testing.T) {
	tests := []struct {
		name string
		// in is how far ahead the wake-up is; cancelIn when ctx ends, 0 for never.
		in, cancelIn time.Duration
		want         string // what SleepUntil reported, after how long
	}{
		{name: "wakes at its time", in: time.Second, want: "true after 1s"},
		{name: "a time passed returns at once", in: -time.Second, want: "true after 0s"},
		{name: "ctx ending first wakes it", in: time.Minute, cancelIn: time.Second, want: "false after 1s"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				ctx, cancel := context.WithCancel(t.Context())
				defer cancel()
				if tc.cancelIn > 0 {
					time.AfterFunc(tc.cancelIn, cancel)
				}
				start := time.Now()
				ok := SleepUntil(ctx, start.Add(tc.in))
				if got := fmt.Sprintf("%t after %s", ok, time.Since(start)); got != tc.want {
					t.Errorf("SleepUntil = %s; want %s", got, tc.want)
				}
			})
		})
	}
}

func TestSleepUntilAnEndedContext(t *testing.T) {
	ctx, cancel := context.WithCancel(t.Context())
	cancel()
	if SleepUntil(ctx, time.Now().Add(-time.Second)) {
		t.Error("SleepUntil with ctx ended = true; want false")
	}
}
