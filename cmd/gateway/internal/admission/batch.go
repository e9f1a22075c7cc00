package admission

import (
	"context"
	"slices"
	"time"

	"github.com/sluicehq/sluice/cmd/gateway/internal/estimate"
	"github.com/sluicehq/sluice/cmd/gateway/internal/policy"
	"github.com/sluicehq/sluice/cmd/gateway/internal/ratelimit"
)

// A batch that runs on its provider's batch service is one charge of all its lines, held for as
// long as the provider runs it: HoldBatch takes the batch's estimate from its caller's own
// calendar windows (its day and month quotas, its budget) when the batch is made, and
// SettleBatch corrects the hold to what the provider's results say it used. A batch's lines pass
// no limit a minute and no limit of the provider's own, whose batch service limits them apart;
// each line takes a request from its caller's day and month quotas of requests.

// BatchPrice is what a provider's batch service charges for what its live calls charge
// microDollars: half, rounded up.
func BatchPrice(microDollars int64) int64 { return microDollars - microDollars/2 }

// HoldBatch takes req's cost, a batch of lines calls' estimate at the provider's batch prices,
// from its caller's own calendar windows, or refuses it. It returns when the store took it, which
// the batch's settlement names.
func (g *Gate) HoldBatch(ctx context.Context, req Request, lines int64) (time.Time, *Refusal) {
	var buf [ratelimit.MaxChecks]ratelimit.Check
	checks := callersWindows(buf[:0], req, lines)
	var d ratelimit.Decision
	err := g.seeded(ctx, &req, checks, &d, func() error { return g.opts.Limiter.Decide(ctx, checks, g.now(), &d) })
	switch {
	case err != nil:
		g.log.Error("limiter store failed; refusing a batch", "err", err)
		return time.Time{}, &Refusal{Reason: Unavailable, RetryAfter: time.Second}
	case d.Allowed:
		return d.At, nil
	}
	r := limitedBy(checks, &d, limitsOf(checks, &d, ""))
	g.refused(&req, r)
	return time.Time{}, r
}

// SettleBatch corrects the hold HoldBatch took for req at took to what the batch used, u, priced
// at the provider's batch prices, once under id however often it is sent. It returns what the
// batch was charged.
func (g *Gate) SettleBatch(ctx context.Context, req Request, lines int64, took time.Time, u estimate.Usage, id string) (policy.Cost, error) {
	var buf, settle [ratelimit.MaxChecks]ratelimit.Check
	checks := callersWindows(buf[:0], req, lines)
	actual := req.costOf(u)
	actual.MicroDollars = BatchPrice(actual.MicroDollars)
	settlement := policy.Settlement(settle[:0], checks, req.Route.Provider, actual, 0)
	for i := range settlement {
		settlement[i].Took = took
	}
	if err := g.opts.Limiter.Settle(ctx, id, settlement, g.now()); err != nil {
		g.metrics.storeErrors.WithLabelValues("settle").Inc()
		return policy.Cost{}, err
	}
	tenant, provider := req.tenant(), req.provider()
	g.metrics.spend.WithLabelValues(tenant, provider).Add(float64(actual.MicroDollars))
	g.metrics.countBilled(tenant, provider, billed(u))
	return actual, nil
}

// callersWindows appends to dst the checks of req on its caller's own calendar windows, with the
// mark of its tenant's, each request window taking the batch's lines.
func callersWindows(dst []ratelimit.Check, req Request, lines int64) []ratelimit.Check {
	all, _ := req.checks(dst, policy.Shared, "")
	all = slices.DeleteFunc(all, func(c ratelimit.Check) bool {
		return c.Limit.Level >= ratelimit.LevelGlobal || !(c.Limit.IsWindow() || isTenantsMark(&c))
	})
	for i := range all {
		if all[i].Limit.Dimension == ratelimit.Requests {
			all[i].Cost = lines
		}
	}
	return all
}
