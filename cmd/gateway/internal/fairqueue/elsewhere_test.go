package fairqueue

import (
	"testing"
	"time"
)

// TestBacklogCountsQueuedAndExpectedLanes checks what a queue says waits in it: its queued items,
// the comebacks it expects within their grace, and the user lanes they are in, a lane both queued
// and expected counted once.
func TestBacklogCountsQueuedAndExpectedLanes(t *testing.T) {
	q := New(Options{})
	q.Push(item("a", "queued", 1, Interactive, 1000))
	q.Push(item("a", "queued", 1, Interactive, 1000))
	q.Expect(item("a", "queued", 1, Interactive, 500), t0, t0.Add(time.Second))
	q.Expect(item("b", "away", 1, Batch, 300), t0, t0.Add(5*time.Second))
	q.Expect(item("b", "gone", 1, Batch, 300), t0, t0.Add(-ComebackGrace-time.Second))
	want := Backlog{Lanes: 2, Queued: Load{Calls: 2, Tokens: 2000}}
	for h := range DueHorizons { // the one due in 1 s within each, the one due in 5 s too
		want.Expected[h] = Load{Calls: 2, Tokens: 800}
	}
	if got := q.Backlog(t0); got != want {
		t.Errorf("Backlog = %+v; want %+v", got, want)
	}
}

// TestComebackWaitCountsTheLanesOfOtherGateways checks that an item turned away waits for the
// turns the lanes waiting on other gateways take before it, each up to what it has, where an
// item let in now reckons with its own gateway's drain alone: a user with three items of
// 1,000 tokens here, beside a gateway with two lanes of four items of 1,000 and one with a lane of
// one item of 20,000, at 1,000 tokens a second. Its third item waits for its own 3,000 and two
// turns and a half of each other lane, up to what it has: 5,000 of the first gateway and 20,000
// of the second; its first for its own 1,000 and half a turn of each: 1,000 and 10,000.
func TestComebackWaitCountsTheLanesOfOtherGateways(t *testing.T) {
	q := New(Options{})
	mine := tenItems("a", "me", 1000)[:3]
	for _, it := range mine {
		q.Push(it)
	}
	q.SetElsewhere([]Backlog{{Lanes: 2, Queued: Load{Calls: 8, Tokens: 8000}}, {Lanes: 1, Queued: Load{Calls: 1, Tokens: 20_000}}})
	if got, want := q.ComebackWait(mine[2], 1000, t0), 28*time.Second; got != want {
		t.Errorf("ComebackWait of the third item = %v; want %v", got, want)
	}
	if got, want := q.ComebackWait(mine[0], 1000, t0), 12*time.Second; got != want {
		t.Errorf("ComebackWait of the first item = %v; want %v", got, want)
	}
	if got, want := q.EstimateWait(mine[2], 1000, t0), 3*time.Second; got != want {
		t.Errorf("EstimateWait of the third item = %v; want %v, its gateway's alone", got, want)
	}
	q.SetElsewhere(nil)
	if got, want := q.ComebackWait(mine[2], 1000, t0), 3*time.Second; got != want {
		t.Errorf("alone: %v; want %v", got, want)
	}
}

// TestComebackWaitCountsTheOtherGatewaysComebacksDueInTime checks that the comebacks another gateway
// expects count in an item's wait only when they are due within it: a lane of ten calls of 1,000
// tokens expected back in five minutes does not hold an item of 1,000 tokens now, and one expected
// back at once takes its turns.
func TestComebackWaitCountsTheOtherGatewaysComebacksDueInTime(t *testing.T) {
	q := New(Options{})
	mine := tenItems("a", "me", 1000)[:3]
	for _, it := range mine {
		q.Push(it)
	}
	later := Backlog{Lanes: 1}
	later.Expected[len(DueHorizons)-1] = Load{Calls: 10, Tokens: 10_000}
	q.SetElsewhere([]Backlog{later})
	if got, want := q.ComebackWait(mine[2], 1000, t0), 3*time.Second; got != want {
		t.Errorf("beside comebacks due in five minutes: %v; want %v", got, want)
	}
	soon := Backlog{Lanes: 1}
	for h := range DueHorizons {
		soon.Expected[h] = Load{Calls: 10, Tokens: 10_000}
	}
	q.SetElsewhere([]Backlog{soon})
	if got, want := q.ComebackWait(mine[2], 1000, t0), 5500*time.Millisecond; got != want {
		t.Errorf("beside comebacks due at once: %v; want %v, two turns and a half of theirs", got, want)
	}
}
