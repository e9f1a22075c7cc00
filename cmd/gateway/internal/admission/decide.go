package admission

import (
	"context"
	"errors"
	"slices"
	"time"

	"github.com/sluicehq/sluice/cmd/gateway/internal/policy"
	"github.com/sluicehq/sluice/cmd/gateway/internal/ratelimit"
)

// verdict is one decision on a call: its ticket when every limit allowed it, else the refusal
// and whether it waits in the queue.
type verdict struct {
	ticket  *Ticket
	refusal *Refusal
	queues  bool
	// moved: the call waited, since `since`, for a provider whose breaker opened, and is to be
	// admitted again among the others.
	moved bool
	since time.Time
}

// use makes the ticket's checks those of limiter, at the given share of each limit. The checks
// of a call are built once per store: a queued call decided again reuses them.
func (t *Ticket) use(limiter Limiter, share policy.Share) {
	if t.limiter == limiter && t.checks != nil {
		return
	}
	t.limiter = limiter
	var queueing policy.Queueing
	t.checks, queueing = t.req.checks(t.buf[:0], share, t.lease)
	t.queueing = queueing
}

// decide checks every limit of the ticket's call and takes the estimate from all of them, or
// from none: on the shared store, or on this replica's shares when the store fails open. A
// calendar window (a budget, a day's or month's quota) is never decided locally: a replica's
// local window would start from full, so a call that one covers is refused as if the store
// failed closed.
func (g *Gate) decide(ctx context.Context, t *Ticket) verdict {
	t.use(g.opts.Limiter, policy.Shared)
	d, err := g.timedDecide(ctx, "shared", t)
	switch {
	case err == nil:
		g.metrics.storeUp.Set(1)
		return g.conclude(t, &d)
	case errors.Is(ctx.Err(), context.Canceled):
		return verdict{refusal: &Refusal{Reason: Gone}} // the client left; the store did not fail
	}
	// Any other error, a decision that ran out of time included, is the store's.
	g.metrics.storeUp.Set(0)
	if g.opts.Fallback == nil {
		g.metrics.storeErrors.WithLabelValues("refused").Inc()
		g.log.Error("limiter store failed; refusing (failMode: closed)", "err", err)
		return verdict{refusal: &Refusal{Reason: Unavailable, RetryAfter: time.Second}}
	}
	if coversWindow(t.checks) {
		g.metrics.storeErrors.WithLabelValues("refused").Inc()
		return verdict{refusal: &Refusal{Reason: Unavailable, RetryAfter: time.Second}}
	}
	g.metrics.storeErrors.WithLabelValues("local").Inc()
	t.use(g.opts.Fallback, policy.Local)
	if d, err = g.timedDecide(ctx, "local", t); err != nil {
		return verdict{refusal: &Refusal{Reason: Failed}}
	}
	return g.conclude(t, &d)
}

// coversWindow reports whether any of checks is on a calendar window.
func coversWindow(checks []ratelimit.Check) bool {
	return slices.ContainsFunc(checks, func(c ratelimit.Check) bool { return c.Limit.IsWindow() })
}

func (g *Gate) timedDecide(ctx context.Context, store string, t *Ticket) (ratelimit.Decision, error) {
	start := time.Now()
	d, err := t.limiter.Decide(ctx, t.checks, g.now())
	g.metrics.decisions.WithLabelValues(store).Observe(time.Since(start).Seconds())
	return d, err
}

// conclude turns a limiter's decision into a verdict. An allowed call is in flight from now.
func (g *Gate) conclude(t *Ticket, d *ratelimit.Decision) verdict {
	t.Limits = limitsOf(t.checks, d, t.budgetKey())
	if d.Allowed {
		t.took = d.At
		g.started(t)
		return verdict{ticket: t}
	}
	r := limitedBy(t.checks, d, t.Limits)
	return verdict{refusal: r, queues: r.Reason == Limited && t.queueing.Queues(d.Refused) && t.req.queuesAt(r.Level)}
}

// limitedBy is the refusal of a decision on checks that did not allow them: Limited, or TooLarge
// when no wait can help. limits are the caller's limits as it left them.
func limitedBy(checks []ratelimit.Check, d *ratelimit.Decision, limits Limits) *Refusal {
	c := checks[d.Refused]
	r := &Refusal{Reason: Limited, Level: c.Limit.Level, Dimension: c.Limit.Dimension,
		Capacity: c.Limit.Capacity(), Remaining: d.Remaining[d.Refused], Requested: c.Cost,
		RetryAfter: d.RetryAfter, Limits: limits, Spent: c.Limit.IsWindow()}
	if d.Never {
		r.Reason, r.RetryAfter = TooLarge, 0
	}
	return r
}

func (t *Ticket) budgetKey() string {
	if b := t.req.Caller.Tenant.Budget(); b != nil {
		return b.Key
	}
	return ""
}

// started counts a call going to its provider: in flight until its ticket ends, its slots
// renewed meanwhile.
func (g *Gate) started(t *Ticket) {
	t.started = g.now()
	g.usage.started(&t.req, t.started)
	g.dispatcher(t.req.provider()).sent(t.started)
	t.renewal.Store(time.AfterFunc(renewEvery, t.renew))
}

// ended counts a call whose ticket ended, at its real cost, and frees its slot in flight.
func (g *Gate) ended(t *Ticket, actual policy.Cost, served bool) {
	now := g.now()
	tenant, provider := t.req.tenant(), t.req.provider()
	g.metrics.tokens.WithLabelValues(tenant, provider, "estimated").Add(float64(t.req.Cost.Tokens))
	g.metrics.tokens.WithLabelValues(tenant, provider, "actual").Add(float64(actual.Tokens))
	g.metrics.spend.WithLabelValues(tenant, provider).Add(float64(actual.MicroDollars))
	d := g.dispatcher(provider)
	d.callDuration.Observe(now.Sub(t.started).Seconds())
	g.usage.finished(&t.req, actual.Tokens-t.req.Cost.Tokens, actual.MicroDollars, now)
	d.ended(served)
}

// refused counts a refusal by a limit.
func (g *Gate) refused(req *Request, r *Refusal) {
	g.metrics.refusals.WithLabelValues(r.Level.String(), r.Dimension.String()).Inc()
	g.usage.refused(req, r.Level.String()+"_"+r.Dimension.String())
}
