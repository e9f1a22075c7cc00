package labrun

import (
	"context"
	"time"
)

// SleepUntil waits until t and reports whether ctx was still going then. It returns false as
// soon as ctx ends, and at once for a t that has passed only if ctx has ended.
func SleepUntil(ctx context.Context, t time.Time) bool {
	timer := time.NewTimer(time.Until(t))
	defer timer.Stop()
	select {
	case <-timer.C:
		return ctx.Err() == nil
	case <-ctx.Done():
		return false
	}
}
