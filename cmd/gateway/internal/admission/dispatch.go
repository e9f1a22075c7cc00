package admission

import (
	"context"
	"math/rand/v2"
	"time"

	"github.com/sluicehq/sluice/cmd/gateway/internal/fairqueue"
	"github.com/sluicehq/sluice/cmd/gateway/internal/fairshare"
	"github.com/sluicehq/sluice/cmd/gateway/internal/ratelimit"
)

const (
	// decideTimeout bounds one dispatch decision.
	decideTimeout = 2 * time.Second
	// inFlightPoll is how often a queue held by calls in flight looks again, in case a call on
	// another replica ended; a call ending on this one wakes it at once.
	inFlightPoll = 50 * time.Millisecond
	// drainWindow is how far back the door looks for the queue's drain, and minFullSeconds how
	// many of its seconds must have been full (see dispatcher.full) for the measure to replace
	// the configured drain: a gateway's share of a provider swings from second to second as the
	// gateways sharing it take turns, so the measure spans many seconds.
	drainWindow    = 30 * time.Second
	minFullSeconds = 10
	// shareEvery is how often a dispatcher exchanges with the gateways sharing its provider what
	// each lane was served, while few lanes wait; shareSlack is how far, in tokens (over the
	// tenant's weight), a lane may get ahead of the least served lane of its group before it is
	// held back: one of the fair queue's rounds, more than a gateway serves between two exchanges.
	shareEvery = 200 * time.Millisecond
	shareSlack = 8192
	// gatewaySlackIntervals is how far, in exchange intervals of the provider's drain, a gateway
	// may get ahead of the least served gateway before it is held back: what the least served
	// one serves between its last exchange and this one's, which this one cannot know of yet. A
	// lane's slack is a round of the fair queue; a gateway's is a fraction of a second of the
	// provider, so that the gateways keep their shares of it from one second to the next and a
	// door's estimate of its own queue's drain holds for the wait. With a round's slack, the
	// gateways' shares swung by a fifth over a few seconds, and the lab's queue case had one
	// page in eight wait more than 15% off its estimate.
	gatewaySlackIntervals = 2
	// sharePerLane spaces exchanges further apart as more lanes wait: an exchange costs Redis
	// about 11 µs a lane (BenchmarkSharesExchangeAtScale), so one every 100 µs a lane keeps each
	// gateway's exchanges to about a tenth of Redis's time, however many tenants wait.
	sharePerLane = 100 * time.Microsecond
	// shareWordHolds is how many of its exchange intervals a gateway's word that a lane waits
	// holds: a gateway that died stops holding the others' lanes back after it.
	shareWordHolds = 10
	// comebackWait is the share of the door's bound (its maxWait, or less while lanes join) a
	// call turned away is told to come back to wait: less than all of it, so that a caller who
	// comes back when told is let in even when the estimate was a little short.
	comebackWait = 0.5
	// maxUnestimated bounds a queue whose drain the door cannot estimate (a provider with no
	// tokens per minute, before anything drained).
	maxUnestimated = 10_000
)

// waiter is a call in the queue.
type waiter struct {
	t    *Ticket
	item *fairqueue.Item
	// estimate is the wait the door estimated when the call entered: the queue's metrics set it
	// against the wait the call had.
	estimate time.Duration
	// room is what the limits it waits for held when it came.
	room room
	// done receives the dispatcher's verdict on the call.
	done chan verdict
}

// dispatcher returns the provider's dispatcher, starting it on first use.
func (g *Gate) dispatcher(provider string) *dispatcher {
	if d, ok := g.dispatchers.Load(provider); ok {
		return d.(*dispatcher)
	}
	d := newDispatcher(g, provider)
	actual, loaded := g.dispatchers.LoadOrStore(provider, d)
	if !loaded {
		go d.run(g.ctx)
		if d.shares != nil {
			go d.exchangeShares(g.ctx)
		}
	}
	return actual.(*dispatcher)
}

