package fairqueue

import (
	"container/list"
	"time"
)

// rounds is deficit round-robin over the tenants of one class.
type rounds struct {
	active  *list.List // of *tenantLane with waiting items, in round order
	tenants map[string]*tenantLane
	weights int64 // the sum of the active tenants' weights
	items   int
	joins   joins
}

// tenantLane is a tenant's place in the rounds, with its users' lanes served in turn.
type tenantLane struct {
	name         string
	weight       int64
	deficit      int64 // tokens the tenant may still be served this round
	visited      bool  // the tenant has had this round's quantum
	blockedUntil time.Time
	users        *list.List // of *userLane with waiting items, in turn order
	byUser       map[string]*userLane
	items        int
	cost         int64
	elem         *list.Element
	served       int64        // tokens served since the lane opened: the clock of its promises
	promises     lanePromises // its user lanes with a promise, the earliest first
}

// userLane is one user's waiting items, oldest first.
type userLane struct {
	tenant       *tenantLane
	name         string
	items        *list.List // of *Item
	blockedUntil time.Time
	elem         *list.Element
	// promise is the earliest of its items' promises (see Queue.Promise), and promised its place
	// in its tenant's promises, plus one; 0 when it holds none.
	promise  int64
	promised int
}

func newRounds() *rounds {
	return &rounds{active: list.New(), tenants: map[string]*tenantLane{}}
}

func (r *rounds) push(it *Item) {
	t := r.tenants[it.Tenant]
	tenantJoins := t == nil
	if tenantJoins {
		t = &tenantLane{name: it.Tenant, weight: int64(it.Weight), users: list.New(), byUser: map[string]*userLane{}}
		t.elem = r.active.PushBack(t)
		r.tenants[it.Tenant] = t
		r.weights += t.weight
	}
	u := t.byUser[it.User]
	userJoins := u == nil
	if userJoins {
		u = &userLane{tenant: t, name: it.User, items: list.New()}
		u.elem = t.users.PushBack(u)
		t.byUser[it.User] = u
	}
	r.joins.add(it, tenantJoins, userJoins)
	it.user = u
	it.elem = u.items.PushBack(it)
	t.items++
	t.cost += it.Cost
	r.items++
}

// served puts the lane of an item just served behind its tenant's other lanes: users of a tenant
// take turns, and a lane passed over because a limit or a hold kept it keeps its place, to go
// first when it opens.
func (r *rounds) served(it *Item) {
	if u := it.user; u.items.Len() > 1 {
		u.tenant.users.MoveToBack(u.elem)
	}
}

func (r *rounds) remove(it *Item) {
	u, t := it.user, it.user.tenant
	u.items.Remove(it.elem)
	it.elem = nil
	t.promises.left(u, it)
	t.items--
	t.cost -= it.Cost
	r.items--
	if u.items.Len() == 0 {
		t.users.Remove(u.elem)
		delete(t.byUser, u.name)
	}
	if t.items == 0 {
		r.active.Remove(t.elem)
		delete(r.tenants, t.name)
		r.weights -= t.weight
	}
}

// next walks the rounds until a tenant's deficit covers the head of one of its open lanes. A
// tenant gets quantum × weight when its turn starts and keeps what it does not spend while it
// has items waiting; its turn ends when its next item costs more than it has left.
func (r *rounds) next(now time.Time, quantum int64, hold func(*Item) bool) (*Item, time.Time) {
	var opens time.Time
	passes := 0
	for e := r.active.Front(); e != nil; e = r.active.Front() {
		t := e.Value.(*tenantLane)
		it, until := t.head(now, hold)
		if it == nil {
			opens = earliest(opens, until)
			if passes++; passes > r.active.Len() {
				return nil, opens // every tenant is blocked
			}
			r.active.MoveToBack(e)
			continue
		}
		passes = 0
		if !t.visited {
			t.deficit += quantum * t.weight
			t.visited = true
		}
		if it.Cost <= t.deficit {
			return it, time.Time{}
		}
		t.visited = false
		r.active.MoveToBack(e)
	}
	return nil, opens
}

