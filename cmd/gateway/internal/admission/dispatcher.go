package admission

import (
	"context"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"

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
)

// dispatcher owns one provider's queue and the calls waiting in it: it sends the next call in
// fair order whenever every limit allows it, in one limiter decision, so no call is sent to hit a
// limit and come back. Its lock, mu, guards the queue, its door and its drain's measure; the
// provider's health has its own (see health).
type dispatcher struct {
	g        *Gate
	provider string
	wake     chan struct{}
	// exchangeSoon asks for an exchange of shares before the next one due: an Interactive tenant
	// started waiting here, and the other gateways' Batch lanes should learn it.
	exchangeSoon chan struct{}
	// arrivals, callDuration and queueWait are the provider's series, looked up once.
	arrivals     prometheus.Counter
	callDuration prometheus.Observer
	queueWait    prometheus.Observer

	// estimateRatio measures the door: a call's wait against its estimate.
	estimateRatio prometheus.Observer

	mu     sync.Mutex
	q      *fairqueue.Queue
	door   door
	shares *fairshare.Ledger // what the gateways sharing the provider served; nil alone
	// elsewhere is what the last exchange of shares said waits on every gateway (see setElsewhere).
	elsewhere elsewhereNews
	backlog   byKind // what the queued calls take of each kind of tokens (see Request.takes)
	drainMeter

	// health is what the provider's answers said of it, under its own lock.
	health *health
}

func newDispatcher(g *Gate, provider string) *dispatcher {
	d := &dispatcher{g: g, provider: provider, wake: make(chan struct{}, 1), exchangeSoon: make(chan struct{}, 1),
		arrivals:      g.metrics.arrivals.WithLabelValues(provider),
		callDuration:  g.metrics.callDuration.WithLabelValues(provider),
		queueWait:     g.metrics.queueWait.WithLabelValues(provider),
		estimateRatio: g.metrics.estimateRatio.WithLabelValues(provider),
		health:        newHealth(g, provider)}
	var opts fairqueue.Options
	if g.opts.Shares != nil {
		d.shares = fairshare.New(shareSlack, fairqueue.DefaultBatchShare, g.leases.Next(), g.tenantWeight)
		opts.Hold = d.shares.Held // asked under d.mu, in d.q.Next
	}
	d.q = fairqueue.New(opts)
	d.door = door{q: d.q,
		refusals:      g.metrics.doorRefusals.MustCurryWith(prometheus.Labels{"provider": provider}),
		comebackError: g.metrics.comebackError.WithLabelValues(provider)}
	return d
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
	// claimed: a dispatcher is deciding the call (its own, or another of its pool's, see steal);
	// no other may until it has concluded. Guarded by the mu of the dispatcher whose queue
	// holds the call.
	claimed bool
}