// wait queues a call after the door's estimate, and returns when it has been decided: allowed
// (it may go), refused, abandoned by its client, or, for a call someone waits for, still queued
// after its plan's maxWait (the door's estimate was wrong, or the provider is paused).
func (d *dispatcher) wait(ctx context.Context, t *Ticket) verdict {
	start := d.g.now()
	wt := &waiter{t: t, done: make(chan verdict, 1)}
	wt.item = &fairqueue.Item{
		Tenant: t.req.tenant(), User: t.req.Caller.User, Weight: t.req.Caller.Tenant.Config.Weight,
		Class: t.req.class(), Cost: t.req.Cost.Tokens, Value: wt,
	}
	wt.room = d.g.room(ctx, t)
	wt.item.Own = wt.room.own
	if r := d.push(wt, start); r != nil {
		return verdict{refusal: r}
	}
	d.kick()
	var expired <-chan time.Time
	if maxWait := t.req.maxWait(); maxWait > 0 {
		timer := time.NewTimer(maxWait)
		defer timer.Stop()
		expired = timer.C
	}
	select {
	case v := <-wt.done:
		return d.waited(wt, v, start)
	case <-ctx.Done():
		return d.abandon(wt)
	case <-expired:
		select {
		case v := <-wt.done: // decided as the time ran out
			return d.waited(wt, v, start)
		default:
		}
		return d.expire(wt, start)
	}
}

// waited records how long a decided call waited, and for one let go, that wait against the
// door's estimate.
func (d *dispatcher) waited(wt *waiter, v verdict, start time.Time) verdict {
	waited := d.g.now().Sub(start)
	d.queueWait.Observe(waited.Seconds())
	if v.ticket == nil {
		v.refusal.Waited = waited
		return v
	}
	v.ticket.Waited = waited
	if wt.estimate > 0 {
		v.ticket.Estimated = wt.estimate
		d.estimateRatio.Observe(waited.Seconds() / wt.estimate.Seconds())
	}
	return v
}