// head returns the first item of the tenant's open user lane of the earliest promise past due
// (see overdue), or else of its first open user lane, that hold does not hold (nil holds none),
// or when there is none, the earliest time a blocked lane opens.
func (t *tenantLane) head(now time.Time, hold func(*Item) bool) (*Item, time.Time) {
	if now.Before(t.blockedUntil) {
		return nil, t.blockedUntil
	}
	if it := t.overdue(now, hold); it != nil {
		return it, time.Time{}
	}
	var opens time.Time
	for e := t.users.Front(); e != nil; e = e.Next() {
		u := e.Value.(*userLane)
		if now.Before(u.blockedUntil) {
			opens = earliest(opens, u.blockedUntil)
			continue
		}
		if it := u.items.Front().Value.(*Item); hold == nil || !hold(it) {
			return it, time.Time{}
		}
	}
	return nil, opens
}

// open calls visit with the first item of each lane that no limit blocks at now.
func (r *rounds) open(now time.Time, visit func(*Item)) {
	for e := r.active.Front(); e != nil; e = e.Next() {
		t := e.Value.(*tenantLane)
		if now.Before(t.blockedUntil) {
			continue
		}
		for ue := t.users.Front(); ue != nil; ue = ue.Next() {
			if u := ue.Value.(*userLane); !now.Before(u.blockedUntil) {
				visit(u.items.Front().Value.(*Item))
			}
		}
	}
}

// tenantWorkBefore is what the item's tenant serves until it has served the item, the item
// included. Its own lane serves the items up to it (all of them, for an item not queued), after
// tt.comebacks. It waits that many turns of its tenant: each other lane of the tenant takes one
// item a turn, one turn fewer when its turn comes after the item's lane's in the round, and
// takes the comebacks it expects in the turns it has (see inTurns). A lane whose items were
// promised a turn before the item goes, by the estimate's last pass (see Queue.Promise), serves
// those items if more. No lane serves more than its user's own limits let it within the wait. It
// returns the turns too.
func (r *rounds) tenantWorkBefore(it *Item, comebacks *tenantComebacks, tt turns) (work, turns int64) {
	t := r.tenants[it.Tenant]
	position, work := int64(1), it.Cost // not queued: after its lane's items
	if t != nil {
		if lane := t.byUser[it.User]; lane != nil {
			position, work, _ = lane.upTo(it)
		}
	}
	position, work = position+int64(len(tt.comebacks)), work+costOf(tt.comebacks)
	tt.rounds = position
	if t != nil {
		// The promises that come due before the item goes, by the estimate's last pass.
		due := max(t.served+tt.ahead-it.Cost, 0)
		before := position // the lanes whose turns come before the item's lane's
		for e := t.users.Front(); e != nil; e = e.Next() {
			u := e.Value.(*userLane)
			if u.name == it.User {
				before = position - 1
				continue
			}
			queued := int64(u.items.Len())
			work += u.servedBefore(before, due, u.turnsWithin(queued, tt.wait)) + tt.inTurns(comebacks.of(u.name, tt.now), queued, before)
		}
	}
	if comebacks != nil {
		for user := range comebacks.users {
			if user != it.User && (t == nil || t.byUser[user] == nil) {
				work += tt.inTurns(comebacks.of(user, tt.now), 0, position)
			}
		}
	}
	return work, position
}

// upTo returns it's position in the lane and the cost and Own of the lane's items up to it, it
// included; for an item not in the lane, of the lane's items and it after them.
func (u *userLane) upTo(it *Item) (position, cost int64, own time.Duration) {
	for e := u.items.Front(); e != nil; e = e.Next() {
		item := e.Value.(*Item)
		position, cost, own = position+1, cost+item.Cost, own+item.Own
		if item == it {
			return position, cost, own
		}
	}
	return position + 1, cost + it.Cost, own + it.Own
}

// turnsWithin is how many of turns the lane takes within wait: all of them, but that a lane its
// user's own limits hold back (Item.Own) takes one, then one each Own.
func (u *userLane) turnsWithin(turns int64, wait time.Duration) int64 {
	if own := u.items.Front().Value.(*Item).Own; own > 0 {
		return min(turns, int64(wait/own)+1)
	}
	return turns
}
