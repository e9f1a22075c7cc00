// Package fairqueue holds the requests that may not go yet, says which goes next, and estimates
// how long each waits: the model the gateway's door answers callers by.
//
// # Lanes and turns
//
// Each tenant has a lane, and each user a lane inside it. Tenants are served by deficit
// round-robin weighted by their plan's weight, with cost counted in tokens; a tenant's users take
// one item each in turn. A tenant's wait is proportional to what it asked for, not to what others
// asked for: a tenant with thousands of requests queued delays another's single request by at
// most one round. Interactive lanes are served before Batch lanes, but Batch keeps a share of
// what is served (DefaultBatchShare) so it never starves.
//
// # Estimates, promises and comebacks
//
// EstimateWait is how long an item waits at a given drain: what its own lane has ahead of it, one
// item a turn of its tenant's other lanes, and each other tenant at its weight meanwhile. The
// door lets a call in when that is within its bound and answers busy when it is not. A call let
// in is promised its estimate (Promise): users who join later take turns beside it, but do not
// push it past what it was told. A call turned away is told when to come back (ComebackWait) and
// is expected then (Expect): until it comes, other estimates still count its lane's turns, so a
// crowd told to come back is spread at the rate the queue drains.
//
// # A worked example
//
// A provider's queue drains 5,000 tokens a second, and every page costs 1,000 tokens. Ann, of
// tenant acme, has 30 pages queued; Bob, of tenant zeta, has 2. The door's bound is 5 s.
//   - Carl, new to acme, sends a page. His lane takes turns with Ann's: one of her pages goes
//     before his, and zeta's two pages go beside them. He waits 0.8 s, and is let in with that
//     promise.
//   - Dora, of a new tenant, sends a page. Acme and zeta each serve one page beside hers: 0.6 s.
//   - Ann sends a 31st page. It waits behind her 30 and beside zeta's two: 6.6 s, past the
//     bound. The door answers busy and tells her to come back when her lane's wait is down to
//     half the bound, 6.6 - 2.5 = 4.1 s from now (a random part of her page's 0.2 s of the
//     drain added), which the Retry-After header states as 5 s. The queue expects her page
//     then, and counts it in the estimates of the others who come meanwhile.
//
// Example runs these figures.
//
// The Queue is the pure core: it takes the time as an argument, never waits and never looks at
// what it holds. The gateway's dispatcher asks it for the next request, asks the limiter whether
// that request may go, and tells the queue what happened; the gateway's door asks it for
// estimates.
package fairqueue

import (
	"container/list"
	"time"
)

// Class is a priority class.
type Class uint8

// The classes, served in this order.
const (
	Interactive Class = iota
	Batch
)

// DefaultBatchShare is the share of served tokens Batch lanes keep while Interactive lanes wait,
// unless Options say otherwise.
const DefaultBatchShare = 0.1

// Options configures a Queue. The zero value is usable.
type Options struct {
	// Quantum is the tokens a tenant of weight 1 may be served per round. Zero means 8192: a few
	// typical requests, so a round is short and a request rarely waits several rounds for its
	// tenant's deficit to cover it.
	Quantum int64
	// BatchShare is the share of served tokens that Batch lanes get while Interactive lanes are
	// busy. Zero means DefaultBatchShare.
	BatchShare float64
	// Hold, when set, is asked of the first item of each open lane before it is served: true
	// holds the lane back for now, as the lanes of other gateways sharing the provider are owed
	// first (see package fairshare). Nil holds nothing.
	Hold func(it *Item) bool
}

// Item is one waiting request.
type Item struct {
	Tenant string
	User   string
	// Weight is the tenant's weight; at least 1.
	Weight int32
	Class  Class
	// Cost is the request's tokens, as the provider it waits for counts them.
	Cost int64
	// Own is how long the limits of the item's own user take to let it through once they are
	// spent (see OwnWait); zero when none holds it back.
	Own time.Duration
	// Joins is when a lane the item opens joins the queue (see Horizon): when it came to the door,
	// but zero for an item that came back when told (see CameBack), whose turns were foreseen.
	Joins time.Time
	// Value is the caller's; the queue never looks at it.
	Value any

	user *userLane
	elem *list.Element
	// estimated is its tenant's tokens served before it, its own included, by its last estimate
	// (see Queue.estimate); promise is the tokens its tenant is to have served when it goes, as
	// the door told its caller (see Promise), 0 for none.
	estimated, promise int64
}

