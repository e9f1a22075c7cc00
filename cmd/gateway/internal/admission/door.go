package admission

import (
	"context"
	"math/rand/v2"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/sluicehq/sluice/cmd/gateway/internal/fairqueue"
	"github.com/sluicehq/sluice/cmd/gateway/internal/ratelimit"
)

const (
	// comebackWait is the share of the door's bound (its maxWait, or less while lanes join) a
	// call turned away is told to come back to wait: less than all of it, so that a caller who
	// comes back when told is let in even when the estimate was a little short.
	comebackWait = 0.5
	// maxUnestimated bounds a queue whose drain the door cannot estimate (a provider with no
	// tokens per minute, before anything drained).
	maxUnestimated = 10_000
)

// door answers the calls that come to a provider's queue: in, with the wait it is promised, or
// busy, with when to come back. Its estimates are the fair queue's (see package fairqueue): the
// wait of the call's own lane under fair sharing, at the rate the queue drains. It shares its
// dispatcher's lock.
type door struct {
	q             *fairqueue.Queue
	refusals      *prometheus.CounterVec // the door's busy answers, by tenant
	comebackError prometheus.Observer    // when a caller came back against when it was told to
}

// arrival is a call at the door: what the door's estimates of its wait read, built once.
type arrival struct {
	item *fairqueue.Item
	// maxWait is its plan's; zero for a job, which passes no door.
	maxWait time.Duration
	// room is what the limits it waits for held when it came (see Gate.room).
	room room
	// rate is the tokens a second the door expects the queue to drain, and headroom the tokens
	// that go at once before it (see drain.go). wholeRate is what the queue drains together with
	// the other gateways' lanes, which a call turned away waits behind (see
	// fairqueue.Queue.SetElsewhere): the whole provider's drain when it knows them, else rate.
	rate      float64
	wholeRate float64
	headroom  int64
	now       time.Time
	// probe is how long until a provider of the queue's pools that is out behind its breaker lets
	// a probe through; zero when none is out (see Gate.poolProbe).
	probe time.Duration
}

// enter answers a call at the door. Let in, the call is pushed into the queue, and enter returns
// the wait it is promised (-1 when the queue's drain is unknown). Busy, when that wait passes the
// door's bound (see doorBound), the call is told when to come back, before anything is charged.
// A call with no maxWait (a job) passes no door.
func (d *door) enter(a arrival) (time.Duration, *Refusal) {
	it := a.item
	toldAt, cameBack := d.q.CameBack(it, a.now)
	growth := 0.0 // a caller that came back when told was foreseen: no lane joins with it
	if !cameBack {
		it.Joins, growth = a.now, d.q.Growth(it, a.now)
	}
	estimate := d.estimateWait(a)
	bound := doorBound(a.maxWait, growth)
	if bound > 0 && (estimate > bound || (estimate < 0 && d.q.Len() >= maxUnestimated)) {
		return 0, d.turnAway(a, max(estimate, bound), bound, d.comebackWait(a))
	}
	if cameBack {
		d.comebackError.Observe(a.now.Sub(toldAt).Seconds())
	}
	d.q.Push(it)
	if bound > 0 && estimate >= 0 { // a caller waits: the queue keeps the door's word
		d.q.Promise(it)
	}
	return estimate, nil
}

// expired answers busy a call that waited out its maxWait and left the queue. back is its
// comebackWait, reckoned before it left.
func (d *door) expired(a arrival, back time.Duration) *Refusal {
	estimate := d.estimateWait(a)
	if estimate < 0 {
		estimate = a.maxWait // unknown, as for a paused provider: another maxWait
	}
	return d.turnAway(a, a.maxWait+estimate, a.maxWait, back)
}

// turnAway is the busy answer to a call whose lane would wait estimate, more than the door's
// bound. It tells the call to come back after back, its comebackWait (see comeback), and the
// queue expects it then.
func (d *door) turnAway(a arrival, estimate, bound, back time.Duration) *Refusal {
	it := a.item
	d.refusals.WithLabelValues(it.Tenant).Inc()
	ahead, _ := d.q.Ahead(it.Class, it.Tenant)
	r := &Refusal{Reason: Busy, Estimate: estimate, MaxWait: a.maxWait, Position: ahead + 1}
	if bound < r.MaxWait {
		r.Horizon = bound
	}
	r.RetryAfter = RetryAfter(comebackAt(a, back, bound)) // as the header says it
	d.q.Expect(it, a.now, a.now.Add(r.RetryAfter))
	return r
}

// estimateWait is how long the call waits: the latest of its lane's wait under fair sharing, less
// what the provider's limits let through at once, its wait for its own user's limits, and its
// wait for the provider's paces that it passes the burst of. It is -1 when nothing drains.
func (d *door) estimateWait(a arrival) time.Duration {
	fair := afterHeadroom(d.q.EstimateWait(a.item, a.rate, a.now), a.headroom, a.rate)
	return laterOf(fair, max(d.q.OwnWait(a.item, a.room.credit), a.room.pace))
}

// comebackWait is estimateWait for a call turned away, behind the comebacks its lane is already
// expected to make (see fairqueue.Queue.ComebackWait).
func (d *door) comebackWait(a arrival) time.Duration {
	fair := afterHeadroom(d.q.ComebackWait(a.item, a.wholeRate, a.now), a.headroom, a.wholeRate)
	return laterOf(fair, max(d.q.OwnWait(a.item, a.room.credit), a.room.pace))
}

