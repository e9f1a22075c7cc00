package admission

import (
	"testing"
	"time"
)

func TestRetryAfterIsWholeSecondsAndAtLeastOne(t *testing.T) {
	for _, tc := range []struct{ in, want time.Duration }{
		{0, time.Second}, {time.Millisecond, time.Second}, {time.Second, time.Second}, {1001 * time.Millisecond, 2 * time.Second}, {-time.Second, time.Second},
	} {
		if got := RetryAfter(tc.in); got != tc.want {
			t.Errorf("RetryAfter(%s) = %s; want %s", tc.in, got, tc.want)
		}
	}
}
