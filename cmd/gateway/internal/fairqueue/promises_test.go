package fairqueue

import (
	"fmt"
	"testing"
	"time"
)

// TestAPromisePastDueGoesBeforeTheRounds checks that a lane whose item's promise has passed goes
// before the lanes the rounds would serve, earliest promise first, unless a limit blocks it or
// a hold holds it; and that a promise not yet due changes nothing.
func TestAPromisePastDueGoesBeforeTheRounds(t *testing.T) {
	held := map[string]bool{}
	q := New(Options{Quantum: 1000, Hold: func(it *Item) bool { return held[it.User] }})
	for _, user := range []string{"b", "c", "d"} {
		q.Push(item("t", user, 1, Interactive, 1000))
	}
	late := item("t", "late", 1, Interactive, 1000)
	late.Promise = t0.Add(2 * time.Second)
	later := item("t", "later", 1, Interactive, 1000)
	later.Promise = t0.Add(3 * time.Second)
	q.Push(later)
	q.Push(late)
	if it := q.mustNext(t, t0); it.User != "b" {
		t.Errorf("before any promise is due, next = %s; want b, the rounds' first", it.User)
	}
	now := t0.Add(4 * time.Second)
	if it := q.mustNext(t, now); it != late {
		t.Errorf("with two promises past due, next = %s; want late, the earliest", it.User)
	}
	q.Block(late, now.Add(time.Second), false)
	if it := q.mustNext(t, now); it != later {
		t.Errorf("with late's lane blocked, next = %s; want later", it.User)
	}
	held["later"] = true
	if it := q.mustNext(t, now); it.User != "b" {
		t.Errorf("with late blocked and later held, next = %s; want b, the rounds' first", it.User)
	}
	held["later"] = false
	q.Pop(later)
	if it := q.mustNext(t, now); it.User != "b" {
		t.Errorf("with the promise kept, next = %s; want b, the rounds' first", it.User)
	}
	q.Remove(late)
	if len(q.classes[Interactive].promises) != 0 {
		t.Errorf("%d promises kept after their items left; want none", len(q.classes[Interactive].promises))
	}
}

// TestEstimateCountsWhatOthersWerePromised checks that an item's estimate counts, of every other
// lane, what it was promised within the wait as well as the turns the rounds give it: a newcomer
// waits for a promise the queue keeps.
func TestEstimateCountsWhatOthersWerePromised(t *testing.T) {
	q := New(Options{})
	for i := range 5 {
		it := item("t", "early", 1, Interactive, 1000)
		it.Promise = t0.Add(time.Duration(i+1) * time.Second)
		q.Push(it)
	}
	other := item("other", "o", 1, Interactive, 1000)
	other.Promise = t0.Add(3 * time.Second)
	q.Push(other)
	q.Push(item("other", "o", 1, Interactive, 1000))
	// The rounds alone: one of early's items, the newcomer's, and as much of the other tenant's,
	// 4 s. Early's items promised by then are four, and by 7 s all five: with other's two, the
	// newcomer goes at 8 s.
	if got, want := q.EstimateWait(item("t", "new", 1, Interactive, 1000), 1000, t0), 8*time.Second; got != want {
		t.Errorf("a newcomer's estimate beside promises = %v; want %v", got, want)
	}
	plain := New(Options{})
	for range 5 {
		plain.Push(item("t", "early", 1, Interactive, 1000))
	}
	plain.Push(item("other", "o", 1, Interactive, 1000))
	plain.Push(item("other", "o", 1, Interactive, 1000))
	if got, want := plain.EstimateWait(item("t", "new", 1, Interactive, 1000), 1000, t0), 4*time.Second; got != want {
		t.Errorf("a newcomer's estimate without promises = %v; want %v", got, want)
	}
}

// BenchmarkNextBesidePromises measures Next with every item promised and due, the lane of the
// earliest blocked: Next looks past it at the next promise.
func BenchmarkNextBesidePromises(b *testing.B) {
	for _, n := range []int{100, 10_000} {
		b.Run(fmt.Sprint(n, " promises"), func(b *testing.B) {
			q := New(Options{})
			var first *Item
			for k := range n {
				it := item("t", fmt.Sprint("u", k), 1, Interactive, 1000)
				it.Promise = t0.Add(time.Duration(k) * time.Millisecond)
				q.Push(it)
				if first == nil {
					first = it
				}
			}
			now := t0.Add(time.Hour)
			q.Block(first, now.Add(time.Hour), false)
			for b.Loop() {
				q.Next(now)
			}
		})
	}
}
