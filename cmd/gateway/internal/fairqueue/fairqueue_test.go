package fairqueue

import (
	"fmt"
	"math/rand/v2"
	"slices"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
)

var t0 = time.Date(2026, 11, 30, 12, 0, 0, 0, time.UTC)

func item(tenant, user string, weight int32, class Class, cost int64) *Item {
	return &Item{Tenant: tenant, User: user, Weight: weight, Class: class, Cost: cost}
}

// drain serves n items, or until nothing may go, and returns their tenants in order.
func drain(q *Queue, n int, now time.Time) []string {
	var served []string
	for range n {
		it, _ := q.Next(now)
		if it == nil {
			break
		}
		q.Pop(it)
		served = append(served, it.Tenant)
	}
	return served
}

func TestASmallTenantWaitsAtMostOneRound(t *testing.T) {
	q := New(Options{Quantum: 1000})
	for i := range 9000 {
		q.Push(item("importer", fmt.Sprint("u", i%3), 1, Interactive, 800))
	}
	drain(q, 5, t0) // the importer is being served
	q.Push(item("small", "s", 1, Interactive, 800))
	served := drain(q, 10, t0)
	pos := -1
	for i, tenant := range served {
		if tenant == "small" {
			pos = i
			break
		}
	}
	// A round gives the importer at most one quantum (1000 tokens: one 800-token page, two with
	// what it had left), then the small tenant is served.
	if pos < 0 || pos > 2 {
		t.Errorf("the small tenant was served at position %d of %v; want within the importer's round", pos, served)
	}
}

func TestTokensServedFollowWeights(t *testing.T) {
	cases := []struct {
		name    string
		weights map[string]int32
		costs   map[string]int64
		want    map[string]float64 // share of tokens served
	}{
		{"equal weights, equal costs", map[string]int32{"a": 1, "b": 1, "c": 1}, map[string]int64{"a": 800, "b": 800, "c": 800}, map[string]float64{"a": 1.0 / 3, "b": 1.0 / 3, "c": 1.0 / 3}},
		{"equal weights, one tenant with big requests", map[string]int32{"a": 1, "b": 1}, map[string]int64{"a": 4000, "b": 100}, map[string]float64{"a": 0.5, "b": 0.5}},
		{"weights 2:1", map[string]int32{"a": 2, "b": 1}, map[string]int64{"a": 800, "b": 800}, map[string]float64{"a": 2.0 / 3, "b": 1.0 / 3}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			q := New(Options{Quantum: 1000})
			for tenant, w := range tc.weights {
				for range 2000 {
					q.Push(item(tenant, "u", w, Interactive, tc.costs[tenant]))
				}
			}
			served := map[string]int64{}
			var total int64
			for range 1000 { // every tenant stays backlogged throughout
				it, _ := q.Next(t0)
				q.Pop(it)
				served[it.Tenant] += it.Cost
				total += it.Cost
			}
			for tenant, want := range tc.want {
				if got := float64(served[tenant]) / float64(total); got < want-0.03 || got > want+0.03 {
					t.Errorf("tenant %s got %.3f of the tokens; want %.3f", tenant, got, want)
				}
			}
			if len(tc.weights) == 3 {
				j := jain(served)
				t.Logf("Jain's fairness index over tokens served to 3 backlogged tenants of equal weight: %.6f", j)
				if j < 0.99 {
					t.Errorf("Jain's fairness index over tokens served = %.4f; want at least 0.99", j)
				}
			}
		})
	}
}

// jain is Jain's fairness index: 1 when every value is equal, 1/n when one takes everything.
func jain(served map[string]int64) float64 {
	var sum, squares float64
	for _, v := range served {
		sum += float64(v)
		squares += float64(v) * float64(v)
	}
	return sum * sum / (float64(len(served)) * squares)
}

func TestUsersOfATenantTakeTurns(t *testing.T) {
	q := New(Options{Quantum: 100_000})
	for range 3 {
		q.Push(item("acme", "alice", 1, Interactive, 10))
	}
	q.Push(item("acme", "bob", 1, Interactive, 10))
	var users []string
	for range 4 {
		it, _ := q.Next(t0)
		q.Pop(it)
		users = append(users, it.User)
	}
	if diff := cmp.Diff([]string{"alice", "bob", "alice", "alice"}, users); diff != "" {
		t.Errorf("users served (-want +got):\n%s", diff)
	}
}

