package admission

import (
	"cmp"
	"context"
	"slices"
	"time"

	gatewayv1 "github.com/sluicehq/sluice/api/gateway/v1"
	"github.com/sluicehq/sluice/cmd/gateway/internal/policy"
	"github.com/sluicehq/sluice/cmd/gateway/internal/ratelimit"
)

// A model's pool is the providers that serve it. Each keeps its own limits, queue and breaker; a
// call chooses among them when it comes:
//   - it goes at once to the first that can take it, trying them least loaded first (calls in
//     flight from this gateway over the provider's sustained tokens a minute), so that calls
//     spread over a pool in proportion to each provider's limits;
//   - when none can, it waits at the one whose door promises the shortest wait: what each queue
//     holds against the rate it drains;
//   - once queued, it waits for whichever provider of its pool frees first: a provider with
//     nothing of its own queued sends the next call, in fair order, of another's queue that it
//     may serve (steal), and that queue's door counts what the others drained from it, so that
//     the queues of a pool drain together;
//   - a provider whose breaker is open is out of the pool; when a breaker opens, the calls
//     waiting at its provider move to the others' queues, past their doors, for what is left of
//     their maxWait. A half-open provider is in the pool: while its probe is out, calls wait in
//     its queue for the answer.

// serving returns the choices whose provider is in its pool (its breaker closed or half open), or,
// when none is, the refusal that says so and when the first lets a probe through.
func (g *Gate) serving(choices []Choice) ([]Choice, *Refusal) {
	out := func(c Choice) bool {
		o, _ := g.dispatcher(c.Route.Provider.Name).health.outOfPool()
		return o
	}
	if !slices.ContainsFunc(choices, out) {
		return choices, nil // the common case: nothing to copy
	}
	if live := slices.DeleteFunc(slices.Clone(choices), out); len(live) > 0 {
		return live, nil
	}
	var retryAfter time.Duration = -1
	for _, c := range choices {
		_, after := g.dispatcher(c.Route.Provider.Name).health.outOfPool()
		retryAfter = leastOf(retryAfter, after)
	}
	return nil, &Refusal{Reason: ProviderDown, RetryAfter: RetryAfter(retryAfter)}
}

// admitTo admits the call to one of live: at once to the first, least loaded first, whose limits
// allow it with nobody waiting before it, or else through the door of the queue that would let it
// go soonest (past no door, for a call moved off a provider whose breaker opened, queued since
// `since`). Its verdict is moved when the call waited for a provider whose breaker opened
// meanwhile: it is to be admitted again.
func (g *Gate) admitTo(ctx context.Context, req Request, live []Choice, since time.Time) verdict {
	var refused *Ticket // the first refused at once, and its verdict
	var refusal verdict
	waiting := make([]*Ticket, 0, len(live))
	for _, c := range g.byLoad(live) {
		t := &Ticket{g: g, req: req.at(c), lease: g.leases.Next()}
		t.use(g.opts.Limiter, policy.Shared)
		if r := tooLarge(t.checks); r != nil {
			if refused == nil {
				refused, refusal = t, verdict{refusal: r}
			}
			continue
		}
		d := g.dispatcher(t.req.provider())
		if !d.idle() {
			waiting = append(waiting, t)
			continue
		}
		v := g.decide(ctx, t)
		switch {
		case v.ticket != nil:
			d.arrived(since)
			return g.answer(ctx, &t.req, v)
		case v.queues:
			waiting = append(waiting, t)
		case v.refusal.Level < ratelimit.LevelGlobal || len(live) == 1:
			d.arrived(since)
			return g.answer(ctx, &t.req, v) // the caller's own limit: the same at every provider
		case refused == nil:
			refused, refusal = t, v
		}
	}
	if len(waiting) == 0 {
		g.dispatcher(refused.req.provider()).arrived(since)
		return g.answer(ctx, &refused.req, refusal)
	}
	t, room := g.soonest(ctx, waiting)
	d := g.dispatcher(t.req.provider())
	d.arrived(since)
	v := d.wait(ctx, t, room, since)
	if v.moved {
		return v
	}
	return g.answer(ctx, &t.req, v)
}

// arrived counts a call that came for the provider: once, where it was first let go, queued or
// refused, not again where it moved when a breaker opened (since is when it first queued).
func (d *dispatcher) arrived(since time.Time) {
	if since.IsZero() {
		d.arrivals.Inc()
	}
}

// byLoad orders choices least loaded first: by this gateway's calls in flight to each provider
// over its weight in the pool (see weight), the configuration's order among equals.
func (g *Gate) byLoad(choices []Choice) []Choice {
	if len(choices) < 2 {
		return choices
	}
	load := func(c Choice) float64 {
		return float64(g.usage.inFlight(c.Route.Provider.Name)) / weight(c)
	}
	out := slices.Clone(choices)
	slices.SortStableFunc(out, func(a, b Choice) int { return cmp.Compare(load(a), load(b)) })
	return out
}