// push lets a call in at the door, or refuses it busy when its estimated wait passes the door's
// bound (see doorBound): before anything is charged. A job, which nobody waits for, passes no door.
func (d *dispatcher) push(wt *waiter, now time.Time) *Refusal {
	d.mu.Lock()
	defer d.mu.Unlock()
	it, req := wt.item, &wt.t.req
	promised, cameBack := d.q.CameBack(it, now)
	growth := 0.0 // one that came back when told was foreseen: its turns counted in others' estimates
	if !cameBack {
		it.Joins, growth = now, d.q.Growth(it, now)
	}
	rate := d.drainRate(now)
	estimate := d.estimateWait(it, rate, now, wt.room)
	bound := doorBound(req.maxWait(), growth)
	if bound > 0 && (estimate > bound || (estimate < 0 && d.q.Len() >= maxUnestimated)) {
		ahead, _ := d.q.Ahead(it.Class, it.Tenant)
		return d.busy(wt, max(estimate, bound), bound, d.comebackWait(it, rate, now, wt.room), ahead+1, now, rate)
	}
	if cameBack {
		d.comebackError.Observe(now.Sub(promised).Seconds())
	}
	wt.estimate = estimate
	// An Interactive tenant that starts waiting here is told to the other gateways' Batch lanes soon.
	if ahead, _ := d.q.Ahead(it.Class, it.Tenant); ahead == 0 && it.Class == fairqueue.Interactive && d.shares != nil {
		select {
		case d.exchangeSoon <- struct{}{}:
		default:
		}
	}
	d.q.Push(it)
	if bound > 0 && estimate >= 0 { // a caller waits: the queue keeps the door's word
		d.q.Promise(it)
	}
	d.queued(req, it, 1)
	return nil
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

// expire takes a call that waited its plan's maxWait out of the queue and refuses it busy, as
// the door would have, with the wait its lane would still have were it to come back now.
func (d *dispatcher) expire(wt *waiter, start time.Time) verdict {
	// When to come back is reckoned from where the call stands in its lane, before it leaves it:
	// of a lane's calls that wait out their maxWait together, the first is told to come back
	// first and each other a turn of the lane later, not all of them behind all of them.
	d.mu.Lock()
	now := d.g.now()
	rate := d.drainRate(now)
	back := d.comebackWait(wt.item, rate, now, room{})
	d.mu.Unlock()
	d.abandon(wt) // a decision made meanwhile is given back
	d.mu.Lock()
	defer d.mu.Unlock()
	estimate := d.estimateWait(wt.item, rate, now, room{})
	ahead, _ := d.q.Ahead(wt.item.Class, wt.item.Tenant)
	maxWait := wt.t.req.maxWait()
	if estimate < 0 {
		estimate = maxWait // unknown, as for a paused provider: ask to come back after another maxWait
	}
	r := d.busy(wt, maxWait+estimate, maxWait, back, ahead+1, now, rate)
	r.Waited = now.Sub(start)
	return verdict{refusal: r}
}

// estimateWait is how long the item would wait from now when the queue drains rate under its
// fair sharing, after what the provider's limits let through at once, or its own user's limits
// let it through, whichever is later (room is what they hold now, see Gate.room); -1 when nothing
// drains. The caller holds d.mu.
func (d *dispatcher) estimateWait(it *fairqueue.Item, rate float64, now time.Time, r room) time.Duration {
	return laterOf(afterHeadroom(d.q.EstimateWait(it, rate, now), r.headroom, rate), d.q.OwnWait(it, r.credit))
}

// comebackWait is estimateWait for an item turned away (see fairqueue.Queue.ComebackWait).
func (d *dispatcher) comebackWait(it *fairqueue.Item, rate float64, now time.Time, r room) time.Duration {
	return laterOf(afterHeadroom(d.q.ComebackWait(it, rate, now), r.headroom, rate), d.q.OwnWait(it, r.credit))
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

// busy is the refusal of a call whose lane would wait estimate, more than the door's bound, at
// position in it, with a time to come back reckoned from back, its ComebackWait (see comeback),
// at which the queue expects it back. The caller holds d.mu.
func (d *dispatcher) busy(wt *waiter, estimate, bound, back time.Duration, position int, now time.Time, rate float64) *Refusal {
	req := &wt.t.req
	d.g.metrics.doorRefusals.WithLabelValues(d.provider, req.tenant()).Inc()
	r := &Refusal{Reason: Busy, Estimate: estimate, MaxWait: req.maxWait(), Position: position}
	if bound < r.MaxWait {
		r.Horizon = bound
	}
	r.RetryAfter = RetryAfter(comeback(wt.item.Cost, back, bound, rate)) // as the header says it
	d.q.Expect(wt.item, now, now.Add(r.RetryAfter))
	return r
}

// comeback is how long a call turned away should wait before it comes back with a fair chance to
// be let in: until its lane, behind the comebacks it is already expected to make and beside those
// of other lanes, would wait no longer than comebackWait of the door's bound (back is that wait
// now, negative when nothing drains: then another bound), at a random point of the call's slot of
// the drain (its cost over the rate) after that, so that a crowd told at once does not come back
// at once. Each refusal is expected back, so the comebacks of a crowd are spread at the rate the
// queue drains, lane by lane in fair turns.
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

// abandon takes a call whose client left out of the queue. If the dispatcher let it go in the
// meantime, its ticket is refunded: the call is never made.
func (d *dispatcher) abandon(wt *waiter) verdict {
	d.mu.Lock()
	queued := wt.item.Queued()
	d.q.Remove(wt.item)
	if queued {
		d.queued(&wt.t.req, wt.item, -1)
	}
	d.mu.Unlock()
	select {
	case v := <-wt.done:
		if v.ticket != nil {
			v.ticket.Withdraw()
		}
	default:
	}
	d.kick() // the head of the queue may have changed
	return verdict{refusal: &Refusal{Reason: Gone}}
}

// run dispatches until ctx ends, sleeping while nothing may go.
func (d *dispatcher) run(ctx context.Context) {
	timer := time.NewTimer(time.Hour)
	defer timer.Stop()
	for {
		sleep := d.step()
		if sleep == 0 {
			continue
		}
		timer.Reset(sleep)
		select {
		case <-ctx.Done():
			return
		case <-d.wake:
		case <-timer.C:
		}
	}
}

// step offers the next call in fair order to the limiter and returns how long to sleep before the
// next step: zero to go on at once. The limiter's decision (a Redis round trip) is taken without
// d.mu: calls arriving, ending or leaving meanwhile are not held up. The call stays queued while
// it is decided, so a new call still waits behind it.
func (d *dispatcher) step() time.Duration {
	wt, sleep := d.next()
	if wt == nil {
		return sleep
	}
	ctx, cancel := context.WithTimeout(d.g.ctx, decideTimeout)
	v := d.g.decide(ctx, wt.t)
	cancel()
	return d.conclude(wt, v)
}

// next returns the call to decide next, left in the queue, or nil and how long to sleep.
func (d *dispatcher) next() (*waiter, time.Duration) {
	d.mu.Lock()
	defer d.mu.Unlock()
	now := d.g.now()
	if wait, open := d.open(now); !open {
		if d.q.Len() > 0 {
			d.heldBack(now)
		}
		return nil, wait
	}
	it, opens := d.q.Next(now)
	if it == nil {
		if opens.IsZero() {
			if d.q.Len() > 0 {
				d.heldBack(now) // every lane waits for those of other gateways
			}
			return nil, time.Hour // until a call arrives or ends, or an exchange releases a lane
		}
		return nil, max(opens.Sub(now), time.Millisecond)
	}
	return it.Value.(*waiter), 0
}

// conclude acts on the verdict on a call that next returned, and returns how long to sleep
// before the next step.
func (d *dispatcher) conclude(wt *waiter, v verdict) time.Duration {
	d.mu.Lock()
	if !wt.item.Queued() { // its client left while the limiter decided: give back what it took
		d.mu.Unlock()
		if v.ticket != nil {
			v.ticket.Withdraw()
		}
		return 0
	}
	defer d.mu.Unlock()
	now := d.g.now()
	req := &wt.t.req
	switch {
	case v.ticket != nil:
		d.drained.add(now, wt.item.Cost)
		if d.shares != nil {
			d.shares.Served(wt.item)
		}
		d.finish(wt, v, true)
		return 0
	case !v.queues || (req.maxWait() > 0 && v.refusal.RetryAfter > req.maxWait()):
		d.finish(wt, v, false) // refused: waiting would not help, or would take too long
		return 0
	}
	return d.block(wt, v.refusal, now)
}

// finish takes a decided call out of the queue and tells its waiter.
func (d *dispatcher) finish(wt *waiter, v verdict, served bool) {
	if served {
		d.q.Pop(wt.item)
	} else {
		d.q.Remove(wt.item)
	}
	d.queued(&wt.t.req, wt.item, -1)
	wt.done <- v
}

// block keeps a refused call queued: a limit of its own lane blocks only that lane; a global or
// provider limit holds everyone, until it refills or a call in flight ends.
func (d *dispatcher) block(wt *waiter, r *Refusal, now time.Time) time.Duration {
	until := now.Add(max(r.RetryAfter, time.Millisecond))
	switch r.Level {
	case ratelimit.LevelUser:
		d.q.Block(wt.item, until, false)
		return 0
	case ratelimit.LevelTenant, ratelimit.LevelEndpoint:
		d.q.Block(wt.item, until, true)
		return 0
	}
	d.heldBack(now)
	if r.RetryAfter > 0 {
		return r.RetryAfter
	}
	return inFlightPoll
}

// room is what the limits a call waits for hold when it comes to the door, read without taking
// anything (see Gate.room).
type room struct {
	// own is how long the rate limits of the call's own user that queue take to let it through
	// once they are spent, and credit how long what they hold now lasts its lane (see
	// fairqueue.Queue.OwnWait).
	own, credit time.Duration
	// headroom is the tokens the provider's limits that queue let through at once now: the queue
	// drains them before it drains at its rate. Other gateways sharing the provider could take
	// them too, but a provider whose limits hold some is one nobody's queue is draining.
	headroom int64
}

// room reads what the limits the call waits for hold (nothing when the store cannot answer). Of
// the rate limits of the call's own user that queue: how long they take to let it through once
// spent, the most over them of its cost over their rate, and how long what they hold lasts its
// lane, the least over them of what is left over their rate (zero and zero when its user has no
// such limit): a user's own limit, not the provider, may be what holds its lane back, and one
// limited to 2 calls a second waits half a second a call, however fast the provider drains. Of
// the provider's token limits that queue, the least they hold: what goes at once, before the
// queue drains at its rate.
func (g *Gate) room(ctx context.Context, t *Ticket) room {
	var r room
	var buf [ratelimit.MaxChecks]*ratelimit.Limit
	limits := buf[:0]
	for i, c := range t.checks {
		if !t.queueing.Queues(i) || c.Limit.Rate() <= 0 {
			continue
		}
		switch {
		case c.Limit.Level == ratelimit.LevelUser:
			r.own = max(r.own, seconds(float64(c.Cost)/c.Limit.Rate()))
		case c.Limit.Level != ratelimit.LevelProvider || c.Limit.Dimension != ratelimit.Tokens:
			continue
		}
		limits = append(limits, c.Limit)
	}
	if len(limits) == 0 {
		return r
	}
	readings, err := t.limiter.Peek(ctx, limits, g.now())
	if err != nil {
		return room{own: r.own}
	}
	r.credit, r.headroom = -1, -1
	for i, l := range limits {
		if l.Level == ratelimit.LevelUser {
			r.credit = leastOf(r.credit, seconds(float64(readings[i].Remaining)/l.Rate()))
		} else {
			r.headroom = leastOf(r.headroom, readings[i].Remaining)
		}
	}
	r.credit, r.headroom = max(r.credit, 0), max(r.headroom, 0)
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

// drainRate is the tokens per second the door expects the queue to drain: what it drained in the
// recent seconds a limit it shares held it back, when there were enough of them, else this
// gateway's share of what the provider's tokens per minute let through while a backlog lasts, the
// gateways sharing it taking equal shares. A second the queue ran short of calls measures its
// callers, not its drain, and is left out. The caller holds d.mu.
func (d *dispatcher) drainRate(now time.Time) float64 {
	if tokens, full := d.drained.sumWhere(now, drainWindow, &d.full); full >= minFullSeconds {
		return float64(tokens) / float64(full)
	}
	p := d.g.policy().Provider(d.provider)
	if p == nil {
		return -1
	}
	return float64(p.SustainedTokensPerMinute()) / 60 / float64(d.g.policy().Replicas)
}

// heldBack records that a limit shared with other calls than the queue's next (the provider's,
// a global one, the calls in flight, a pause, the lanes of other gateways) held the queue back
// at now: this second measures the queue's drain. The caller holds d.mu.
func (d *dispatcher) heldBack(now time.Time) { d.full.add(now, 1) }

// queued counts a call into (+1) or out of (-1) its provider's queue.
func (d *dispatcher) queued(req *Request, it *fairqueue.Item, delta int64) {
	class := "interactive"
	if it.Class == fairqueue.Batch {
		class = "batch"
	}
	d.g.metrics.queueDepth.WithLabelValues(d.provider, class, req.tenant()).Add(float64(delta))
	d.g.metrics.queueTokens.WithLabelValues(d.provider, class, req.tenant()).Add(float64(delta * it.Cost))
	d.g.usage.queued(req, delta, delta*it.Cost)
}

// exchangeShares tells the gateways sharing the provider, every shareInterval until ctx ends (and
// a quarter of one after the last when an Interactive tenant starts waiting here), what this one
// served and which of its lanes wait, and takes in what they all served: the queue then holds
// back a lane that got ahead of its fair share. An exchange that fails forgets what
// the others served, so that no lane is held on old news.
func (d *dispatcher) exchangeShares(ctx context.Context) {
	t := time.NewTimer(shareEvery)
	defer t.Stop()
	interval, last := shareEvery, time.Now()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		case <-d.exchangeSoon: // no sooner than a quarter of an interval after the last
			if wait := time.Until(last.Add(interval / 4)); wait > 0 {
				t.Reset(wait)
				continue
			}
		}
		interval, last = d.exchangeOnce(ctx), time.Now()
		t.Reset(interval)
	}
}

// shareInterval is the time between two exchanges of lanes lanes.
func shareInterval(lanes int) time.Duration {
	return max(shareEvery, time.Duration(lanes)*sharePerLane)
}

// exchangeOnce makes one exchange and returns the time until the next (see shareInterval).
func (d *dispatcher) exchangeOnce(ctx context.Context) time.Duration {
	d.mu.Lock()
	ups := d.shares.Updates(d.waitingLanes(d.g.now()))
	d.mu.Unlock()
	interval := shareInterval(len(ups))
	if len(ups) == 0 {
		return interval
	}
	ctx, cancel := context.WithTimeout(ctx, decideTimeout)
	st, err := d.g.opts.Shares.Exchange(ctx, d.provider, ups, shareWordHolds*interval)
	cancel()
	d.mu.Lock()
	if err != nil {
		d.g.log.Debug("exchange the queue's shares with the other gateways; the queue is served as if alone meanwhile", "provider", d.provider, "err", err)
		d.shares.Forget()
	} else {
		d.shares.Took(ups, st)
	}
	d.shares.SetGatewaySlack(d.gatewaySlack(interval))
	d.mu.Unlock()
	d.kick() // a lane held back may go now
	return interval
}

// gatewaySlack is how far a gateway may get ahead of the least served gateway, in tokens over its
// share of the provider, when exchanges are interval apart: gatewaySlackIntervals of them of what
// the provider's tokens per minute let through (a lane's slack for a provider with none).
func (d *dispatcher) gatewaySlack(interval time.Duration) float64 {
	p := d.g.policy().Provider(d.provider)
	if p == nil || p.SustainedTokensPerMinute() <= 0 {
		return shareSlack
	}
	return gatewaySlackIntervals * interval.Seconds() * float64(p.SustainedTokensPerMinute()) / 60
}

// waitingLanes are the shared ledger's members of the queue's lanes that wait and that no limit of
// their own blocks at now, and the share of the provider they are owed. The caller holds d.mu.
func (d *dispatcher) waitingLanes(now time.Time) (map[fairshare.Member]bool, float64) {
	waiting, share := map[fairshare.Member]bool{}, 0.0
	d.q.Open(now, func(it *fairqueue.Item) {
		waiting[fairshare.ClassOf(it)] = true
		waiting[fairshare.TenantOf(it)] = true
		waiting[fairshare.UserOf(it)] = true
		share += d.shares.Owed(it)
	})
	return waiting, share
}