func TestBatchWaitsForInteractiveButKeepsItsShare(t *testing.T) {
	q := New(Options{Quantum: 1000, BatchShare: 0.1})
	for range 100 {
		q.Push(item("web", "u", 1, Interactive, 100))
		q.Push(item("jobs", "u", 1, Batch, 100))
	}
	served := drain(q, 50, t0)
	batch := 0
	for _, tenant := range served {
		if tenant == "jobs" {
			batch++
		}
	}
	if served[0] != "web" || batch < 4 || batch > 6 {
		t.Errorf("batch got %d of 50 while interactive was busy (first served: %s); want about 10%%, interactive first", batch, served[0])
	}
	if rest := drain(q, 200, t0); len(rest) != 150 {
		t.Errorf("drained %d more; want every remaining item", len(rest))
	}
}

func TestBlockedLanesStepAside(t *testing.T) {
	q := New(Options{Quantum: 1000})
	alice := item("acme", "alice", 1, Interactive, 100)
	q.Push(alice)
	q.Push(item("acme", "bob", 1, Interactive, 100))
	q.Push(item("globex", "carol", 1, Interactive, 100))

	q.Block(alice, t0.Add(time.Second), false)
	if it, _ := q.Next(t0); it.User != "bob" {
		t.Errorf("with alice's lane blocked, next = %s; want bob", it.User)
	}
	q.Block(alice, t0.Add(2*time.Second), true)
	if it, _ := q.Next(t0); it.Tenant != "globex" {
		t.Errorf("with acme blocked, next = %s; want globex", it.Tenant)
	}
	q.Pop(q.mustNext(t, t0))
	if it, opens := q.Next(t0); it != nil || !opens.Equal(t0.Add(2*time.Second)) {
		t.Errorf("with only acme left, blocked: Next = %v, opens %v; want nil until +2s", it, opens)
	}
	if it, _ := q.Next(t0.Add(2 * time.Second)); it != alice {
		t.Errorf("after the block, next = %v; want alice's item", it)
	}
}

func (q *Queue) mustNext(t *testing.T, now time.Time) *Item {
	t.Helper()
	it, _ := q.Next(now)
	if it == nil {
		t.Fatal("Next = nil; want an item")
	}
	return it
}

func TestRemoveLeavesNoTrace(t *testing.T) {
	q := New(Options{})
	gone := item("acme", "alice", 1, Interactive, 500)
	q.Push(gone)
	q.Push(item("acme", "alice", 1, Interactive, 300))
	q.Remove(gone)
	q.Remove(gone) // a second Remove is harmless
	if q.Len() != 1 || q.Cost() != 300 {
		t.Errorf("after Remove: %d items costing %d; want 1 costing 300", q.Len(), q.Cost())
	}
	if it := q.mustNext(t, t0); it == gone {
		t.Error("a removed item was offered")
	}
}

// TestItemsListsEveryWaitingItem checks that Items returns every item queued, blocked lanes' and
// Batch's included, and none removed.
func TestItemsListsEveryWaitingItem(t *testing.T) {
	q := New(Options{})
	a1, a2 := item("acme", "alice", 1, Interactive, 100), item("acme", "alice", 1, Interactive, 200)
	b, j, gone := item("acme", "bob", 1, Interactive, 300), item("zeta", "job", 1, Batch, 400), item("zeta", "x", 1, Interactive, 1)
	for _, it := range []*Item{a1, a2, b, j, gone} {
		q.Push(it)
	}
	q.Block(b, t0.Add(time.Hour), false)
	q.Remove(gone)
	got := q.Items()
	if len(got) != 4 || !slices.Contains(got, a1) || !slices.Contains(got, a2) || !slices.Contains(got, b) || !slices.Contains(got, j) {
		t.Errorf("Items() = %d items; want a1, a2, b and j", len(got))
	}
	if slices.Index(got, a1) > slices.Index(got, a2) {
		t.Error("Items() lists alice's later item before her earlier one")
	}
}

// tenItems is ten items of a user's, of cost each.
func tenItems(tenant, user string, cost int64) []*Item {
	items := make([]*Item, 10)
	for i := range items {
		items[i] = item(tenant, user, 1, Interactive, cost)
	}
	return items
}

