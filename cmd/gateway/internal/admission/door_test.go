package admission

import (
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/sluicehq/sluice/cmd/gateway/internal/fairqueue"
)

// TestTheDoorDecidesOnOneValue checks the door's decision as the pure function it is: from one
// arrival, with no queue, store or clock behind it. A call whose wait is within its plan's
// maxWait is let in with that wait, which the queue keeps; past it, or past the shorter bound the
// door keeps while new lanes join, it is told to come back when its wait behind its lane's
// comebacks is down to half the bound, spread over its own slot of the drain but no more than
// the half of the bound left; a call that waited out its maxWait is told the same after
// another wait; a job passes no door; a queue whose drain is unknown turns calls away only when
// it is full.
func TestTheDoorDecidesOnOneValue(t *testing.T) {
	const s = time.Second
	at := func(wait, maxWait time.Duration) arrival {
		return arrival{item: &fairqueue.Item{Cost: 1_000}, maxWait: maxWait, rate: 100, wait: wait, comeback: 30 * s, ahead: 2}
	}
	joining := at(5*s, 10*s)
	joining.growth = 1 // new lanes join: the door promises no more than the horizon
	horizon := fairqueue.Horizon(1)
	unknown, full := at(-1, 10*s), at(-1, 10*s)
	full.full = true
	expired, expiredUnknown := at(4*s, 10*s), at(-1, 10*s)
	expired.expired, expiredUnknown.expired = true, true
	spread := at(15*s, 10*s)
	spread.item.Cost, spread.spread = 400, 0.5 // half of its slot of the drain, 400 tokens at 100 a second: 2 s later
	huge := at(15*s, 10*s)
	huge.item.Cost, huge.spread = 100_000, 0.5 // a slot of 1,000 s, held to half the bound: 2.5 s later
	for _, c := range []struct {
		name string
		a    arrival
		want doorOut
	}{
		{"within maxWait", at(5*s, 10*s), doorOut{wait: 5 * s, promise: true}},
		{"past maxWait", at(15*s, 10*s), doorOut{busy: &Refusal{Reason: Busy, Estimate: 15 * s, MaxWait: 10 * s, Position: 3, RetryAfter: 25 * s}}},
		{"past maxWait, spread", spread, doorOut{busy: &Refusal{Reason: Busy, Estimate: 15 * s, MaxWait: 10 * s, Position: 3, RetryAfter: 27 * s}}},
		{"past maxWait, spread over a slot past the bound", huge, doorOut{busy: &Refusal{Reason: Busy, Estimate: 15 * s, MaxWait: 10 * s, Position: 3, RetryAfter: 28 * s}}},
		{"past the horizon while lanes join", joining, doorOut{busy: &Refusal{Reason: Busy, Estimate: 5 * s, MaxWait: 10 * s, Horizon: horizon, Position: 3,
			RetryAfter: RetryAfter(30*s - horizon/2)}}},
		{"a job", at(100*s, 0), doorOut{wait: 100 * s}},
		{"drain unknown", unknown, doorOut{wait: -1}},
		{"drain unknown, queue full", full, doorOut{busy: &Refusal{Reason: Busy, Estimate: 10 * s, MaxWait: 10 * s, Position: 3, RetryAfter: 25 * s}}},
		{"waited out its maxWait", expired, doorOut{busy: &Refusal{Reason: Busy, Estimate: 14 * s, MaxWait: 10 * s, Position: 3, RetryAfter: 25 * s}}},
		{"waited out its maxWait, drain unknown", expiredUnknown, doorOut{busy: &Refusal{Reason: Busy, Estimate: 20 * s, MaxWait: 10 * s, Position: 3, RetryAfter: 25 * s}}},
	} {
		if diff := cmp.Diff(c.want, c.a.decide(), cmp.AllowUnexported(doorOut{})); diff != "" {
			t.Errorf("%s: the door's answer (-want +got):\n%s", c.name, diff)
		}
	}
}

// TestTheDoorsWaitLeavesOutWhatGoesAtOnce checks the wait the door reckons from its lane's under
// fair sharing: less the time the drain takes for what the provider's limits hold now, which
// goes at once, but never less than the wait for the call's own user's limits; unknown stays
// unknown.
func TestTheDoorsWaitLeavesOutWhatGoesAtOnce(t *testing.T) {
	const s = time.Second
	a := arrival{headroom: 300}
	for _, c := range []struct {
		fair, own, want time.Duration
	}{
		{10 * s, 0, 7 * s}, // 300 tokens at 100 a second go at once
		{2 * s, 0, 0},      // all of it goes at once
		{10 * s, 8 * s, 8 * s},
		{-1, 8 * s, -1},
	} {
		if got := a.waitOf(c.fair, 100, c.own); got != c.want {
			t.Errorf("fair %s, own %s: wait %s; want %s", c.fair, c.own, got, c.want)
		}
	}
}
