// Package fairshare keeps the fair queue fair across the gateways that share a provider. Each
// gateway serves its own queue by deficit round-robin (package fairqueue), and a ledger the
// gateways share says how much each lane has been served by all of them together: a class's
// tokens over its share (Interactive first, Batch keeping its share), a tenant's tokens over its
// weight, and a user's tokens inside its tenant. A lane more than a slack ahead of the
// least-served lane of its group waiting on any gateway is held back, so that together the
// gateways serve Interactive before Batch, tenants at their weights and a tenant's users equally,
// whichever gateway each call reached. Each gateway is counted too, its tokens over the share of
// the provider its waiting lanes are owed: one more than a slack of its own ahead of the least
// served gateway that has a lane to serve is held back, so that the gateways drain the provider in
// the shares their lanes are owed from one second to the next, not in whatever order they reach
// it.
//
// The Ledger is the pure core: it never waits and holds no connection. Its owner exchanges what
// it served with the shared ledger every so often (Updates, then Took with the answer), and asks
// it, before serving an item, whether the item's lanes are held.
package fairshare

import (
	"maps"
	"strconv"
	"strings"

	"github.com/sluicehq/sluice/cmd/gateway/internal/fairqueue"
)

// sep separates the parts of a Member; no tenant name holds it.
const sep = "\x1f"

// Member names a lane in the shared ledger: a tenant of a class, or a user of a tenant of a class.
// The lanes of one group (a class's tenants, or a tenant's users) are compared with each other.
type Member string

// classes is the group of the classes' members, gateways that of the gateways'.
const (
	classes  = "classes"
	gateways = "gateways"
)

// GatewayOf is the member of a gateway, by a name unique to it.
func GatewayOf(name string) Member { return Member(gateways + sep + name) }

// ClassOf is the member of an item's class.
func ClassOf(it *fairqueue.Item) Member { return classMember(it.Class) }

func classMember(c fairqueue.Class) Member { return Member(classes + sep + strconv.Itoa(int(c))) }

// TenantOf is the member of an item's tenant.
func TenantOf(it *fairqueue.Item) Member {
	return Member(strconv.Itoa(int(it.Class)) + sep + it.Tenant)
}

// UserOf is the member of an item's user.
func UserOf(it *fairqueue.Item) Member { return TenantOf(it) + Member(sep+it.User) }

// group is what the member is compared within: the classes or the gateways, its class, or its
// class and tenant.
func (m Member) group() string {
	s := string(m)
	class, rest, _ := strings.Cut(s, sep)
	if tenant := strings.Index(rest, sep); tenant >= 0 {
		return s[:len(class)+len(sep)+tenant] // a user's name may hold sep
	}
	return class
}

// Update is what one gateway tells the shared ledger of a member at an exchange.
type Update struct {
	Member Member
	// Served is what the gateway served the member since its last exchange: tokens over weight
	// for a tenant, tokens for a user.
	Served float64
	// Starts says the member starts waiting, as far as this gateway knows waiting nowhere before:
	// its count (Floor if it has none) is brought within Floor, the least count of its group
	// waiting (zero when none does), and Ceiling, the slack above it, before Served is added. A
	// lane that waits again after nobody waited for it gains nothing by the time it was idle, nor
	// is it held back long for what it was served before; and one that stopped waiting only
	// between its calls, as a client does that comes back when told, keeps its place among the
	// lanes it waited with, instead of starting behind them all and passing them, as a flow that
	// comes back to a fair queue starts at the later of the queue's time and its own.
	Starts  bool
	Floor   float64
	Ceiling float64
	// Waiting says the gateway has the member's lane waiting and free to go.
	Waiting bool
}

// Standing is the shared ledger's answer to an exchange: the count of every member waiting on
// some gateway.
type Standing map[Member]float64

