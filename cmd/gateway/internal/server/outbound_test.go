package server

import (
	"errors"
	"testing"
	"testing/synctest"
	"time"
)

// TestTimeouts checks when a call's timeouts end it, and with which cause, on a fake clock.
func TestTimeouts(t *testing.T) {
	const call, stall = time.Minute, 10 * time.Second
	tests := []struct {
		name string
		// begun is when the answer begins; zero for never. reads are when it brings bytes.
		begun   time.Duration
		reads   []time.Duration
		stop    time.Duration // when the call ends on its own; zero for never
		want    error
		wantAt  time.Duration
		wantEnd bool
	}{{
		name: "no answer: cut at callTimeout",
		want: errCallTimeout, wantAt: call, wantEnd: true,
	}, {
		name: "an answer that stalls at once: cut at stallTimeout from its beginning", begun: 5 * time.Second,
		want: errProviderStalled, wantAt: 15 * time.Second, wantEnd: true,
	}, {
		name: "an answer that stalls: cut at stallTimeout from its last read", begun: 5 * time.Second,
		reads: []time.Duration{6 * time.Second, 14 * time.Second, 23 * time.Second},
		want:  errProviderStalled, wantAt: 33 * time.Second, wantEnd: true,
	}, {
		name: "an answer that never ends: cut at callTimeout", begun: time.Second,
		reads: everySecond(2*time.Second, 2*call),
		want:  errCallTimeout, wantAt: call, wantEnd: true,
	}, {
		name: "an answer that begins late: callTimeout comes before stallTimeout", begun: 55 * time.Second,
		want: errCallTimeout, wantAt: call, wantEnd: true,
	}, {
		name: "a call that ends in time", begun: time.Second, reads: []time.Duration{9 * time.Second}, stop: 12 * time.Second,
	}, {
		name: "a call that ends as it is stalling", begun: time.Second, stop: 11*time.Second - time.Nanosecond,
	}}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				type ending struct {
					cause error
					at    time.Duration
				}
				ended := make(chan ending, 2)
				start := time.Now()
				var tm timeouts
				tm.start(call, stall, func(cause error) { ended <- ending{cause, time.Since(start)} })
				if tc.begun > 0 {
					time.Sleep(tc.begun)
					tm.answerBegun()
				}
				for _, at := range tc.reads {
					time.Sleep(at - time.Since(start))
					tm.read()
				}
				if tc.stop > 0 {
					time.Sleep(tc.stop - time.Since(start))
					tm.stop()
				}
				time.Sleep(2 * call)
				tm.stop()
				select {
				case e := <-ended:
					if !tc.wantEnd || !errors.Is(e.cause, tc.want) || e.at != tc.wantAt {
						t.Errorf("the call ended at %v with %v; want %v at %v (ended: %v)", e.at, e.cause, tc.want, tc.wantAt, tc.wantEnd)
					}
				default:
					if tc.wantEnd {
						t.Errorf("the call did not end; want %v at %v", tc.want, tc.wantAt)
					}
				}
				if len(ended) > 0 {
					t.Errorf("the call ended more than once")
				}
			})
		})
	}
}

// everySecond is a read every second from first until before last.
func everySecond(first, last time.Duration) []time.Duration {
	var reads []time.Duration
	for at := first; at < last; at += time.Second {
		reads = append(reads, at)
	}
	return reads
}
