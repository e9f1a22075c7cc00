package fairqueue

import (
	"slices"
	"time"
)

// ComebackGrace is how long after the time it was told to come back a turned-away item is still
// expected: a client rounds its Retry-After up to whole seconds, and may be slow.
const ComebackGrace = 10 * time.Second

// maxExpected bounds the comebacks a queue expects: past it, those whose grace passed are
// forgotten, and if that is not enough, every one.
const maxExpected = 20_000

// comeback is an item the door turned away and expects back at a time.
type comeback struct {
	at   time.Time
	cost int64
}

// comebacks are a class's expected comebacks, by tenant and user, each user's in the order they
// are due.
type comebacks struct {
	tenants map[string]*tenantComebacks
	count   int
}

type tenantComebacks struct {
	weight int64
	users  map[string][]comeback
}

// Expect records at now that an item the door turned away is expected back at a time. Until then
// and ComebackGrace after, the estimates of other lanes count it as its lane's: a lane turned away
// at the door still asks for its share.
func (q *Queue) Expect(it *Item, now, at time.Time) {
	if q.expectedCount() >= maxExpected {
		q.forgetExpected(now)
	}
	c := &q.expected[it.Class]
	if c.tenants == nil {
		c.tenants = map[string]*tenantComebacks{}
	}
	t := c.tenants[it.Tenant]
	if t == nil {
		t = &tenantComebacks{users: map[string][]comeback{}}
		c.tenants[it.Tenant] = t
	}
	t.weight = int64(max(it.Weight, 1))
	due := t.users[it.User]
	i, _ := slices.BinarySearchFunc(due, at, func(e comeback, at time.Time) int { return e.at.Compare(at) })
	t.users[it.User] = slices.Insert(due, i, comeback{at: at, cost: it.Cost})
	c.count++
}

// CameBack takes the earliest comeback its lane expected by now, not past its grace, as the
// item's, and returns when it was told to come back; false when its lane expected none by now: a
// caller comes back no sooner than it was told, so an item sooner than that is a new one.
func (q *Queue) CameBack(it *Item, now time.Time) (time.Time, bool) {
	c := &q.expected[it.Class]
	t := c.tenants[it.Tenant]
	if t == nil {
		return time.Time{}, false
	}
	due := t.users[it.User]
	late := lateFrom(due, now)
	if late == len(due) || due[late].at.After(now) {
		c.set(it.Tenant, it.User, due[late:], late)
		return time.Time{}, false
	}
	at := due[late].at
	c.set(it.Tenant, it.User, due[late+1:], late+1)
	return at, true
}

// set keeps due as a user's comebacks, gone removed from the count.
func (c *comebacks) set(tenant, user string, due []comeback, gone int) {
	c.count -= gone
	t := c.tenants[tenant]
	if len(due) > 0 {
		t.users[user] = due
		return
	}
	delete(t.users, user)
	if len(t.users) == 0 {
		delete(c.tenants, tenant)
	}
}

// lateFrom is how many of due, from the first, are past their grace at now.
func lateFrom(due []comeback, now time.Time) int {
	i, _ := slices.BinarySearchFunc(due, now.Add(-ComebackGrace), func(e comeback, t time.Time) int {
		if e.at.Before(t) {
			return -1
		}
		return 1
	})
	return i
}

// expectedCount is the comebacks expected in every class.
func (q *Queue) expectedCount() int { return q.expected[Interactive].count + q.expected[Batch].count }

// forgetExpected forgets the comebacks whose grace passed by now, and if that leaves too many,
// every one: clients that never came back must not hold the bound.
func (q *Queue) forgetExpected(now time.Time) {
	for i := range q.expected {
		c := &q.expected[i]
		for tenant, t := range c.tenants {
			for user, due := range t.users {
				late := lateFrom(due, now)
				c.set(tenant, user, due[late:], late)
			}
		}
	}
	if q.expectedCount() >= maxExpected {
		q.expected = [2]comebacks{}
	}
}

// of is a user's comebacks not past their grace at now, in the order they are due; none for a nil
// t.
func (t *tenantComebacks) of(user string, now time.Time) []comeback {
	if t == nil {
		return nil
	}
	all := t.users[user]
	return all[lateFrom(all, now):]
}

// dueCost is the cost of the tenant's comebacks due between now (less the grace) and deadline;
// zero for a nil t.
func (t *tenantComebacks) dueCost(now, deadline time.Time) int64 {
	if t == nil {
		return 0
	}
	var cost int64
	for _, all := range t.users {
		for _, c := range all[lateFrom(all, now):] {
			if c.at.After(deadline) {
				break
			}
			cost += c.cost
		}
	}
	return cost
}

// turns are the turns of the lanes of a tenant before an item that waits wait from now is served:
// rounds of them, evenly spread over the wait.
type turns struct {
	now    time.Time
	wait   time.Duration
	rounds int64
	// ahead is the tenant's tokens served before the item, its own included, by the estimate's
	// last pass; zero on its first (see Queue.estimate).
	ahead int64
	// comebacks are those of the item's own lane that go before it: none for an item that came
	// to the door, those its lane is expected to make for one turned away (see ComebackWait).
	comebacks []comeback
	// elsewhere says the lanes waiting on other gateways take their turns too (see SetElsewhere).
	elsewhere bool
}

// inTurns is the cost of the comebacks that a lane with queued items ahead of them is served in
// the first of its turns before the item's (at most tt.rounds): a comeback takes the lane's next
// turn after it is due (mid-round, for a turn comes somewhere in its round), and the comebacks
// come in their order. A lane with nothing queued comes back behind the item in the order of
// turns: its comeback goes after the item's turn of the round it comes in, before the next.
func (tt turns) inTurns(comebacks []comeback, queued, turns int64) int64 {
	var cost int64
	turn, behind := queued+1, int64(0)
	if queued == 0 {
		turn, behind = 2, 1
	}
	for _, c := range comebacks {
		for turn <= turns && c.at.After(tt.turnAt(turn-behind)) {
			turn++
		}
		if turn > turns {
			break
		}
		cost += c.cost
		turn++
	}
	return cost
}

// turnAt is when the turn-th round's turns come, mid-round.
func (tt turns) turnAt(turn int64) time.Time {
	return tt.now.Add(time.Duration(float64(tt.wait) * (float64(turn) - 0.5) / float64(tt.rounds)))
}

// costOf is the cost of comebacks.
func costOf(comebacks []comeback) int64 {
	var cost int64
	for _, c := range comebacks {
		cost += c.cost
	}
	return cost
}
