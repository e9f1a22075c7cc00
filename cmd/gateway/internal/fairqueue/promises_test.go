package fairqueue

import (
	"fmt"
	"slices"
	"testing"
	"time"
)

// promised pushes an item of user and records the door's promise of its estimate at now.
func (q *Queue) promised(tenant, user string, now time.Time) *Item {
	it := item(tenant, user, 1, Interactive, 1000)
	q.EstimateWait(it, 1000, now)
	q.Push(it)
	q.Promise(it)
	return it
}

// TestAPromisePastDueGoesFirstInItsTenantsTurn checks that once a tenant has served what it
// promised an item, because a user who joined later took turns, the item's lane goes before the
// tenant's other lanes until it has gone, unless a limit blocks it or a hold holds it; and that a
// promise never takes another tenant's turn.
func TestAPromisePastDueGoesFirstInItsTenantsTurn(t *testing.T) {
	held := map[string]bool{}
	q := New(Options{Quantum: 1000, Hold: func(it *Item) bool { return held[it.User] }})
	early := []*Item{q.promised("t", "early", t0), q.promised("t", "early", t0), q.promised("t", "early", t0)}
	// Promised 1, 2 and 3 items of the tenant's: early is alone.
	for i, it := range early {
		if want := int64(1000 * (i + 1)); it.promise != want {
			t.Fatalf("early's item %d is promised %d tokens; want %d", i, it.promise, want)
		}
	}
	for _, user := range []string{"a", "b"} {
		q.Push(item("t", user, 1, Interactive, 1000))
	}
	if it := q.mustNext(t, t0); it != early[0] {
		t.Errorf("first, next = %s; want early's first, its lane's turn", it.User)
	}
	q.Pop(early[0])
	if it := q.mustNext(t, t0); it.User != "a" {
		t.Errorf("with early's next promised 2,000 tokens and 1,000 served, next = %s; want a, the users' order", it.User)
	}
	q.Pop(q.mustNext(t, t0))
	if it := q.mustNext(t, t0); it != early[1] {
		t.Errorf("with early's next promise due, next = %s; want early's, before b", it.User)
	}
	q.Block(early[1], t0.Add(time.Second), false)
	if it := q.mustNext(t, t0); it.User != "b" {
		t.Errorf("with early's lane blocked, next = %s; want b", it.User)
	}
	q.Block(early[1], time.Time{}, false)
	held["early"] = true
	if it := q.mustNext(t, t0); it.User != "b" {
		t.Errorf("with early held, next = %s; want b", it.User)
	}
	held["early"] = false

	q.Push(item("other", "o", 1, Interactive, 1000))
	q.Pop(q.mustNext(t, t0)) // early's second, due
	if it := q.mustNext(t, t0); it.Tenant != "other" {
		t.Errorf("with t's quantum spent, next = %s/%s; want other: a promise takes no turn of another tenant", it.Tenant, it.User)
	}
	q.Remove(early[2])
	if n := len(q.classes[Interactive].tenants["t"].promises); n != 0 {
		t.Errorf("%d promises kept after their items went or left; want none", n)
	}
}