func TestEstimateWaitUnderFairSharing(t *testing.T) {
	cases := []struct {
		name  string
		queue []*Item
		item  *Item
		rate  float64
		want  time.Duration
	}{
		{"empty queue", nil, item("a", "u", 1, Interactive, 1000), 1000, time.Second},
		{"own work ahead", []*Item{item("a", "u", 1, Interactive, 3000)}, item("a", "u", 1, Interactive, 1000), 1000, 4 * time.Second},
		{"another tenant's backlog halves the rate, not more", []*Item{item("big", "u", 1, Interactive, 1_000_000)}, item("a", "u", 1, Interactive, 1000), 1000, 2 * time.Second},
		{"weight 3 against weight 1", []*Item{item("big", "u", 1, Interactive, 1_000_000)}, item("a", "u", 3, Interactive, 3000), 1000, 4 * time.Second},
		{"batch behind interactive gets its share", []*Item{item("web", "u", 1, Interactive, 1_000_000)}, item("jobs", "u", 1, Batch, 1000), 1000, 10 * time.Second},
		{"nothing drains", nil, item("a", "u", 1, Interactive, 1000), 0, -1},
		{"a tenant with less waiting than its share finishes first", []*Item{item("small", "u", 1, Interactive, 500)},
			item("a", "u", 1, Interactive, 3000), 1000, 3500 * time.Millisecond},
		{"one user's ten items delay another user's first by one", tenItems("a", "heavy", 1000),
			item("a", "newcomer", 1, Interactive, 1000), 1000, 2 * time.Second},
		{"the heavy user's next item waits behind everyone's", append(tenItems("a", "heavy", 1000), item("a", "light", 1, Interactive, 1000)),
			item("a", "heavy", 1, Interactive, 1000), 1000, 12 * time.Second},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			q := New(Options{BatchShare: 0.1})
			for _, it := range tc.queue {
				q.Push(it)
			}
			if got := q.EstimateWait(tc.item, tc.rate, t0); got != tc.want {
				t.Errorf("EstimateWait = %v; want %v", got, tc.want)
			}
		})
	}
}

// TestEstimateWaitOfAQueuedItemCountsWhatIsAheadOfIt checks a queued item's estimate: the items
// before it in its lane and one of each other lane per place (one place fewer for a lane whose
// turn comes after its lane's), not those behind it.
func TestEstimateWaitOfAQueuedItemCountsWhatIsAheadOfIt(t *testing.T) {
	q := New(Options{})
	heavy := tenItems("a", "heavy", 1000)
	for _, it := range heavy {
		q.Push(it)
	}
	q.Push(item("a", "light", 1, Interactive, 1000))
	if got, want := q.EstimateWait(heavy[0], 1000, t0), time.Second; got != want {
		t.Errorf("the heavy user's first item: %v; want %v, itself: its lane's turn comes first", got, want)
	}
	if got, want := q.EstimateWait(heavy[9], 1000, t0), 11*time.Second; got != want {
		t.Errorf("the heavy user's tenth item: %v; want %v, its lane and the light user's one", got, want)
	}
}

// TestEstimateWaitIsWhenATenantsQueueServesTheItem checks, on random queues of one tenant's users
// (lanes of different lengths, items of different costs, some lanes served a turn already), that
// every queued item's estimate at a drain of 1,000 tokens a second is exactly when the queue
// serves it: the cost of what goes before it and its own.
func TestEstimateWaitIsWhenATenantsQueueServesTheItem(t *testing.T) {
	rng := rand.New(rand.NewPCG(15, 2026))
	for round := range 200 {
		q := New(Options{Quantum: 1 + rng.Int64N(4000)})
		var items []*Item
		for range 1 + rng.IntN(40) {
			it := item("a", fmt.Sprint("u", rng.IntN(6)), 1, Interactive, 1+rng.Int64N(3000))
			q.Push(it)
			items = append(items, it)
		}
		for i := rng.IntN(3); i > 0 && q.Len() > 1; i-- { // a turn or two served: the lanes' order is no longer the push's
			it := q.mustNext(t, t0)
			q.Pop(it)
			items = slices.DeleteFunc(items, func(x *Item) bool { return x == it })
		}
		want := map[*Item]time.Duration{}
		for _, it := range items {
			want[it] = q.EstimateWait(it, 1000, t0)
		}
		var served int64
		for q.Len() > 0 {
			it := q.mustNext(t, t0)
			q.Pop(it)
			served += it.Cost
			if got := time.Duration(served) * time.Millisecond; want[it].Round(time.Millisecond) != got {
				t.Fatalf("queue %d: %s's item of %d tokens was estimated to wait %v; the queue served it at %v", round, it.User, it.Cost, want[it], got)
			}
		}
	}
}