// wait queues a call after the door's estimate, r being what the limits it waits for hold, and
// returns when it has been decided: allowed (it may go), refused, abandoned by its client, moved
// (the provider's breaker opened), or, for a call someone waits for, still queued after its
// plan's maxWait (the door's estimate was wrong, or the provider is paused). A call moved here
// from a provider whose breaker opened, queued since `since` (zero for any other), passes no
// door: it was let in already, and waits out what is left of its maxWait.
func (d *dispatcher) wait(ctx context.Context, t *Ticket, r room, since time.Time) verdict {
	start := d.g.now()
	wt := newWaiter(t, r)
	if !since.IsZero() {
		start = since
		d.pushMoved(wt)
	} else if r := d.push(wt, start); r != nil {
		return verdict{refusal: r}
	}
	d.kick()
	var expired <-chan time.Time
	if maxWait := t.req.maxWait(); maxWait > 0 {
		timer := time.NewTimer(max(maxWait-d.g.now().Sub(start), time.Millisecond))
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

func newWaiter(t *Ticket, r room) *waiter {
	wt := &waiter{t: t, room: r, done: make(chan verdict, 1)}
	wt.item = &fairqueue.Item{
		Tenant: t.req.tenant(), User: t.req.Caller.User, Weight: t.req.Caller.Tenant.Config.Weight,
		Class: t.req.class(), Cost: t.req.providerCost(), Own: r.own, Value: wt,
	}
	return wt
}

// quote is the wait the door would promise the call t if it came now, r being what the limits
// it waits for hold; -1 when the queue's drain is unknown, or the provider is paused (by its
// configuration, or after a throttle). It changes nothing.
func (d *dispatcher) quote(t *Ticket, r room) time.Duration {
	now := d.g.now()
	if d.health.paused(now) {
		return -1
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.atDoor(newWaiter(t, r), r, now, false).wait
}

// waited records how long a decided call waited, and for one let go, that wait against the
// door's estimate.
func (d *dispatcher) waited(wt *waiter, v verdict, start time.Time) verdict {
	if v.moved {
		v.since = start
		return v
	}
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

// push lets a call in at the door (see door.answer), or returns the door's busy answer. An
// Interactive tenant that starts waiting here is told to the other gateways' Batch lanes soon.
func (d *dispatcher) push(wt *waiter, now time.Time) *Refusal {
	d.mu.Lock()
	defer d.mu.Unlock()
	out := d.door.answer(d.atDoor(wt, wt.room, now, true))
	if out.busy != nil {
		return out.busy
	}
	wt.estimate = out.wait
	if waiting, _ := d.q.Ahead(wt.item.Class, wt.item.Tenant); waiting == 1 && wt.item.Class == fairqueue.Interactive && d.shares != nil {
		select {
		case d.exchangeSoon <- struct{}{}:
		default:
		}
	}
	d.queued(&wt.t.req, wt.item, 1)
	d.g.kickPool(d.provider) // another provider of the call's pool may be free to send it
	return nil
}

// pushMoved queues a call moved here from a provider of its pool whose breaker opened, with no
// door: the door of the provider it came to let it in.
func (d *dispatcher) pushMoved(wt *waiter) {
	d.mu.Lock()
	defer d.mu.Unlock()
	d.q.Push(wt.item)
	d.queued(&wt.t.req, wt.item, 1)
	d.g.kickPool(d.provider)
}

// expire takes a call that waited its plan's maxWait out of the queue and answers it busy, as
// the door would have. When to come back is reckoned from where the call stands in its lane,
// before it leaves it: of a lane's calls that wait out their maxWait together, the first is told
// to come back first and each other a turn of the lane later.
func (d *dispatcher) expire(wt *waiter, start time.Time) verdict {
	d.mu.Lock()
	now := d.g.now()
	back := d.comebackOf(d.atDoor(wt, room{}, now, false))
	d.mu.Unlock()
	d.abandon(wt) // a decision made meanwhile is given back
	d.mu.Lock()
	defer d.mu.Unlock()
	a := d.atDoor(wt, room{}, now, false)
	a.comeback, a.expired = back, true
	r := d.door.answer(a).busy
	r.Waited = now.Sub(start)
	return verdict{refusal: r}
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
		if d.idle() {
			return d.steal(sleep)
		}
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
	if wait, open := d.health.open(now); !open {
		if d.q.Len() > 0 && d.health.inPool(now) {
			d.heldBack(now) // a provider out behind its breaker drains nothing: not a second of its drain
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
	wt := it.Value.(*waiter)
	if wt.claimed {
		return nil, inFlightPoll // another provider of its pool decides it, and wakes this one after
	}
	wt.claimed = true
	return wt, 0
}

// conclude acts on the verdict on a call that next returned, and returns how long to sleep
// before the next step.
func (d *dispatcher) conclude(wt *waiter, v verdict) time.Duration {
	d.mu.Lock()
	wt.claimed = false
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
	case !v.queues:
		d.finish(wt, v, false) // refused: waiting would not help
		return 0
	case req.maxWait() > 0 && v.refusal.RetryAfter > req.maxWait():
		d.finish(wt, verdict{refusal: d.door.later(wt, v.refusal, now)}, false)
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
	d.g.kickPool(d.provider) // the queue's next call may be one another provider of its pool can send
}

// block keeps a refused call queued: a limit of its own lane blocks only that lane, until it
// refills (see laneWait); a global or provider limit holds everyone, until it refills or a call
// in flight ends.
func (d *dispatcher) block(wt *waiter, r *Refusal, now time.Time) time.Duration {
	until := now.Add(laneWait(r))
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

// laneWait is how long a refusal by a limit of a lane's own holds the lane: until the limit
// refills, or, for its calls in flight, which free when one of them ends at this gateway or
// another, inFlightPoll.
func laneWait(r *Refusal) time.Duration {
	if r.Dimension == ratelimit.InFlight {
		return max(r.RetryAfter, inFlightPoll)
	}
	return max(r.RetryAfter, time.Millisecond)
}

// queued counts a call into (+1) or out of (-1) its provider's queue.
func (d *dispatcher) queued(req *Request, it *fairqueue.Item, delta int64) {
	class := "interactive"
	if it.Class == fairqueue.Batch {
		class = "batch"
	}
	d.g.metrics.queueDepth.WithLabelValues(d.provider, class, req.tenant()).Add(float64(delta))
	d.g.metrics.queueTokens.WithLabelValues(d.provider, class, req.tenant()).Add(float64(delta * it.Cost))
	d.g.usage.queued(req, delta, delta*it.Cost)
	for k, n := range req.takes() {
		d.backlog[k] += delta * n
	}
}

// idle reports whether nobody waits and the provider is open, so a new call may try to go at once.
func (d *dispatcher) idle() bool {
	d.mu.Lock()
	defer d.mu.Unlock()
	_, open := d.health.open(d.g.now())
	return d.q.Len() == 0 && open
}

// ended takes in a call back from the provider at now (see health.ended), which took so long if
// it was served (see drainMeter.callEnded). It wakes the dispatcher only when a call waits that what
// the call gave back may let go: in its own queue, or in that of another provider of its pools,
// which it may serve (see steal). A call that arrives later decides at once, or queues and wakes
// it itself.
func (d *dispatcher) ended(served bool, tokens byKind, took time.Duration, now time.Time) {
	d.health.ended(served, tokens)
	d.mu.Lock()
	if served {
		d.callEnded(took, now)
	}
	waiting := d.q.Len() > 0
	d.mu.Unlock()
	if waiting || d.g.poolWaiting(d.provider) {
		d.kick()
	}
}

// kick wakes the dispatcher: a call arrived, or one ended and gave back what it held.
func (d *dispatcher) kick() {
	select {
	case d.wake <- struct{}{}:
	default:
	}
}