// weight is a provider's share of its pools for call c: the tokens a minute its token limits let
// through while a backlog of such calls lasts (see sustained), else its requests a minute, else
// its cap of calls in flight, else 1.
func weight(c Choice) float64 {
	if n := 60 * sustained(c.Route.Provider, c.takes()); n > 0 {
		return n
	}
	cfg := c.Route.Provider.Config
	for _, n := range []int64{cfg.WithHeadroom(cfg.PerMinute(gatewayv1.DimensionRequests)), cfg.WithHeadroom(cfg.MaxInFlight)} {
		if n > 0 {
			return float64(n)
		}
	}
	return 1
}

// soonest returns, of tickets that must wait, the one whose queue's door promises the shortest
// wait, with what the limits it waits for hold now. A queue whose drain is unknown comes last.
func (g *Gate) soonest(ctx context.Context, tickets []*Ticket) (*Ticket, room) {
	var best *Ticket
	var bestRoom room
	bestWait := time.Duration(-1)
	for _, t := range tickets {
		r := g.room(ctx, t)
		if len(tickets) == 1 {
			return t, r
		}
		wait := g.dispatcher(t.req.provider()).quote(t, r)
		if best == nil || (wait >= 0 && (bestWait < 0 || wait < bestWait)) {
			best, bestRoom, bestWait = t, r, wait
		}
	}
	return best, bestRoom
}

// steal sends, when this provider has nothing of its own queued, the next call of another
// provider's queue of its pool, in that queue's fair order, if the call may go here and this
// provider's limits let it: a queued call waits for whichever of its providers frees first. It
// returns how long to sleep before the next step: zero when a call went, else idle (the sleep of
// an empty queue), a short poll while another queue holds calls it could not take yet, or what
// this provider's limits said.
func (d *dispatcher) steal(idle time.Duration) time.Duration {
	p := d.g.policy().Provider(d.provider)
	if p == nil {
		return idle
	}
	sleep := idle
	for _, name := range p.Pooled {
		home := d.g.existingDispatcher(name)
		if home == nil {
			continue
		}
		wt, choice, queued := home.offer(d.provider)
		if wt == nil {
			if queued { // its next call is being decided, or its lanes are blocked: look again soon
				sleep = inFlightPoll
			}
			continue
		}
		t := &Ticket{g: d.g, req: wt.t.req.at(choice), lease: d.g.leases.Next()}
		ctx, cancel := context.WithTimeout(d.g.ctx, decideTimeout)
		v := d.g.decide(ctx, t)
		cancel()
		home.stolen(wt, v)
		switch {
		case v.ticket != nil:
			return 0
		case v.refusal.RetryAfter > 0:
			return v.refusal.RetryAfter
		}
		return inFlightPoll
	}
	return sleep
}

// offer claims the next call of the queue, in fair order, for provider to decide, and returns
// it with what it costs there; nil when that call may not go to provider, or is claimed already.
// queued reports whether the queue holds calls.
func (d *dispatcher) offer(provider string) (wt *waiter, c Choice, queued bool) {
	d.mu.Lock()
	defer d.mu.Unlock()
	it, _ := d.q.Next(d.g.now())
	if it == nil {
		return nil, Choice{}, d.q.Len() > 0
	}
	wt = it.Value.(*waiter)
	i := slices.IndexFunc(wt.t.req.Pool, func(c Choice) bool { return c.Route.Provider.Name == provider })
	if wt.claimed || i < 0 {
		return nil, Choice{}, true
	}
	wt.claimed = true
	return wt, wt.t.req.Pool[i], true
}

// stolen concludes a call of the queue that another provider of its pool decided: let go there,
// it leaves the queue served, and counts in what the queue drained; refused, it stays for this
// provider or another. A call whose client left meanwhile is given back.
func (d *dispatcher) stolen(wt *waiter, v verdict) {
	d.mu.Lock()
	wt.claimed = false
	if !wt.item.Queued() {
		d.mu.Unlock()
		if v.ticket != nil {
			v.ticket.Withdraw()
		}
		return
	}
	if v.ticket != nil {
		d.drained.add(d.g.now(), wt.item.Cost)
		if d.shares != nil {
			d.shares.Served(wt.item)
		}
		d.finish(wt, v, true)
	}
	d.mu.Unlock()
	d.kick() // the queue's head may have changed
}

// existingDispatcher returns the provider's dispatcher if it has started, or nil.
func (g *Gate) existingDispatcher(provider string) *dispatcher {
	if d, ok := g.dispatchers.Load(provider); ok {
		return d.(*dispatcher)
	}
	return nil
}

// poolWaiting reports whether a call waits in the queue of another provider of provider's pools.
func (g *Gate) poolWaiting(provider string) bool {
	p := g.policy().Provider(provider)
	if p == nil {
		return false
	}
	for _, name := range p.Pooled {
		if d := g.existingDispatcher(name); d != nil && d.waiting() {
			return true
		}
	}
	return false
}

// waiting reports whether a call waits in the queue.
func (d *dispatcher) waiting() bool {
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.q.Len() > 0
}

// kickPool wakes the dispatchers of the other providers of provider's pools: a call queued
// there that one of them may send.
func (g *Gate) kickPool(provider string) {
	p := g.policy().Provider(provider)
	if p == nil {
		return
	}
	for _, name := range p.Pooled {
		if d := g.existingDispatcher(name); d != nil {
			d.kick()
		}
	}
}