// Ledger is one gateway's view of the shared ledger of one provider's queue. The zero value is
// not usable; call New. A Ledger is not safe for concurrent use: its owner serializes calls.
type Ledger struct {
	slack        float64
	gatewaySlack float64 // this gateway's slack among the gateways (see SetGatewaySlack)
	batchShare   float64
	gateway      Member                    // this gateway's
	share        float64                   // of the provider, owed to this gateway's lanes (see Updates)
	weightOf     func(tenant string) int32 // a tenant's weight
	standing     Standing
	known        bool                // standing is the shared ledger's answer, not forgotten
	groups       map[string][]Member // the members of standing, by group
	local        map[Member]float64  // served here and not yet taken in by the shared ledger
	reported     map[Member]bool     // the members this gateway last reported waiting
	// leastOf caches least's answer for a group until a count of one of its members changes: the
	// queue asks Held of every open lane's first item, and a group may have thousands of members.
	leastOf map[string]leastCount
	// weightsOf caches the weights of the tenants of a class waiting, by the class's group, until
	// the standing changes.
	weightsOf map[string]float64
}

// leastCount is the least count of a group's members waiting, if any waits.
type leastCount struct {
	count   float64
	waiting bool
}

// New returns a ledger that holds a lane back when it is more than slack ahead of the least
// served of its group: a class's tokens over its share (batchShare for Batch, the rest for
// Interactive), a tenant's tokens over its weight, a user's tokens; and the gateway named gateway
// (unique to it) when its tokens over its share of the provider are (until SetGatewaySlack says
// otherwise). weightOf gives the weight of a tenant that waits on other gateways only (nil counts
// 1).
func New(slack, batchShare float64, gateway string, weightOf func(tenant string) int32) *Ledger {
	return &Ledger{slack: slack, gatewaySlack: slack, batchShare: batchShare, gateway: GatewayOf(gateway), weightOf: weightOf,
		standing: Standing{}, groups: map[string][]Member{}, local: map[Member]float64{},
		reported: map[Member]bool{}, leastOf: map[string]leastCount{}, weightsOf: map[string]float64{}}
}

// Served counts an item this gateway served.
func (l *Ledger) Served(it *fairqueue.Item) {
	share := 1 - l.batchShare
	if it.Class == fairqueue.Batch {
		share = l.batchShare
	}
	l.count(ClassOf(it), float64(it.Cost)/share)
	l.count(TenantOf(it), float64(it.Cost)/float64(max(it.Weight, 1)))
	l.count(UserOf(it), float64(it.Cost))
	l.count(l.gateway, float64(it.Cost)/l.gatewayShare())
}

// gatewayShare is the share of the provider this gateway's lanes are owed, as of the last
// Updates; all of it before there is one.
func (l *Ledger) gatewayShare() float64 {
	if l.share <= 0 {
		return 1
	}
	return l.share
}

// SetGatewaySlack sets how far, in tokens over its share of the provider, this gateway may get
// ahead of the least served gateway before it is held back.
func (l *Ledger) SetGatewaySlack(slack float64) { l.gatewaySlack = slack }

// count adds served to what this gateway served m.
func (l *Ledger) count(m Member, served float64) {
	l.local[m] += served
	delete(l.leastOf, m.group())
}

// Held reports whether the item's lanes are held back: its class, its tenant or its user is more
// than the slack ahead of the least served lane of its group that waits, or this gateway is more
// than the slack ahead of the least served gateway that has a lane to serve.
func (l *Ledger) Held(it *fairqueue.Item) bool {
	return l.laneHeld(it) || l.ahead(l.gateway, l.gatewaySlack)
}

// laneHeld reports whether the item's class, tenant or user is held back.
func (l *Ledger) laneHeld(it *fairqueue.Item) bool {
	return l.ahead(ClassOf(it), l.slack) || l.ahead(TenantOf(it), l.slack) || l.ahead(UserOf(it), l.slack)
}

// Owed is the share of the provider the item's user lane is owed, by the lanes the shared ledger
// knows to wait: its class's share (when the other class waits too), over its tenant's weight
// among the tenants of its class, split evenly among its tenant's users. Zero when its class,
// tenant or user is held back: this gateway then owes nothing to serve it.
func (l *Ledger) Owed(it *fairqueue.Item) float64 {
	if l.laneHeld(it) {
		return 0
	}
	share := 1.0
	if _, waits := l.standing[classMember(1-it.Class)]; waits {
		share = 1 - l.batchShare
		if it.Class == fairqueue.Batch {
			share = l.batchShare
		}
	}
	weight, weights := float64(max(it.Weight, 1)), l.weights(TenantOf(it).group())
	if _, known := l.standing[TenantOf(it)]; !known {
		weights += weight
	}
	users := float64(len(l.groups[UserOf(it).group()]))
	if _, known := l.standing[UserOf(it)]; !known {
		users++
	}
	return share * weight / weights / users
}

