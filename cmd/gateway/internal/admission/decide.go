package admission

import (
	"context"
	"errors"
	"slices"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	gatewayv1 "github.com/sluicehq/sluice/api/gateway/v1"
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
	t.checks, queueing = t.req.checks(t.checks[:0], share, t.lease)
	t.queueing = queueing
}

// decide checks every limit of the ticket's call and takes the estimate from all of them, or
// from none: on the shared store, or on this replica's shares when the store fails open. A
// calendar window (a budget, a day's or month's quota) is never decided locally: a replica's
// local window would start from full, so a call that one covers is refused as if the store
// failed closed.
func (g *Gate) decide(ctx context.Context, t *Ticket) verdict {
	t.use(g.opts.Limiter, policy.Shared)
	err := g.seeded(ctx, &t.req, t.checks, &t.decision, func() error { return g.timedDecide(ctx, g.metrics.decidedShared, t) })
	switch {
	case err == nil:
		g.metrics.storeUp.Set(1)
		return g.conclude(t)
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
	if err := g.timedDecide(ctx, g.metrics.decidedLocal, t); err != nil {
		return verdict{refusal: &Refusal{Reason: Failed}}
	}
	return g.conclude(t)
}

// coversWindow reports whether any of checks is on a calendar window.
func coversWindow(checks []ratelimit.Check) bool {
	return slices.ContainsFunc(checks, func(c ratelimit.Check) bool { return c.Limit.IsWindow() })
}

// seeded takes a decision on the shared store, decide, which writes it into d, and when a scope's
// mark refuses it (the store came back empty, or from an older snapshot, since the record was
// taken), re-seeds the scope from the record and takes it again. A store that stays behind is a
// store that cannot decide.
func (g *Gate) seeded(ctx context.Context, req *Request, checks []ratelimit.Check, d *ratelimit.Decision, decide func() error) error {
	for range maxReseeds {
		if err := decide(); err != nil || d.Allowed || !d.RefusedBy(checks).IsMark() {
			return err
		}
		if err := g.reseed(ctx, policy.ScopeOf(req.Caller, req.Route, d.RefusedBy(checks))); err != nil {
			return err
		}
	}
	return errBehind
}

// maxReseeds bounds the re-seeds of one decision: one per scope it may cover (a tenant's, the
// global one and a provider's), and one more for a record that changed meanwhile.
const maxReseeds = 4

var errBehind = errors.New("the store stays behind the record after re-seeding it")

// reseed brings a scope of the shared store up to the record: once at a time in this gateway,
// and once in all, since the store's re-seed is atomic and does nothing to a scope that holds
// the record's version.
func (g *Gate) reseed(ctx context.Context, s *policy.Scope) error {
	if s == nil {
		return errors.New("a mark refused a decision that covers no scope of it")
	}
	_, err, _ := g.reseeds.Do(s.Name, func() (any, error) {
		did, err := g.opts.Limiter.Reseed(context.WithoutCancel(ctx), s.Mark, s.Record.Version, s.Seeds(), g.now())
		switch {
		case did && s.Record.Version == 0: // the record never held the scope: a new store, or a new scope
			g.log.Info("marked a scope's calendar windows in the store; the record holds none of them yet", "scope", s.Name)
		case did:
			g.metrics.reseeds.Inc()
			g.log.Warn("the store held no record of a scope's calendar windows, or an older one (it came back empty or from an older snapshot); re-seeded it from the record",
				"scope", s.Name, "version", s.Record.Version, "takenAt", s.Record.TakenAt.Time)
			if err := g.newJobsEpoch(ctx); err != nil {
				g.log.Error("start a new epoch of jobs after the store was found behind the record; jobs it lost may read as not found", "err", err)
			}
		}
		return nil, err
	})
	return err
}

// newJobsEpoch starts a new epoch of the jobs' store, when there is one.
func (g *Gate) newJobsEpoch(ctx context.Context) error {
	if g.opts.Jobs == nil {
		return nil
	}
	return g.opts.Jobs.NewEpoch(context.WithoutCancel(ctx))
}

// timedDecide takes the ticket's decision on its limiter, into t.decision, and observes its time
// into took, the store's series.
func (g *Gate) timedDecide(ctx context.Context, took prometheus.Observer, t *Ticket) error {
	start := time.Now()
	err := t.limiter.Decide(ctx, t.checks, g.now(), &t.decision)
	took.Observe(time.Since(start).Seconds())
	return err
}

// conclude turns the ticket's decision into a verdict. An allowed call is in flight from now.
func (g *Gate) conclude(t *Ticket) verdict {
	d := &t.decision
	t.Limits = limitsOf(t.checks, d, t.budgetKey())
	if d.Allowed {
		t.took = d.At
		g.started(t)
		return verdict{ticket: t}
	}
	r := limitedBy(t.checks, d, t.Limits)
	return verdict{refusal: r, queues: r.Reason == Limited && t.queueing.Queues(d.Refused) && t.req.queuesAt(r.Level) && t.req.waitsOut(r)}
}

// limitedBy is the refusal of a decision on checks that did not allow them: Limited, or TooLarge
// when no wait can help. limits are the caller's limits as it left them.
func limitedBy(checks []ratelimit.Check, d *ratelimit.Decision, limits Limits) *Refusal {
	c := checks[d.Refused]
	if d.Never {
		return tooLargeFor(c)
	}
	r := limitedOn(c.Limit)
	r.Remaining, r.Requested, r.RetryAfter, r.Limits = d.Remaining[d.Refused], c.Cost, d.RetryAfter, limits
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
	g.dispatcher(t.req.provider()).health.sent(t.started)
	if t.holdsSlots() {
		g.renewals.add(g, t, t.started)
	}
}

// ended counts a call whose ticket ended, at its real cost and the tokens it was billed for
// (none when it was not charged), and frees its slot in flight.
func (g *Gate) ended(t *Ticket, actual policy.Cost, bill gatewayv1.Tokens, served bool) {
	now := g.now()
	tenant, provider := t.req.tenant(), t.req.provider()
	g.metrics.tokens.WithLabelValues(tenant, provider, "estimated").Add(float64(t.req.Cost.Tokens))
	g.metrics.tokens.WithLabelValues(tenant, provider, "actual").Add(float64(actual.Tokens))
	g.metrics.spend.WithLabelValues(tenant, provider).Add(float64(actual.MicroDollars))
	g.metrics.countBilled(tenant, provider, bill)
	d := g.dispatcher(provider)
	took := now.Sub(t.started)
	d.callDuration.Observe(took.Seconds())
	g.usage.finished(&t.req, actual, now)
	d.ended(served, t.req.served(actual), took, now)
}

// refused counts a refusal by a limit.
func (g *Gate) refused(req *Request, r *Refusal) {
	g.metrics.refusals.WithLabelValues(r.Level.String(), r.Dimension.String()).Inc()
	g.usage.refused(req, r.Level.String()+"_"+r.Dimension.String())
}
