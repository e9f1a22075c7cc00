package fairqueue

import (
	"container/heap"
	"time"
)

// maxOverdueLooks bounds how many of a tenant's earliest promises past due a turn looks at for a
// lane that may go: past them, its users' order goes on.
const maxOverdueLooks = 64

// Promise records that the door told the caller of a queued item it would wait what its last
// EstimateWait gave, in what its tenant is to have served by then: its own and what goes before
// it (see tenantWorkBefore). Once the tenant has served what goes before it and the item still
// waits, because users who joined later took turns before it, its lane goes first in its
// tenant's turns until it has gone; and the estimates of its tenant's other users count it before
// them. A promise is reckoned in the tenant's own tokens, not in time, so that a drain slower than
// the door expected breaks no promise and makes no lane go before its turn, and a promise never
// takes the turn of another tenant.
func (q *Queue) Promise(it *Item) {
	if !it.Queued() || it.promised > 0 || it.estimated <= 0 {
		return
	}
	t := it.user.tenant
	it.promise = t.served + it.estimated
	heap.Push(&t.promises, it)
}

// promises are a tenant's items with a promise, as a heap, the earliest first.
type promises []*Item

func (p promises) Len() int           { return len(p) }
func (p promises) Less(i, j int) bool { return p[i].promise < p[j].promise }
func (p promises) Swap(i, j int) {
	p[i], p[j] = p[j], p[i]
	p[i].promised, p[j].promised = i+1, j+1
}

func (p *promises) Push(x any) {
	it := x.(*Item)
	*p = append(*p, it)
	it.promised = len(*p)
}

func (p *promises) Pop() any {
	old := *p
	it := old[len(old)-1]
	old[len(old)-1] = nil
	*p = old[:len(old)-1]
	it.promised = 0
	return it
}

// drop forgets the item's promise, if it has one.
func (p *promises) drop(it *Item) {
	if it.promised > 0 {
		heap.Remove(p, it.promised-1)
	}
}

// overdue returns the first item of the lane of the tenant's earliest promise past due (the
// tenant has served what it promised, and the item waits still) whose lane may go at now: no limit
// blocks it and hold (nil holds none) does not hold its first item. It looks at the
// maxOverdueLooks earliest, and returns nil when none of those may go.
func (t *tenantLane) overdue(now time.Time, hold func(*Item) bool) *Item {
	var looked [maxOverdueLooks]*Item
	n := 0
	var first *Item
	for n < maxOverdueLooks && len(t.promises) > 0 && t.promises[0].promise <= t.served {
		it := heap.Pop(&t.promises).(*Item)
		looked[n], n = it, n+1
		if first = it.user.open(now, hold); first != nil {
			break
		}
	}
	for _, it := range looked[:n] {
		heap.Push(&t.promises, it)
	}
	return first
}

// open returns the lane's first item if no limit blocks the lane at now and hold (nil holds
// none) does not hold it; else nil.
func (u *userLane) open(now time.Time, hold func(*Item) bool) *Item {
	if now.Before(u.blockedUntil) {
		return nil
	}
	if it := u.items.Front().Value.(*Item); hold == nil || !hold(it) {
		return it
	}
	return nil
}

// promisedBefore is what the tenant's other users' lanes were promised before the item, beyond
// the turns tenantWorkBefore gives them when the item stands at position in its lane and waits
// wait: the tenant serves work before the item goes, its own cost included, and a promise that
// comes due by then (see overdue) goes first.
func (t *tenantLane) promisedBefore(it *Item, work, position int64, wait time.Duration) int64 {
	if len(t.promises) == 0 {
		return 0
	}
	by, before := t.served+work-it.Cost, position
	var extra int64
	for e := t.users.Front(); e != nil; e = e.Next() {
		u := e.Value.(*userLane)
		if u.name == it.User {
			before = position - 1
			continue
		}
		extra += max(u.promisedBy(by)-u.firstCost(u.turnsWithin(before, wait)), 0)
	}
	return extra
}

// promisedBy is the cost of the lane's first items promised by the tenant's served tokens by.
func (u *userLane) promisedBy(by int64) int64 {
	var cost int64
	for e := u.items.Front(); e != nil; e = e.Next() {
		it := e.Value.(*Item)
		if it.promised == 0 || it.promise > by {
			break
		}
		cost += it.Cost
	}
	return cost
}
