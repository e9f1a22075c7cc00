package fairqueue

import (
	"sort"
	"time"
)

// GrowthWindow is how far back a queue looks for the lanes that joined it (see Growth).
const GrowthWindow = 10 * time.Second

// steadyShare is how much the lanes that share an item's turns may grow, as a share of them,
// within a wait the queue promises behind others of its lane: lanes that join over the wait take
// their turns from then on, so an estimate made before they came falls short by about half of it.
const steadyShare = 0.1

// Growth returns how many lanes join the queue a GrowthWindow at the pace they kept over the
// last one (see sustained), as a share of those an item shares its turns with: other users of its
// tenant, and other tenants of its class by weight (see joins). It is zero for an item its lane's
// first (its lane has nothing queued before it): a lane that joins later takes its turn after it.
// Behind others of its lane, an item waits rounds, and a lane that joins meanwhile takes a turn
// of each round ahead of it.
func (q *Queue) Growth(it *Item, now time.Time) float64 {
	r := q.classes[it.Class]
	t := r.tenants[it.Tenant]
	if t == nil || t.byUser[it.User] == nil || t.byUser[it.User].items.Front().Value.(*Item) == it {
		return 0
	}
	user, tenant := r.joins.lanes[lane{tenant: it.Tenant, user: it.User}], r.joins.lanes[lane{tenant: it.Tenant, tenantWide: true}]
	growth := float64(sustained(r.joins.users[it.Tenant], now, user.joined)) / float64(t.users.Len())
	return growth + float64(sustained(r.joins.tenants, now, tenant.joined))/float64(r.weights)
}

// Horizon returns the longest wait a queue whose lanes grow by growth a window (see Growth) may
// promise, or -1 when it sets no bound: the wait within which, at that pace, the lanes joining
// would add steadyShare to those the item shares its turns with.
func Horizon(growth float64) time.Duration {
	if growth <= 0 {
		return -1
	}
	return time.Duration(steadyShare / growth * float64(GrowthWindow))
}

// joins are the lanes of a class that joined its queue within the last GrowthWindow: users whose
// lane an item with a time it Joins opened, that had pushed none in the window before, by tenant,
// and tenants likewise, weighted by the tenant's weight. A user who comes and goes within the
// window, one call at a time, joins once, so a lane joins at most once in any window.
type joins struct {
	lanes   map[lane]laneJoins
	users   map[string][]joined
	tenants []joined
	bound   int // how many lanes may be remembered before those past the window are forgotten
}

// lane names a user's lane, or with tenantWide its tenant's.
type lane struct {
	tenant, user string
	tenantWide   bool
}

// laneJoins is when a lane last pushed an item that Joins, and its last join.
type laneJoins struct {
	pushed time.Time
	joined joined
}

// joined is a lane's join, with the weight of its list up to and with it (since the list began:
// the weight between two joins is the difference of their totals).
type joined struct {
	at            time.Time
	weight, total int64
}

// add records the item pushed, and whether it opened its tenant's lane and its user's.
func (j *joins) add(it *Item, tenantOpened, userOpened bool) {
	at := it.Joins
	if at.IsZero() {
		return
	}
	if j.lanes == nil {
		j.lanes, j.users = map[lane]laneJoins{}, map[string][]joined{}
	}
	if e, ok := j.pushed(lane{tenant: it.Tenant, user: it.User}, at, 1, userOpened); ok {
		j.users[it.Tenant] = appendJoined(j.users[it.Tenant], e)
	}
	if e, ok := j.pushed(lane{tenant: it.Tenant, tenantWide: true}, at, int64(max(it.Weight, 1)), tenantOpened); ok {
		j.tenants = appendJoined(j.tenants, e)
	}
	if len(j.lanes) > j.bound {
		j.forget(at)
		j.bound = max(minJoinsBound, 2*len(j.lanes))
	}
}

// pushed records that the lane pushed at, and returns its join, of weight, when it opened and
// had pushed none in the window before.
func (j *joins) pushed(l lane, at time.Time, weight int64, opened bool) (joined, bool) {
	seen, ok := j.lanes[l]
	joins := opened && (!ok || at.Sub(seen.pushed) > GrowthWindow)
	seen.pushed = at
	if joins {
		seen.joined = joined{at: at, weight: weight}
	}
	j.lanes[l] = seen
	return seen.joined, joins
}

// appendJoined appends e to list, dropping those that joined a window before it.
func appendJoined(list []joined, e joined) []joined {
	e.total = e.weight
	if len(list) > 0 {
		e.total += list[len(list)-1].total
	}
	drop := 0
	for drop < len(list) && e.at.Sub(list[drop].at) > GrowthWindow {
		drop++
	}
	return append(list[drop:], e)
}

// sustained is the weight of the lanes of list, but the join except, that join a GrowthWindow at
// the pace they kept over the last window before now: twice the fewer of those that joined in
// either half of it. A crowd that came at once, and nobody since, keeps no pace: its lanes are all
// in the estimates already.
func sustained(list []joined, now time.Time, except joined) int64 {
	from, half := now.Add(-GrowthWindow), now.Add(-GrowthWindow/2)
	recent := weightAfter(list, half)
	earlier := weightAfter(list, from) - recent
	switch {
	case except.at.After(half):
		recent -= except.weight
	case except.at.After(from):
		earlier -= except.weight
	}
	return 2 * min(earlier, recent)
}

// weightAfter is the weight of the lanes of list, in the order they joined, that joined after t.
func weightAfter(list []joined, t time.Time) int64 {
	i := sort.Search(len(list), func(i int) bool { return list[i].at.After(t) })
	if i == len(list) {
		return 0
	}
	last, first := list[len(list)-1], list[i]
	return last.total - first.total + first.weight
}

// minJoinsBound is the fewest lanes joins remembers before it forgets those past the window.
const minJoinsBound = 10_000

// forget drops what joins holds from a window before now.
func (j *joins) forget(now time.Time) {
	for l, seen := range j.lanes {
		if now.Sub(seen.pushed) > GrowthWindow {
			delete(j.lanes, l)
		}
	}
	for tenant, list := range j.users {
		if now.Sub(list[len(list)-1].at) > GrowthWindow {
			delete(j.users, tenant)
		}
	}
}