// Queue is a set of fair lanes. The zero value is not usable; call New. A Queue is not safe for
// concurrent use: its owner (one dispatcher per provider) serializes calls.
type Queue struct {
	opts    Options
	classes [2]*rounds
	served  [2]int64 // tokens served per class since the queue was last empty
	items   int
	cost    int64
	// expected are the items the door turned away and expects back, per class (see Expect).
	expected [2]comebacks
	// elsewhere is what waits on each other gateway sharing the provider (see SetElsewhere).
	elsewhere []Backlog
}

// New returns an empty queue.
func New(opts Options) *Queue {
	if opts.Quantum <= 0 {
		opts.Quantum = 8192
	}
	if opts.BatchShare <= 0 {
		opts.BatchShare = DefaultBatchShare
	}
	return &Queue{opts: opts, classes: [2]*rounds{newRounds(), newRounds()}}
}

// Len returns the number of waiting items.
func (q *Queue) Len() int { return q.items }

// Cost returns the waiting items' total cost.
func (q *Queue) Cost() int64 { return q.cost }

// Queued reports whether the item is in a queue.
func (it *Item) Queued() bool { return it.elem != nil }

// Push adds an item at the back of its lane.
func (q *Queue) Push(it *Item) {
	it.Weight = max(it.Weight, 1)
	q.classes[it.Class].push(it)
	q.items++
	q.cost += it.Cost
}

// Next returns the item to send next, without removing it: call Pop when it goes, Remove when it
// leaves, or Block when a limit of its own lane holds it. In a tenant's turn, a lane whose promise
// is past due (see Promise) goes before its users' order. It returns nil when nothing may go at
// now, with the earliest time a blocked lane opens (zero if none is blocked; a lane Options.Hold
// holds opens when its owner says, and calls Next again).
func (q *Queue) Next(now time.Time) (*Item, time.Time) {
	first, second := q.order()
	it, opensA := q.classes[first].next(now, q.opts.Quantum, q.opts.Hold)
	if it != nil {
		return it, time.Time{}
	}
	it, opensB := q.classes[second].next(now, q.opts.Quantum, q.opts.Hold)
	if it != nil {
		return it, time.Time{}
	}
	return nil, earliest(opensA, opensB)
}

// order returns the class to serve first: Interactive, unless Batch has waited and has had less
// than its share.
func (q *Queue) order() (Class, Class) {
	total := q.served[Interactive] + q.served[Batch]
	if q.classes[Batch].items > 0 && float64(q.served[Batch]) < q.opts.BatchShare*float64(total) {
		return Batch, Interactive
	}
	return Interactive, Batch
}

// Pop removes an item that Next returned and is going now, charging its cost to its tenant's
// round.
func (q *Queue) Pop(it *Item) {
	q.served[it.Class] += it.Cost
	it.user.tenant.deficit -= it.Cost
	it.user.tenant.served += it.Cost
	q.classes[it.Class].served(it)
	q.remove(it)
}

// Remove takes an item out without serving it: its client left, or it was refused.
func (q *Queue) Remove(it *Item) {
	if it.elem != nil {
		q.remove(it)
	}
}

func (q *Queue) remove(it *Item) {
	q.classes[it.Class].remove(it)
	q.items--
	q.cost -= it.Cost
	if q.classes[Interactive].items == 0 || q.classes[Batch].items == 0 {
		q.served = [2]int64{} // the share counts only while both classes wait
	}
}

// Block holds an item's lane until a time: its user's lane, or its whole tenant when tenantWide
// (a limit of the tenant's own refused it). Other lanes go on.
func (q *Queue) Block(it *Item, until time.Time, tenantWide bool) {
	if tenantWide {
		it.user.tenant.blockedUntil = until
		return
	}
	it.user.blockedUntil = until
}

// Open calls visit with the first item of each lane that waits and that no limit blocks at now.
func (q *Queue) Open(now time.Time, visit func(it *Item)) {
	for _, r := range q.classes {
		r.open(now, visit)
	}
}

// Items returns every waiting item, each lane's oldest first.
func (q *Queue) Items() []*Item {
	out := make([]*Item, 0, q.items)
	for _, r := range q.classes {
		for e := r.active.Front(); e != nil; e = e.Next() {
			for ue := e.Value.(*tenantLane).users.Front(); ue != nil; ue = ue.Next() {
				for ie := ue.Value.(*userLane).items.Front(); ie != nil; ie = ie.Next() {
					out = append(out, ie.Value.(*Item))
				}
			}
		}
	}
	return out
}

// Ahead returns how many items of a tenant wait, and their cost.
func (q *Queue) Ahead(class Class, tenant string) (items int, cost int64) {
	if t := q.classes[class].tenants[tenant]; t != nil {
		return t.items, t.cost
	}
	return 0, 0
}

