package admission

import (
	"math/rand/v2"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/sluicehq/sluice/cmd/gateway/internal/fairqueue"
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

// The door answers the calls that come to a provider's queue: in, with the wait it is promised,
// or busy, with when to come back. It is one decision (arrival.decide), a pure function of one
// value, the arrival, which the dispatcher gathers under its lock (dispatcher.atDoor); door.answer
// then acts on it. Its estimates are the fair queue's (see package fairqueue): the wait of the
// call's own lane under fair sharing, at the rate the queue drains (drain.go).

// door acts on the door's decisions: it lets calls into its queue, expects those it turned away
// back, and counts both. It shares its dispatcher's lock.
type door struct {
	q             *fairqueue.Queue
	refusals      *prometheus.CounterVec // the door's busy answers, by tenant
	comebackError prometheus.Observer    // when a caller came back against when it was told to
}

// arrival is a call at the door: all the door decides on, gathered once (see dispatcher.atDoor).
type arrival struct {
	item *fairqueue.Item
	// maxWait is its plan's; zero for a job, which passes no door.
	maxWait time.Duration
	// rate is the tokens a second the door expects the queue to drain, and headroom the tokens
	// that go at once before it (see drain.go), with, for a call past a pace's burst, its own
	// (see room.large). wholeRate is what the queue drains together with the other gateways'
	// lanes, which a call turned away waits behind (see fairqueue.Queue.SetElsewhere): the whole
	// provider's drain when it knows them, else rate.
	rate      float64
	wholeRate float64
	headroom  int64
	now       time.Time
	// probe is how long until a provider of the queue's pools that is out behind its breaker lets
	// a probe through; zero when none is out (see Gate.poolProbe).
	probe time.Duration
	// cameBack is whether the call is one the door turned away, come back when told (at toldAt):
	// it was foreseen.
	cameBack bool
	toldAt   time.Time
	// growth is the pace at which new lanes join the queue (see fairqueue.Queue.Growth): zero for
	// a call its lane's first, or one that came back when told.
	growth float64
	// wait is how long the call waits let in (see waitOf), and comeback how long if turned away,
	// behind the comebacks its lane is already expected to make, at wholeRate (see
	// fairqueue.Queue.ComebackWait); -1 when nothing drains. comeback is reckoned only for a call
	// turned away; for one that waited out its maxWait, from where it stood in its lane, before
	// it left it.
	wait, comeback time.Duration
	// own is its wait for its own user's limits and, for a call past a pace's burst, for the
	// provider's token limits to hold it (see room).
	own time.Duration
	// full reports that the queue holds maxUnestimated calls.
	full bool
	// ahead is how many calls of the call's tenant wait, in its class.
	ahead int
	// spread, in [0, 1), places the call's comeback within its own slot of the drain (see
	// comeback).
	spread float64
	// expired reports that the call waited out its maxWait and left the queue.
	expired bool
}

// doorOut is the door's answer: let in, with the wait promised (-1 when the queue's drain is
// unknown) and whether the queue keeps that word, or busy, told when to come back.
type doorOut struct {
	wait    time.Duration
	promise bool
	busy    *Refusal
}

// decide is the door's decision on a. A call is turned away when its wait passes the door's bound
// (see doorBound), or when the queue's drain is unknown and the queue full; a call that waited out
// its maxWait is turned away after another wait. A call with no maxWait (a job) passes no door.
func (a arrival) decide() doorOut {
	if a.expired {
		wait := a.wait
		if wait < 0 {
			wait = a.maxWait // unknown, as for a paused provider: another maxWait
		}
		return doorOut{busy: a.turnAway(a.maxWait+wait, a.maxWait)}
	}
	bound := doorBound(a.maxWait, a.growth)
	if a.pastBound(bound) {
		return doorOut{busy: a.turnAway(max(a.wait, bound), bound)}
	}
	return doorOut{wait: a.wait, promise: bound > 0 && a.wait >= 0}
}

// pastBound reports whether a's wait passes the door's bound, or is unknown with the queue full.
func (a arrival) pastBound(bound time.Duration) bool {
	return bound > 0 && (a.wait > bound || (a.wait < 0 && a.full))
}

// turnAway is the busy answer to a call whose lane would wait estimate, more than the door's
// bound: it is told to come back after its comeback wait (see comebackAt).
func (a arrival) turnAway(estimate, bound time.Duration) *Refusal {
	r := &Refusal{Reason: Busy, Estimate: estimate, MaxWait: a.maxWait, Position: a.ahead + 1}
	if bound < r.MaxWait {
		r.Horizon = bound
	}
	r.RetryAfter = RetryAfter(comebackAt(a, a.comeback, bound)) // as the header says it
	return r
}

// answer decides on a call at the door and acts on it: let in, the call is pushed into the queue,
// which keeps the door's word; turned away, the queue expects it back when it was told.
func (d *door) answer(a arrival) doorOut {
	out, it := a.decide(), a.item
	if out.busy != nil {
		d.turnedAway(it, out.busy, a.now)
		return out
	}
	if a.cameBack {
		d.comebackError.Observe(a.now.Sub(a.toldAt).Seconds())
	} else {
		it.Joins = a.now
	}
	d.q.Push(it)
	if out.promise {
		d.q.Promise(it)
	}
	return out
}

// later answers busy a call let in that a limit it waits for holds past its maxWait, refused as
// limited: it is told to come back when that limit has room, as the door would have told it had it
// foreseen the wait, rather than refused, since the limit is one it may wait for.
func (d *door) later(wt *waiter, limited *Refusal, now time.Time) *Refusal {
	r := &Refusal{Reason: Busy, Estimate: limited.RetryAfter, MaxWait: wt.t.req.maxWait(), Position: 1}
	r.RetryAfter = RetryAfter(limited.RetryAfter)
	d.turnedAway(wt.item, r, now)
	return r
}

// turnedAway counts the busy answer r to the call it at now, and has the queue expect the call back
// when it was told.
func (d *door) turnedAway(it *fairqueue.Item, r *Refusal, now time.Time) {
	d.refusals.WithLabelValues(it.Tenant).Inc()
	d.q.Expect(it, now, now.Add(r.RetryAfter))
}

// atDoor gathers at now all the door decides on for wt's call, r being what the limits it waits
// for hold. A call coming in (rather than quoted) is no longer expected back by the queue,
// whatever the door decides. The caller holds d.mu.
func (d *dispatcher) atDoor(wt *waiter, r room, now time.Time, coming bool) arrival {
	it := wt.item
	takes := byKind{}
	if !it.Queued() {
		takes = wt.t.req.takes()
	}
	dr := d.drainAt(now, takes, r)
	a := arrival{item: it, maxWait: wt.t.req.maxWait(), rate: dr.rate(), wholeRate: d.wholeRate(dr), headroom: dr.headroom(),
		now: now, probe: d.g.poolProbe(d.provider, now), full: d.q.Len() >= maxUnestimated, spread: rand.Float64()}
	if coming {
		if a.toldAt, a.cameBack = d.q.CameBack(it, now); !a.cameBack {
			a.growth = d.q.Growth(it, now)
		}
	}
	a.own = max(d.q.OwnWait(it, r.credit), r.until)
	if r.large { // its own tokens wait for the provider's limits to hold them (own), not for the drain
		a.headroom += it.Cost
	}
	a.wait = a.waitOf(d.q.EstimateWait(it, a.rate, now), a.rate, a.own)
	a.ahead, _ = d.q.Ahead(it.Class, it.Tenant)
	if a.pastBound(doorBound(a.maxWait, a.growth)) { // after the estimate the queue's promise keeps
		a.comeback = d.comebackOf(a)
	}
	return a
}

// comebackOf is a's wait if turned away (see arrival.comeback). The caller holds d.mu.
func (d *dispatcher) comebackOf(a arrival) time.Duration {
	return a.waitOf(d.q.ComebackWait(a.item, a.wholeRate, a.now), a.wholeRate, a.own)
}

// waitOf is how long a call waits whose lane waits fair under fair sharing at rate (-1 when
// nothing drains): the later of that wait, less the time the drain takes for the headroom tokens,
// which go at once, and own (see arrival.own).
func (a arrival) waitOf(fair time.Duration, rate float64, own time.Duration) time.Duration {
	if fair < 0 {
		return fair
	}
	if fair > 0 && a.headroom > 0 {
		fair = max(fair-seconds(float64(a.headroom)/rate), 0)
	}
	return max(fair, own)
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

// comeback is how long a call turned away waits before it comes back. back is its lane's wait
// behind the comebacks it is already expected to make (negative when nothing drains). It comes
// back when that wait is down to comebackWait of the door's bound, or after a whole bound when
// nothing drains. A part spread of its own slot of the drain (its cost over the rate) is added,
// so that a crowd told at once does not come back at once; the slot held to the comebackWait of
// the bound that is left, so that a call near the provider's whole minute, whose slot is most of
// a minute, is back before its wait is over rather than after it, while the provider idles.
func comeback(cost int64, back, bound time.Duration, rate, spread float64) time.Duration {
	least := bound
	if back >= 0 {
		least = max(back-time.Duration(comebackWait*float64(bound)), 0)
	}
	var slot time.Duration
	if rate > 0 {
		slot = seconds(float64(cost) / rate)
	}
	if bound > 0 {
		slot = min(slot, time.Duration(comebackWait*float64(bound)))
	}
	return least + time.Duration(spread*float64(slot))
}

// comebackAt is when a call turned away comes back (see comeback), but no later than when a
// provider of its pool that is out behind its breaker is probed, spread over the call's own slot
// of the drain: the capacity that provider adds may be back by then, and a crowd told to wait for
// the rest of the pool alone would come back long after it is.
func comebackAt(a arrival, back, bound time.Duration) time.Duration {
	after := comeback(a.item.Cost, back, bound, a.rate, a.spread)
	if a.probe > 0 && after > a.probe {
		after = a.probe + comeback(a.item.Cost, 0, 0, a.rate, a.spread)
	}
	return after
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