// TestHoldSkipsALaneUntilReleased checks that a lane Options.Hold holds is passed over, other
// lanes going meanwhile, that a queue whose every lane is held gives nothing and no time, and
// that Open still counts a held lane as waiting.
func TestHoldSkipsALaneUntilReleased(t *testing.T) {
	held := map[string]bool{"a": true}
	q := New(Options{Hold: func(it *Item) bool { return held[it.Tenant+"/"+it.User] || held[it.Tenant] }})
	for range 2 {
		q.Push(item("a", "x", 1, Interactive, 100))
		q.Push(item("b", "y", 1, Interactive, 100))
		q.Push(item("b", "z", 1, Interactive, 100))
	}
	held["b/y"] = true
	var users []string
	for range 2 {
		it, _ := q.Next(t0)
		q.Pop(it)
		users = append(users, it.Tenant+"/"+it.User)
	}
	if diff := cmp.Diff(users, []string{"b/z", "b/z"}); diff != "" {
		t.Errorf("served with a and b/y held (-got +want):\n%s", diff)
	}
	if it, opens := q.Next(t0); it != nil || !opens.IsZero() {
		t.Errorf("Next with every lane held = %v, %v; want nothing and no time", it, opens)
	}
	open := 0
	q.Open(t0, func(*Item) { open++ })
	if open != 2 {
		t.Errorf("Open visited %d lanes; want 2: held lanes still wait", open)
	}
	clear(held)
	if it, _ := q.Next(t0); it == nil {
		t.Error("Next after the holds were released gives nothing")
	}
}

// TestALanePassedOverKeepsItsPlace checks that while a user's lane is held or blocked, the other
// users of its tenant still take turns, and that the lane goes first when it opens.
func TestALanePassedOverKeepsItsPlace(t *testing.T) {
	held := map[string]bool{"x": true}
	q := New(Options{Quantum: 100_000, Hold: func(it *Item) bool { return held[it.User] }})
	for _, user := range []string{"x", "y", "z", "w"} {
		for range 3 {
			q.Push(item("acme", user, 1, Interactive, 10))
		}
	}
	q.Block(q.classes[Interactive].tenants["acme"].byUser["w"].items.Front().Value.(*Item), t0.Add(time.Second), false)
	served := func(n int, now time.Time) []string {
		var users []string
		for range n {
			it := q.mustNext(t, now)
			q.Pop(it)
			users = append(users, it.User)
		}
		return users
	}
	if diff := cmp.Diff([]string{"y", "z", "y", "z"}, served(4, t0)); diff != "" {
		t.Errorf("served with x held and w blocked (-want +got):\n%s", diff)
	}
	clear(held)
	if diff := cmp.Diff([]string{"x", "w", "y", "z", "x", "w"}, served(6, t0.Add(time.Second))); diff != "" {
		t.Errorf("served once x and w opened (-want +got):\n%s", diff)
	}
}

// TestOwnWaitIsTheLanesOwnPace checks the wait an item's own limits set: its lane's Own up to it,
// less the credit of what those limits hold, never below zero, whatever other lanes hold.
func TestOwnWaitIsTheLanesOwnPace(t *testing.T) {
	q := New(Options{})
	var alice []*Item
	for range 3 {
		it := item("acme", "alice", 1, Interactive, 100)
		it.Own = 500 * time.Millisecond
		q.Push(it)
		alice = append(alice, it)
	}
	bob := item("acme", "bob", 1, Interactive, 100)
	bob.Own = time.Second
	q.Push(bob)
	next := item("acme", "alice", 1, Interactive, 100)
	next.Own = 500 * time.Millisecond
	carol := item("acme", "carol", 1, Interactive, 100)
	carol.Own = 250 * time.Millisecond
	cases := []struct {
		name   string
		it     *Item
		credit time.Duration
		want   time.Duration
	}{
		{"alice's second", alice[1], 0, time.Second},
		{"alice's second, her limits holding 300 ms", alice[1], 300 * time.Millisecond, 700 * time.Millisecond},
		{"alice's next, not queued", next, 0, 2 * time.Second},
		{"alice's first, her limits holding more", alice[0], time.Second, 0},
		{"bob's", bob, 0, time.Second},
		{"carol's, with no lane yet", carol, 0, 250 * time.Millisecond},
	}
	for _, tc := range cases {
		if got := q.OwnWait(tc.it, tc.credit); got != tc.want {
			t.Errorf("%s: OwnWait = %s; want %s", tc.name, got, tc.want)
		}
	}
}

// TestALaneHeldByItsOwnLimitsTakesFewerTurns checks that the estimate counts no more turns of a
// lane that its user's own limits hold back than they let it take: alice, ahead of bob in turn
// and limited to a call a second, goes once and then waits, while bob's five go one after the
// other.
func TestALaneHeldByItsOwnLimitsTakesFewerTurns(t *testing.T) {
	q := New(Options{})
	for range 10 {
		it := item("acme", "alice", 1, Interactive, 100)
		it.Own = time.Second
		q.Push(it)
	}
	var bob *Item
	for range 5 {
		bob = item("acme", "bob", 1, Interactive, 100)
		q.Push(bob)
	}
	// At 1,000 tokens a second each call takes 0.1 s: alice's first, then bob's five.
	if got, want := q.EstimateWait(bob, 1000, t0), 600*time.Millisecond; got != want {
		t.Errorf("EstimateWait(bob's fifth) = %s; want %s", got, want)
	}
}