// EstimateWait returns how long an item would wait from now until it is served, when the queue
// drains tokensPerSecond under its fair sharing: an item not yet queued as if pushed now, a
// queued one from where it stands. It returns -1 when nothing drains, and records on the item
// what its tenant serves before it, for Promise.
//
// Before the item go, in its tenant: the items ahead of it in its lane, and one item a turn of
// each other lane of the tenant for as many turns as the item waits (see tenantWorkBefore). Each
// other tenant of its class is served meanwhile at its weight, up to what it has waiting. Lanes
// the door turned away count with the comebacks they are expected to make in time (see Expect).
// The class gets its share of the drain.
func (q *Queue) EstimateWait(it *Item, tokensPerSecond float64, now time.Time) time.Duration {
	return q.estimate(it, tokensPerSecond, now, turns{})
}

// OwnWait returns how long the item waits for the limits of its own user, whatever the lanes of
// others do: each item of its lane up to it (all of them and then it, for an item not queued)
// takes them its Own, less credit, the time what they hold now lasts.
func (q *Queue) OwnWait(it *Item, credit time.Duration) time.Duration {
	total := it.Own
	if t := q.classes[it.Class].tenants[it.Tenant]; t != nil {
		if lane := t.byUser[it.User]; lane != nil {
			_, _, total = lane.upTo(it)
		}
	}
	return max(total-credit, 0)
}

// ComebackWait is EstimateWait for an item turned away, which comes back after the comebacks its
// lane is already expected to make: they go ahead of it in its lane. Its wait is long, and the
// lanes waiting on other gateways sharing the provider take their turns in it (see SetElsewhere):
// tokensPerSecond is then what the lanes of every gateway drain together. The door tells it to
// come back when this wait is within a share of its maxWait.
func (q *Queue) ComebackWait(it *Item, tokensPerSecond float64, now time.Time) time.Duration {
	ahead := q.expected[it.Class].tenants[it.Tenant].of(it.User, now)
	return q.estimate(it, tokensPerSecond, now, turns{comebacks: ahead, elsewhere: true})
}

// estimate is EstimateWait with what tt says of the item's turns: comebacks of its own lane that
// go before it, and whether the other gateways' lanes count. What is served before the item
// depends on how long it waits, and the wait on what is served before it: each pass counts what
// comes in time by the last pass's wait, which only grows.
func (q *Queue) estimate(it *Item, tokensPerSecond float64, now time.Time, tt turns) time.Duration {
	it.estimated = 0
	rate := tokensPerSecond * q.classShare(it.Class)
	if rate <= 0 {
		return -1
	}
	var wait time.Duration
	for range estimatePasses {
		tt.now, tt.wait, tt.ahead = now, wait, it.estimated
		total, own := q.workBefore(it, tt)
		next := time.Duration(total / rate * float64(time.Second))
		if next <= wait {
			break
		}
		wait, it.estimated = next, own
	}
	return wait
}

// estimatePasses bounds the passes of an estimate.
const estimatePasses = 5

// workBefore is the tokens served before the item if it waits tt.wait, and of them its own
// tenant's (see tenantWorkBefore). Every other tenant of its class is served at its weight in
// the same time, up to what it has waiting and the comebacks it expects within the wait, and, when
// tt says so, the other gateways' lanes as many turns as its lane takes (see SetElsewhere).
func (q *Queue) workBefore(it *Item, tt turns) (total float64, own int64) {
	r, expected := q.classes[it.Class], q.expected[it.Class].tenants
	own, laneTurns := r.tenantWorkBefore(it, expected[it.Tenant], tt)
	weight := float64(max(it.Weight, 1))
	total = float64(own)
	if tt.elsewhere {
		total += q.elsewhereWork(laneTurns, tt.wait)
	}
	share := func(cost, tenantWeight int64) {
		total += min(float64(cost), float64(own)*float64(tenantWeight)/weight)
	}
	deadline := tt.now.Add(tt.wait)
	for name, t := range r.tenants {
		if name != it.Tenant {
			share(t.cost+expected[name].dueCost(tt.now, deadline), t.weight)
		}
	}
	for name, t := range expected {
		if name != it.Tenant && r.tenants[name] == nil {
			share(t.dueCost(tt.now, deadline), t.weight)
		}
	}
	return total, own
}

// classShare is the share of the drain a class gets while the other class also waits.
func (q *Queue) classShare(c Class) float64 {
	other := q.classes[1-c].items > 0
	switch {
	case !other:
		return 1
	case c == Batch:
		return q.opts.BatchShare
	default:
		return 1 - q.opts.BatchShare
	}
}

func earliest(a, b time.Time) time.Time {
	if a.IsZero() || (!b.IsZero() && b.Before(a)) {
		return b
	}
	return a
}