// weights is the sum of the weights of a class's tenants waiting on some gateway.
func (l *Ledger) weights(class string) float64 {
	if w, ok := l.weightsOf[class]; ok {
		return w
	}
	var w float64
	for _, m := range l.groups[class] {
		w += float64(l.weightOfMember(m))
	}
	l.weightsOf[class] = w
	return w
}

// weightOfMember is the weight of a tenant's member.
func (l *Ledger) weightOfMember(m Member) int32 {
	_, tenant, _ := strings.Cut(string(m), sep)
	if l.weightOf == nil {
		return 1
	}
	return max(l.weightOf(tenant), 1)
}

// ahead reports whether m is more than slack ahead of the least of its group. A member the shared
// ledger does not count as waiting is level with it until the next exchange says where it starts.
func (l *Ledger) ahead(m Member, slack float64) bool {
	least, ok := l.least(m.group())
	if !ok {
		return false
	}
	v, waiting := l.standing[m]
	if !waiting {
		v = least
	}
	return v+l.local[m] > least+slack
}

// least is the smallest count, this gateway's unreported service included, of the members of a
// group waiting on some gateway; false when none does.
func (l *Ledger) least(group string) (float64, bool) {
	if c, ok := l.leastOf[group]; ok {
		return c.count, c.waiting
	}
	var c leastCount
	for _, m := range l.groups[group] {
		if v := l.standing[m] + l.local[m]; !c.waiting || v < c.count {
			c = leastCount{count: v, waiting: true}
		}
	}
	l.leastOf[group] = c
	return c.count, c.waiting
}

// Updates are what to tell the shared ledger, for the members whose lanes wait here now: what
// was served, which lanes wait, and which stopped waiting; and this gateway, as waiting when its
// lanes are owed a share of the provider (the sum of Owed over its open lanes), starting level
// with the least served gateway when it had none. Pass them to Took with the answer.
func (l *Ledger) Updates(waiting map[Member]bool, share float64) []Update {
	l.share = share
	if share > 0 {
		waiting = maps.Clone(waiting)
		if waiting == nil {
			waiting = map[Member]bool{}
		}
		waiting[l.gateway] = true
	}
	var ups []Update
	for m := range waiting {
		u := Update{Member: m, Served: l.local[m], Waiting: true}
		if _, waits := l.standing[m]; !waits && l.known {
			u.Starts = true
			u.Floor, _ = l.least(m.group())
			u.Ceiling = u.Floor + l.slack
			if m == l.gateway {
				u.Ceiling = u.Floor // a gateway that had no lane to serve owes nothing for before
			}
		}
		ups = append(ups, u)
	}
	for m, served := range l.local {
		if !waiting[m] {
			ups = append(ups, Update{Member: m, Served: served})
		}
	}
	for m := range l.reported {
		if !waiting[m] && l.local[m] == 0 {
			ups = append(ups, Update{Member: m})
		}
	}
	return ups
}

// Took takes in the shared ledger's answer to an exchange of ups: what they reported served is
// counted there now, not here.
func (l *Ledger) Took(ups []Update, s Standing) {
	clear(l.reported)
	for _, u := range ups {
		if l.local[u.Member] -= u.Served; l.local[u.Member] == 0 {
			delete(l.local, u.Member)
		}
		if u.Waiting {
			l.reported[u.Member] = true
		}
	}
	l.setStanding(s)
	l.known = true
}

// setStanding makes s the shared ledger's standing, indexed by group.
func (l *Ledger) setStanding(s Standing) {
	l.standing = s
	clear(l.groups)
	for m := range s {
		l.groups[m.group()] = append(l.groups[m.group()], m)
	}
	clear(l.leastOf)
	clear(l.weightsOf)
}

// Forget forgets what the other gateways served, as when the shared ledger cannot be reached:
// nothing is held back until the next exchange. What this gateway served is kept, to be reported.
func (l *Ledger) Forget() {
	l.setStanding(Standing{})
	l.known = false
}
