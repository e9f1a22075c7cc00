package fairqueue

import (
	"slices"
	"testing"
	"time"
)

// TestEstimateCountsTheComebacksDueBeforeTheItem checks that a lane the door turned away still
// takes its turns in the estimates of others, from the time it was told to come back: a user
// alone in the queue with three items, beside a user expected back with ten, waits for the
// comebacks due before each of its items is served, and not for those due after. The user away
// comes back behind the one queued in the order of turns: one of its comebacks goes between two
// of the queued user's items.
func TestEstimateCountsTheComebacksDueBeforeTheItem(t *testing.T) {
	q := New(Options{})
	mine := tenItems("a", "me", 1000)[:3]
	for _, it := range mine {
		q.Push(it)
	}
	away := item("a", "away", 1, Interactive, 1000)
	for i := range 10 {
		q.Expect(away, t0, t0.Add(time.Duration(i)*time.Second))
	}
	cases := []struct {
		it   *Item
		want time.Duration
	}{
		// Its first item goes before any comeback: the lane away comes back behind it.
		{mine[0], time.Second},
		// Its third goes after three of its own and two comebacks, one after each of the first
		// two, all due by then.
		{mine[2], 5 * time.Second},
	}
	for _, tc := range cases {
		if got := q.EstimateWait(tc.it, 1000, t0); got != tc.want {
			t.Errorf("EstimateWait = %v; want %v", got, tc.want)
		}
	}
	// Comebacks due long after the item is served do not delay it.
	late := New(Options{})
	late.Push(mine[0])
	late.Expect(away, t0, t0.Add(time.Minute))
	if got, want := late.EstimateWait(mine[0], 1000, t0), time.Second; got != want {
		t.Errorf("beside a comeback due in a minute: %v; want %v", got, want)
	}
}

// TestEstimateCountsAnotherTenantsComebacksAtItsWeight checks that a tenant with nothing queued
// but comebacks expected takes its weighted share of the drain in others' estimates, up to what it
// will bring back.
func TestEstimateCountsAnotherTenantsComebacksAtItsWeight(t *testing.T) {
	q := New(Options{})
	for range 5 {
		q.Expect(item("heavy", "u", 2, Interactive, 1000), t0, t0)
	}
	if got, want := q.EstimateWait(item("light", "u", 1, Interactive, 1000), 1000, t0), 3*time.Second; got != want {
		t.Errorf("beside a tenant of weight 2 expected back with 5 items: %v; want %v", got, want)
	}
	q.Expect(item("small", "u", 1, Interactive, 500), t0, t0)
	if got, want := q.EstimateWait(item("light", "u", 1, Interactive, 1000), 1000, t0), 3500*time.Millisecond; got != want {
		t.Errorf("and a tenant expected back with less than its share: %v; want %v", got, want)
	}
}

// TestCameBackTakesTheEarliestComebackOfItsLane checks that an item coming back takes its lane's
// earliest comeback due by then, so that it no longer counts; that an item sooner than every
// comeback of its lane is a new one; that comebacks past their grace are forgotten; and that
// another lane's do not count as its own.
func TestCameBackTakesTheEarliestComebackOfItsLane(t *testing.T) {
	q := New(Options{})
	u := item("a", "u", 1, Interactive, 1000)
	q.Expect(u, t0, t0.Add(2*time.Second))
	q.Expect(u, t0, t0)
	q.Expect(u, t0, t0.Add(ComebackGrace+5*time.Second))
	if _, ok := q.CameBack(item("a", "other", 1, Interactive, 1000), t0); ok {
		t.Error("another user's item took this user's comeback")
	}
	if at, ok := q.CameBack(u, t0); !ok || !at.Equal(t0) {
		t.Errorf("CameBack = %v, %v; want the earliest, %v", at, ok, t0)
	}
	if _, ok := q.CameBack(u, t0.Add(time.Second)); ok || q.expectedCount() != 2 {
		t.Errorf("an item a second before the next comeback took one: %d left; want a new item, 2 left", q.expectedCount())
	}
	// At t0 + grace + 5 s the comeback due at t0 + 2 s is past its grace; the last is due.
	now := t0.Add(ComebackGrace + 5*time.Second)
	if at, ok := q.CameBack(u, now); !ok || !at.Equal(now) {
		t.Errorf("CameBack = %v, %v; want the one still in its grace", at, ok)
	}
	if _, ok := q.CameBack(u, now); ok || q.expectedCount() != 0 {
		t.Errorf("a comeback is left: %d expected", q.expectedCount())
	}
}

// TestComebackWaitCountsTheLanesOwnComebacksAhead checks that an item turned away is told to come
// back behind the comebacks its lane is already expected to make, one of its turns later each.
func TestComebackWaitCountsTheLanesOwnComebacksAhead(t *testing.T) {
	q := New(Options{})
	q.Push(item("a", "other", 1, Interactive, 1000))
	q.Push(item("a", "other", 1, Interactive, 1000))
	q.Push(item("a", "other", 1, Interactive, 1000))
	u := item("a", "u", 1, Interactive, 1000)
	if got, want := q.ComebackWait(u, 1000, t0), 2*time.Second; got != want {
		t.Errorf("ComebackWait with no comeback expected = %v; want %v, as EstimateWait", got, want)
	}
	q.Expect(u, t0, t0.Add(time.Minute))
	if got, want := q.ComebackWait(u, 1000, t0), 4*time.Second; got != want {
		t.Errorf("ComebackWait behind one comeback = %v; want %v, one turn of each lane later", got, want)
	}
	if got, want := q.EstimateWait(u, 1000, t0), 2*time.Second; got != want {
		t.Errorf("EstimateWait of an item arriving now = %v; want %v: its lane's comebacks come after it", got, want)
	}
}

// TestExpectedComebacksAreBounded checks that comebacks never taken do not grow without bound.
func TestExpectedComebacksAreBounded(t *testing.T) {
	q := New(Options{})
	for i := range 3 * maxExpected {
		q.Expect(item("a", "u", 1, Interactive, 1), t0, t0.Add(time.Duration(i)*time.Millisecond))
	}
	if n := q.expectedCount(); n > maxExpected {
		t.Errorf("%d comebacks expected; want at most %d", n, maxExpected)
	}
}

// TestALanesItemsThatWaitTooLongComeBackATurnApart checks the comebacks of a lane whose queued
// items wait out their maxWait together, each told when to come back from where it stands and
// then taken out: the first comes back first, and each next one a turn of the lanes later, not
// all of them behind all of them.
func TestALanesItemsThatWaitTooLongComeBackATurnApart(t *testing.T) {
	q := New(Options{})
	for range 3 {
		q.Push(item("a", "other", 1, Interactive, 1000))
	}
	mine := tenItems("a", "me", 1000)[:3]
	for _, it := range mine {
		q.Push(it)
	}
	var got []time.Duration
	for _, it := range mine {
		back := q.ComebackWait(it, 1000, t0)
		got = append(got, back)
		q.Remove(it)
		q.Expect(it, t0, t0.Add(back+time.Minute)) // back after every estimate here
	}
	// The other user's lane, as long and first in turn, takes a turn before each: 2 s, 4 s, 6 s.
	want := []time.Duration{2 * time.Second, 4 * time.Second, 6 * time.Second}
	if !slices.Equal(got, want) {
		t.Errorf("ComebackWait of the lane's items, one after another = %v; want %v", got, want)
	}
}