// TestEstimateCountsWhatOthersWerePromised checks that an item's estimate counts, of each other
// user of its tenant, what it was promised before the item goes as well as the turns the rounds
// give it; that a promise not due by then counts nothing; and that a promise is reckoned in the
// tenant's tokens, not in time.
func TestEstimateCountsWhatOthersWerePromised(t *testing.T) {
	q := New(Options{})
	for range 4 {
		q.promised("t", "early", t0) // promised at 1,000, 2,000, 3,000 and 4,000 tokens
	}
	newcomer := item("t", "new", 1, Interactive, 1000)
	// The rounds: one of early's and the newcomer's. Early's second is due once 2,000 tokens are
	// served, after the newcomer's turn.
	if got, want := q.EstimateWait(newcomer, 1000, t0), 2*time.Second; got != want {
		t.Errorf("a newcomer's estimate beside promises not due before it = %v; want %v", got, want)
	}
	another := []*Item{item("t", "a", 1, Interactive, 1000), item("t", "a", 1, Interactive, 1000), item("t", "a", 1, Interactive, 1000)}
	for _, it := range another {
		q.Push(it)
	}
	q.Pop(another[0])
	q.Pop(another[1]) // 2,000 served, none of early's: its first two are past due
	// Early's four go first, each due by the time the one before it has gone; then a's turn and
	// the newcomer's.
	if got, want := q.EstimateWait(newcomer, 1000, t0), 6*time.Second; got != want {
		t.Errorf("a newcomer's estimate beside promises past due = %v; want %v", got, want)
	}
	var order []string
	for it, _ := q.Next(t0.Add(time.Hour)); it != nil; it, _ = q.Next(t0.Add(time.Hour)) {
		order = append(order, it.User)
		q.Pop(it)
	}
	if want := []string{"early", "early", "early", "early", "a"}; !slices.Equal(order, want) {
		t.Errorf("an hour later, served %v; want %v: the promises in the tenant's tokens, whatever the time", order, want)
	}
}

// TestEstimateCountsPromisesAtTheirUsersOwnPace checks that the promises of a lane whose user's
// own limits hold it back count no faster than those limits let them go: early's user lets one
// call through every 2 s, so of its four calls past due, two go within the newcomer's wait of 3 s,
// not four.
func TestEstimateCountsPromisesAtTheirUsersOwnPace(t *testing.T) {
	q := New(Options{})
	for range 4 {
		it := item("t", "early", 1, Interactive, 1000)
		it.Own = 2 * time.Second
		q.EstimateWait(it, 1000, t0)
		q.Push(it)
		q.Promise(it) // promised at 1,000, 2,000, 3,000 and 4,000 tokens
	}
	for range 4 { // 4,000 served, none of early's: its four are past due
		it := item("t", "a", 1, Interactive, 1000)
		q.Push(it)
		q.Pop(it)
	}
	newcomer := item("t", "new", 1, Interactive, 1000)
	if got, want := q.EstimateWait(newcomer, 1000, t0), 3*time.Second; got != want {
		t.Errorf("a newcomer's estimate beside promises past due of a lane its user holds to one call every 2 s = %v; want %v", got, want)
	}
}

// BenchmarkNextBesidePromises measures Next in a tenant whose lanes are all promised and due,
// with blocked of them (those of the earliest promises) blocked: the turn looks past them, at
// most maxOverdueLooks, then goes on in its users' order.
func BenchmarkNextBesidePromises(b *testing.B) {
	for _, lanes := range []int{100, 10_000} {
		for _, blocked := range []int{1, maxOverdueLooks} {
			b.Run(fmt.Sprint(lanes, " lanes, ", blocked, " blocked"), func(b *testing.B) {
				q := New(Options{})
				for k := range lanes {
					it := item("t", fmt.Sprint("u", k), 1, Interactive, 1000)
					q.EstimateWait(it, 1000, t0)
					q.Push(it)
					q.Promise(it)
					if k < blocked {
						q.Block(it, t0.Add(time.Hour), false)
					}
				}
				q.classes[Interactive].tenants["t"].served = int64(lanes) * 1000
				for b.Loop() {
					q.Next(t0)
				}
			})
		}
	}
}

// BenchmarkEstimateWaitBesidePromises is the door's estimate for a newcomer's call in a tenant
// whose 200 users wait with 20 calls each, promised or not: what the promises add to each call at
// the door.
func BenchmarkEstimateWaitBesidePromises(b *testing.B) {
	for _, promised := range []bool{false, true} {
		b.Run(fmt.Sprint("promised=", promised), func(b *testing.B) {
			q := New(Options{})
			for range 20 {
				for u := range 200 {
					it := item("t", fmt.Sprint("u", u), 1, Interactive, 800)
					q.EstimateWait(it, 5000, t0)
					q.Push(it)
					if promised {
						q.Promise(it)
					}
				}
			}
			newcomer := item("t", "newcomer", 1, Interactive, 800)
			for b.Loop() {
				q.EstimateWait(newcomer, 5000, t0)
			}
		})
	}
}
