package fairqueue

import (
	"container/heap"
	"time"
)

// maxOverdueLooks bounds how many of a tenant's lanes with a promise past due a turn looks at
// for one that may go: past them, its users' order goes on.
const maxOverdueLooks = 64

// Promise records that the door told the caller of a queued item the wait of its last estimate
// (EstimateWait). The promise is kept in the tenant's own served tokens, not in time: the item
// goes once its tenant has served what the estimate counted before it, and the item. If it still
// waits then (users who joined later took turns before it), its lane goes first in its tenant's
// turns until it has gone. The estimates of the tenant's other users count it before them. A
// drain slower than expected makes no promise due, and a promise never takes another tenant's
// turn. A lane without a promise (a job's) takes the turns promises leave it.
func (q *Queue) Promise(it *Item) {
	if !it.Queued() || it.promise > 0 || it.estimated <= 0 {
		return
	}
	u := it.user
	it.promise = u.tenant.served + it.estimated
	u.tenant.promises.lower(u, it.promise)
}

// lanePromises are a tenant's user lanes with a promise, as a heap, the lane of the earliest
// first.
type lanePromises []*userLane

func (p lanePromises) Len() int           { return len(p) }
func (p lanePromises) Less(i, j int) bool { return p[i].promise < p[j].promise }
func (p lanePromises) Swap(i, j int) {
	p[i], p[j] = p[j], p[i]
	p[i].promised, p[j].promised = i+1, j+1
}

func (p *lanePromises) Push(x any) {
	u := x.(*userLane)
	*p = append(*p, u)
	u.promised = len(*p)
}

func (p *lanePromises) Pop() any {
	old := *p
	u := old[len(old)-1]
	old[len(old)-1] = nil
	*p = old[:len(old)-1]
	u.promised = 0
	return u
}

// lower makes promise the lane's earliest if it is earlier than the lane's.
func (p *lanePromises) lower(u *userLane, promise int64) {
	switch {
	case u.promised == 0:
		u.promise = promise
		heap.Push(p, u)
	case promise < u.promise:
		u.promise = promise
		heap.Fix(p, u.promised-1)
	}
}

// left takes account of a promised item that left its lane: the lane's earliest promise is
// reckoned again from the items it still holds.
func (p *lanePromises) left(u *userLane, it *Item) {
	if it.promise == 0 || it.promise > u.promise || u.promised == 0 {
		return
	}
	earliest := int64(0)
	for e := u.items.Front(); e != nil; e = e.Next() {
		if promise := e.Value.(*Item).promise; promise > 0 && (earliest == 0 || promise < earliest) {
			earliest = promise
		}
	}
	if earliest == 0 {
		heap.Remove(p, u.promised-1)
		return
	}
	u.promise = earliest
	heap.Fix(p, u.promised-1)
}

// overdue returns the first item of the tenant's lane of the earliest promise past due (the
// tenant has served what it promised, and the item still waits) that may go at now: no limit
// blocks the lane and hold (nil holds none) does not hold its first item. It looks at the
// maxOverdueLooks lanes of the earliest promises, and returns nil when none of those may go.
func (t *tenantLane) overdue(now time.Time, hold func(*Item) bool) *Item {
	var looked [maxOverdueLooks]*userLane
	n := 0
	var first *Item
	for n < maxOverdueLooks && len(t.promises) > 0 && t.promises[0].promise <= t.served {
		u := heap.Pop(&t.promises).(*userLane)
		looked[n], n = u, n+1
		if first = u.open(now, hold); first != nil {
			break
		}
	}
	for _, u := range looked[:n] {
		heap.Push(&t.promises, u)
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

// servedBefore is the cost of the lane's items served before an item: its first turns items, or
// more when more of them, from the first, are promised by the tenant's served tokens by (zero for
// none), which come due first; never more than most, what its user's own limits let it take
// within the wait (see turnsWithin). A lane's promises grow along it, as each counts those before
// it.
func (u *userLane) servedBefore(turns, by, most int64) int64 {
	var cost int64
	for e := u.items.Front(); e != nil && most > 0; e = e.Next() {
		it := e.Value.(*Item)
		if turns <= 0 && (it.promise == 0 || it.promise > by) {
			break
		}
		cost, turns, most = cost+it.Cost, turns-1, most-1
	}
	return cost
}
