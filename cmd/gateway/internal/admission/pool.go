package admission

import (
	"cmp"
	"context"
	"slices"
	"time"

	"github.com/sluicehq/sluice/cmd/gateway/internal/policy"
	"github.com/sluicehq/sluice/cmd/gateway/internal/ratelimit"
)

// A model's pool is the providers that serve it. Each keeps its own limits, queue and breaker; a
// call chooses among them when it comes:
//   - it goes at once to the first that can take it, trying them least loaded first (calls in
//     flight from this gateway over the provider's sustained tokens a minute), so that calls
//     spread over a pool in proportion to each provider's limits;
//   - when none can, it waits at the one whose door promises the shortest wait: what each queue
//     holds against the rate it drains, so that the queues of a pool drain together;
//   - a provider whose breaker is open is out of the pool, and when a breaker opens, the calls
//     waiting at its provider come to the door of the others.

// serving returns the choices whose provider's breaker lets a call go now, or, when none does,
// the refusal that says so and when the first lets a probe through.
func (g *Gate) serving(choices []Choice) ([]Choice, *Refusal) {
	live := make([]Choice, 0, len(choices))
	var retryAfter time.Duration = -1
	for _, c := range choices {
		ok, after := g.dispatcher(c.Route.Provider.Name).breakerAllows()
		if ok {
			live = append(live, c)
			continue
		}
		retryAfter = leastOf(retryAfter, after)
	}
	if len(live) > 0 {
		return live, nil
	}
	return nil, &Refusal{Reason: ProviderDown, RetryAfter: RetryAfter(retryAfter)}
}

// admitTo admits the call to one of live: at once to the first, least loaded first, whose limits
// allow it with nobody waiting before it, or else through the door of the queue that would let it
// go soonest. moved reports that the call waited for a provider whose breaker opened meanwhile: it
// is to be admitted again.
func (g *Gate) admitTo(ctx context.Context, req Request, live []Choice) (t *Ticket, r *Refusal, moved bool) {
	var refused *Ticket // the first refused at once, and its verdict
	var refusal verdict
	waiting := make([]*Ticket, 0, len(live))
	for _, c := range g.byLoad(live) {
		t := &Ticket{g: g, req: req.at(c), lease: g.leases.Next()}
		t.use(g.opts.Limiter, policy.Shared)
		if r := g.tooLarge(t.req, t.checks); r != nil {
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
			d.arrivals.Inc()
			t, r := g.answer(ctx, &t.req, v)
			return t, r, false
		case v.queues:
			waiting = append(waiting, t)
		case v.refusal.Level < ratelimit.LevelGlobal || len(live) == 1:
			t, r := g.answer(ctx, &t.req, v) // the caller's own limit: the same at every provider
			return t, r, false
		case refused == nil:
			refused, refusal = t, v
		}
	}
	if len(waiting) == 0 {
		t, r := g.answer(ctx, &refused.req, refusal)
		return t, r, false
	}
	t, room := g.soonest(ctx, waiting)
	d := g.dispatcher(t.req.provider())
	d.arrivals.Inc()
	v := d.wait(ctx, t, room)
	if v.moved {
		return nil, nil, true
	}
	t, r = g.answer(ctx, &t.req, v)
	return t, r, false
}

// byLoad orders choices least loaded first: by this gateway's calls in flight to each provider
// over its weight in the pool (see weight), the configuration's order among equals.
func (g *Gate) byLoad(choices []Choice) []Choice {
	if len(choices) < 2 {
		return choices
	}
	load := func(c Choice) float64 {
		return float64(g.usage.inFlight(c.Route.Provider.Name)) / weight(c.Route.Provider)
	}
	out := slices.Clone(choices)
	slices.SortStableFunc(out, func(a, b Choice) int { return cmp.Compare(load(a), load(b)) })
	return out
}

// weight is a provider's share of its pools: its sustained tokens a minute, else its requests a
// minute, else its cap of calls in flight, else 1.
func weight(p *policy.Provider) float64 {
	cfg := p.Config
	for _, n := range []int64{p.SustainedTokensPerMinute(), cfg.WithHeadroom(cfg.RequestsPerMinute), cfg.WithHeadroom(cfg.MaxInFlight)} {
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