// doorBound is the longest wait the door promises a call: its plan's maxWait, or less while
// new lanes join the queue at growth a window (see fairqueue.Queue.Growth, zero for a call its
// lane's first or one that came back when told); zero for a call with no maxWait.
func doorBound(maxWait time.Duration, growth float64) time.Duration {
	if horizon := fairqueue.Horizon(growth); maxWait > 0 && horizon >= 0 {
		return min(maxWait, max(horizon, time.Millisecond))
	}
	return maxWait
}

// afterHeadroom is a wait under fair sharing (-1 when nothing drains) less the time the drain
// takes for headroom tokens, which go at once.
func afterHeadroom(fair time.Duration, headroom int64, rate float64) time.Duration {
	if fair <= 0 || headroom <= 0 {
		return fair
	}
	return max(fair-seconds(float64(headroom)/rate), 0)
}

// laterOf is the later of a wait under fair sharing (-1 when nothing drains) and a wait for the
// item's own limits.
func laterOf(fair, own time.Duration) time.Duration {
	if fair < 0 {
		return fair
	}
	return max(fair, own)
}

// comeback is how long a call turned away waits before it comes back. back is its lane's wait
// behind the comebacks it is already expected to make (negative when nothing drains). It comes
// back when that wait is down to comebackWait of the door's bound, or after a whole bound when
// nothing drains. A random part of its own slot of the drain (its cost over the rate) is added,
// so that a crowd told at once does not come back at once.
func comeback(cost int64, back, bound time.Duration, rate float64) time.Duration {
	least := bound
	if back >= 0 {
		least = max(back-time.Duration(comebackWait*float64(bound)), 0)
	}
	var slot time.Duration
	if rate > 0 {
		slot = seconds(float64(cost) / rate)
	}
	return least + time.Duration(rand.Float64()*float64(slot))
}

// comebackAt is when a call turned away comes back (see comeback), but no later than when a
// provider of its pool that is out behind its breaker is probed, spread over the call's own slot
// of the drain: the capacity that provider adds may be back by then, and a crowd told to wait for
// the rest of the pool alone would come back long after it is.
func comebackAt(a arrival, back, bound time.Duration) time.Duration {
	after := comeback(a.item.Cost, back, bound, a.rate)
	if a.probe > 0 && after > a.probe {
		after = a.probe + comeback(a.item.Cost, 0, 0, a.rate)
	}
	return after
}

// room is what the limits a call waits for hold when it comes to the door, read without taking
// anything (see Gate.room).
type room struct {
	// own is how long the rate limits of the call's own user that queue take to let it through
	// once they are spent, and credit how long what they hold now lasts its lane (see
	// fairqueue.Queue.OwnWait).
	own, credit time.Duration
	// held is, for each kind of tokens, the least the provider's limits of that kind that queue
	// hold now: it goes at once, before the queue drains at its rate (see drain.headroom). Other
	// gateways sharing the provider could take it too, but a provider whose limits hold some is
	// one nobody's queue is draining. -1 for a kind the call's provider does not limit, or when
	// the store could not be read.
	held byKind
	// pace is how long until the provider's paces whose burst the call passes are full, as it
	// must find them (see ratelimit.NewPace): a call before it left them in debt.
	pace time.Duration
}

// room reads what the limits the call waits for hold (nothing when the store cannot answer). Of
// the rate limits of the call's own user that queue: how long they take to let it through once
// spent, the most over them of its cost over their rate, and how long what they hold lasts its
// lane, the least over them of what is left over their rate (zero and zero when its user has no
// such limit): a user's own limit, not the provider, may be what holds its lane back, and one
// limited to 2 calls a second waits half a second a call, however fast the provider drains. Of
// the provider's token limits that queue, of each kind, the least they hold, and how long until
// the paces whose burst the call passes are full.
func (g *Gate) room(ctx context.Context, t *Ticket) room {
	r := room{held: byKind{-1, -1, -1}}
	var buf [ratelimit.MaxChecks]*ratelimit.Limit
	limits := buf[:0]
	var pastBurst uint32 // bit j: limits[j] is a pace whose burst the call passes
	for i, c := range t.checks {
		if !t.queueing.Queues(i) || c.Limit.Rate() <= 0 {
			continue
		}
		switch _, tokens := kindOf(c.Limit.Dimension); {
		case c.Limit.Level == ratelimit.LevelUser:
			r.own = max(r.own, seconds(float64(c.Cost)/c.Limit.Rate()))
		case c.Limit.Level != ratelimit.LevelProvider || !tokens:
			continue
		case c.Cost > c.Limit.Capacity() && c.Limit.IsBucket():
			pastBurst |= 1 << len(limits)
		}
		limits = append(limits, c.Limit)
	}
	if len(limits) == 0 {
		return r
	}
	readings, err := t.limiter.Peek(ctx, limits, g.now())
	if err != nil {
		return room{own: r.own, held: r.held}
	}
	r.credit = -1
	for i, l := range limits {
		k, tokens := kindOf(l.Dimension)
		switch {
		case pastBurst&(1<<i) != 0 && readings[i].Reset > 0:
			r.pace, r.held[k] = max(r.pace, readings[i].Reset), 0 // the call waits for it full
		case tokens && l.Level == ratelimit.LevelProvider:
			r.held[k] = leastOf(r.held[k], max(readings[i].Remaining, 0))
		default:
			r.credit = leastOf(r.credit, seconds(float64(readings[i].Remaining)/l.Rate()))
		}
	}
	r.credit = max(r.credit, 0)
	return r
}

// leastOf is the lesser of a and b, where a negative a is none yet.
func leastOf[T int64 | time.Duration](a, b T) T {
	if a < 0 {
		return b
	}
	return min(a, b)
}

// seconds is s seconds as a Duration.
func seconds(s float64) time.Duration { return time.Duration(s * float64(time.Second)) }
