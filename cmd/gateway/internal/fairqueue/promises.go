package fairqueue

import (
	"container/heap"
	"time"
)

// maxOverdueLooks bounds how many of the earliest promises past due Next looks at for a lane that
// may go: past them, the rounds go on in their own order.
const maxOverdueLooks = 64

// promises are the queued items of a class that carry a Promise, as a heap, the earliest first.
type promises []*Item

func (p promises) Len() int           { return len(p) }
func (p promises) Less(i, j int) bool { return p[i].Promise.Before(p[j].Promise) }
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

// keep records the item's promise, if it carries one.
func (p *promises) keep(it *Item) {
	if !it.Promise.IsZero() {
		heap.Push(p, it)
	}
}

// drop forgets the item's promise, if it is kept.
func (p *promises) drop(it *Item) {
	if it.promised > 0 {
		heap.Remove(p, it.promised-1)
	}
}

// overdue returns the first item of the lane of the earliest promise due by now whose lane may
// go (no limit blocks it and hold does not hold it), of the maxOverdueLooks earliest; nil when
// none is due or none of those may go.
func (r *rounds) overdue(now time.Time, hold func(*Item) bool) *Item {
	var looked [maxOverdueLooks]*Item
	n := 0
	var head *Item
	for n < maxOverdueLooks && len(r.promises) > 0 && !r.promises[0].Promise.After(now) {
		it := heap.Pop(&r.promises).(*Item)
		looked[n], n = it, n+1
		if head = it.user.open(now, hold); head != nil {
			break
		}
	}
	for _, it := range looked[:n] {
		heap.Push(&r.promises, it)
	}
	return head
}

// open returns the lane's first item if no limit blocks the lane or its tenant at now and hold
// (nil holds none) does not hold it; else nil.
func (u *userLane) open(now time.Time, hold func(*Item) bool) *Item {
	if now.Before(u.blockedUntil) || now.Before(u.tenant.blockedUntil) {
		return nil
	}
	if it := u.items.Front().Value.(*Item); hold == nil || !hold(it) {
		return it
	}
	return nil
}

// servedBefore is the cost the lane is served before an item served at deadline: its first n
// items, or more when more of them are promised by deadline, which the queue keeps even where the
// rounds would not have come to them.
func (u *userLane) servedBefore(n int64, deadline time.Time) int64 {
	var cost int64
	for e := u.items.Front(); e != nil; e = e.Next() {
		it := e.Value.(*Item)
		if n <= 0 && (it.Promise.IsZero() || it.Promise.After(deadline)) {
			break
		}
		cost, n = cost+it.Cost, n-1
	}
	return cost
}

// promisedBy is the cost of the tenant's items promised by deadline (see userLane.servedBefore).
func (t *tenantLane) promisedBy(deadline time.Time) int64 {
	var cost int64
	for e := t.users.Front(); e != nil; e = e.Next() {
		cost += e.Value.(*userLane).servedBefore(0, deadline)
	}
	return cost
}
