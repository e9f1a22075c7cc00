// Package poll waits, in a test, for what comes true in its own time: a status a controller
// writes, a line in a process's log, a replica an autoscaler adds.
package poll

import (
	"testing"
	"time"
)

// Interval is the pause between two checks of a condition.
const Interval = 100 * time.Millisecond

// Until checks cond at once, then every Interval, until it holds, and fails t if it has not held
// within timeout. what names what the test waits for, as in "timed out after 30s waiting for
// what". cond runs on the calling goroutine, so it may fail t itself.
func Until(t testing.TB, timeout time.Duration, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(timeout)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out after %s waiting for %s", timeout, what)
		}
		time.Sleep(Interval)
	}
}
