package admission

import (
	"context"
	"fmt"
	"log/slog"
	"slices"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"golang.org/x/sync/singleflight"

	gatewayv1 "github.com/sluicehq/sluice/api/gateway/v1"

	"github.com/sluicehq/sluice/cmd/gateway/internal/estimate"
	"github.com/sluicehq/sluice/cmd/gateway/internal/fairqueue"
	"github.com/sluicehq/sluice/cmd/gateway/internal/fairshare"
	"github.com/sluicehq/sluice/cmd/gateway/internal/ids"
	"github.com/sluicehq/sluice/cmd/gateway/internal/jobs"
	"github.com/sluicehq/sluice/cmd/gateway/internal/policy"
	"github.com/sluicehq/sluice/cmd/gateway/internal/ratelimit"
)

// Limiter keeps the limits' state: ratelimit.Memory or ratelimit.Redis.
type Limiter interface {
	// Decide takes a decision on checks, written into d.
	Decide(ctx context.Context, checks []ratelimit.Check, now time.Time, d *ratelimit.Decision) error
	// Peek reads what each check's limit holds, and how long a decision of its cost would wait,
	// taking nothing; many limits in one round trip.
	Peek(ctx context.Context, checks []ratelimit.Check, now time.Time) ([]ratelimit.Reading, error)
	// Settle applies a settlement once per id: sent again with the same id, it does nothing.
	Settle(ctx context.Context, id string, checks []ratelimit.Check, now time.Time) error
	// Renew keeps the held leases of checks' in-flight limits for another lease time from now.
	Renew(ctx context.Context, checks []ratelimit.Check, now time.Time) error
	// Reseed brings a scope's calendar windows up to the record, and its mark to the record's
	// version, unless the mark holds it already (see ratelimit.NewMark).
	Reseed(ctx context.Context, mark *ratelimit.Limit, version int64, seeds []ratelimit.Seed, now time.Time) (bool, error)
	// Snapshot reads a scope's windows and mark for the record.
	Snapshot(ctx context.Context, mark *ratelimit.Limit, version int64, windows []*ratelimit.Limit, now time.Time) (ratelimit.ScopeState, error)
}

// JobLedger records what a job's attempts hold and whether the job was charged: jobs.Memory or
// jobs.Redis.
type JobLedger interface {
	Hold(ctx context.Context, a jobs.Attempt, held jobs.Cost) error
	Charge(ctx context.Context, a jobs.Attempt) (bool, error)
	// NewEpoch makes the jobs a store lost read as lost, once the limiter found the store (the
	// same Redis) behind its durable record.
	NewEpoch(ctx context.Context) error
}

// Shares is the ledger the gateways sharing a provider keep of what each of its queue's lanes
// was served: redisstore.Shares.
type Shares interface {
	// Exchange reports ups and what waits here, mine, whose word holds for ttl, and answers the
	// count of every lane waiting on some gateway and what waits on each other gateway.
	Exchange(ctx context.Context, provider string, ups []fairshare.Update, mine fairqueue.Backlog, ttl time.Duration) (fairshare.Standing, []fairqueue.Backlog, error)
}

// Options configures a Gate.
type Options struct {
	// Limiter keeps the limits. Required.
	Limiter Limiter
	// Fallback, when set, takes decisions on each limit's local share whenever Limiter fails
	// (Redis unreachable, failMode: open). Nil refuses with Unavailable instead (failMode: closed).
	Fallback Limiter
	// Jobs records jobs' attempts. Required to admit a Request with a Job.
	Jobs JobLedger
	// Shares, when set, keeps each provider's queue fair across the gateways that share the
	// provider. Nil means this gateway serves its queues alone.
	Shares Shares
	// Policy returns the configuration in force. Required.
	Policy func() *policy.Policy
	// Registerer receives the gate's metrics. Nil means they are not exported.
	Registerer prometheus.Registerer
	// Logger receives what goes wrong with the stores. Nil means slog.Default().
	Logger *slog.Logger
	// Now returns the time. Nil means time.Now.
	Now func() time.Time
}

// Gate admits calls. The zero value is not usable; call New. It is safe for concurrent use.
type Gate struct {
	opts    Options
	log     *slog.Logger
	now     func() time.Time
	metrics *metrics
	usage   *usage

	ctx         context.Context // ends with Close, stopping the dispatchers
	cancel      context.CancelFunc
	dispatchers sync.Map           // provider name -> *dispatcher
	leases      *ids.Sequence      // names calls' in-flight slots
	renewals    renewals           // the running calls' slots in flight
	reseeds     singleflight.Group // by scope: one re-seed at a time
}

// New returns a gate. Call Close to stop its dispatchers.
func New(opts Options) *Gate {
	if opts.Registerer == nil {
		opts.Registerer = prometheus.NewRegistry()
	}
	g := &Gate{opts: opts, log: opts.Logger, now: opts.Now, metrics: newMetrics(opts.Registerer), usage: newUsage(), leases: ids.New("")}
	if g.log == nil {
		g.log = slog.Default()
	}
	if g.now == nil {
		g.now = time.Now
	}
	opts.Registerer.MustRegister(providerUse{g})
	g.ctx, g.cancel = context.WithCancel(context.Background())
	return g
}

// Close stops the queues' dispatchers. Calls still waiting are not dispatched.
func (g *Gate) Close() { g.cancel() }

// Admit lets a call go when every limit allows it and nobody waits before it in its provider's
// queue. Otherwise a refusal by a limit that queues puts it in the queue, behind the door, until
// every limit allows it; any other refusal is answered at once. On a Ticket, every limit has
// been charged the estimate; on a Refusal, nothing has.
//
// A call whose model several providers serve (its Pool) goes to the one that can take it now,
// the least loaded first, or else waits at the one whose door promises the shortest wait (see
// pool.go). A provider whose breaker is open is left out; a call waiting for one when its breaker
// opens is admitted again among the others, and waits there, past no door, what is left of its
// maxWait.
func (g *Gate) Admit(ctx context.Context, req Request) (*Ticket, *Refusal) {
	if req.isJob() {
		g.giveBack(ctx, req)
	}
	var since time.Time // when a call moved off a provider whose breaker opened first queued
	for {
		live, down := g.serving(req.choices())
		if down != nil {
			return nil, down
		}
		v := g.admitTo(ctx, req, live, since)
		if !v.moved {
			return v.ticket, v.refusal
		}
		since = v.since
	}
}

// TooLarge refuses a request that costs more than one of its limits can ever hold, or returns
// nil. Such a call never waits: no wait makes it fit.
func (g *Gate) TooLarge(req Request) *Refusal {
	var buf [ratelimit.MaxChecks]ratelimit.Check
	checks, _ := req.checks(buf[:0], policy.Shared, "")
	r := tooLarge(checks)
	if r != nil {
		g.refused(&req, r)
	}
	return r
}

// tooLarge is the refusal of a call whose checks cost one of their limits more than it ever
// holds, or nil.
func tooLarge(checks []ratelimit.Check) *Refusal {
	for _, c := range checks {
		if c.Cost > c.Limit.Largest() {
			return tooLargeFor(c)
		}
	}
	return nil
}

// tooLargeFor is the refusal of a call that costs check c's limit more than it ever lets one call
// take: its Capacity is that most, counted as the limit states it when the two agree.
func tooLargeFor(c ratelimit.Check) *Refusal {
	r := &Refusal{Reason: TooLarge, Level: c.Limit.Level, Dimension: c.Limit.Dimension,
		Capacity: c.Limit.Largest(), Remaining: -1, Requested: c.Cost}
	if stated, per := c.Limit.Stated(); stated == r.Capacity {
		r.Per = per
	}
	return r
}

// Spent returns the refusal of req by one of its caller's own limits that answers 429 at its
// limit and has nothing left now, or nil. Such a limit refuses the call whatever its size: Spent
// reads the store and takes nothing, so that a call it refuses costs no count of its tokens. A
// store that cannot be read leaves the call to its decision.
func (g *Gate) Spent(ctx context.Context, req Request) *Refusal {
	limits := policy.Rejecting(nil, req.Caller, req.Endpoint)
	if len(limits) == 0 {
		return nil
	}
	readings, err := g.opts.Limiter.Peek(ctx, ratelimit.Reads(limits...), g.now())
	if err != nil {
		return nil
	}
	for i, r := range readings {
		if r.Remaining > 0 {
			continue
		}
		refusal := limitedOn(limits[i])
		refusal.Remaining, refusal.Requested, refusal.RetryAfter = r.Remaining, 1, r.Reset
		g.refused(&req, refusal)
		return refusal
	}
	return nil
}

// answer counts a refusal by a limit, telling a caller that calls in flight refused when to come
// back (inFlightRetry), and hands a job's ticket to its attempt, recording what it holds; a live
// call's ticket is its caller's as it is.
func (g *Gate) answer(ctx context.Context, req *Request, v verdict) verdict {
	if r := v.refusal; r != nil && (r.Reason == Limited || r.Reason == TooLarge) {
		g.refused(req, r)
		if r.Reason == Limited && r.Dimension == ratelimit.InFlight {
			r.RetryAfter = max(r.RetryAfter, inFlightRetry)
		}
	}
	t := v.ticket
	if t == nil || !req.isJob() {
		return v
	}
	if jobs.Superseded(g.holdJob(ctx, t.req.Job, heldOf(t.req.Cost))) {
		t.Withdraw() // nothing went out: all is given back
		return verdict{refusal: &Refusal{Reason: Superseded}}
	}
	return v
}

// heldOf is what an estimate of cost c holds of the limits, as a job's record keeps it.
func heldOf(c policy.Cost) jobs.Cost {
	return jobs.Cost{Tokens: c.Tokens, InputTokens: c.InputTokens, OutputTokens: c.OutputTokens, MicroDollars: c.MicroDollars}
}

// ChargeJob takes the request a new job costs from its caller's own request limits (its user's,
// its tenant's and its endpoint's), as a live call would take it; the job's attempts take no
// other. A job cancelled before it runs keeps it charged, so that creating and cancelling jobs
// is bounded by the caller's limits. It returns the refusal of a limit with no request left, or
// of a store that cannot decide.
func (g *Gate) ChargeJob(ctx context.Context, req Request) *Refusal {
	var buf [ratelimit.MaxChecks]ratelimit.Check
	checks := callersRequests(buf[:0], req)
	if len(checks) == 0 {
		return nil
	}
	var d ratelimit.Decision
	err := g.seeded(ctx, &req, checks, &d, func() error { return g.opts.Limiter.Decide(ctx, checks, g.now(), &d) })
	switch {
	case err != nil:
		g.log.Error("limiter store failed; refusing a new job", "err", err)
		return &Refusal{Reason: Unavailable, RetryAfter: time.Second}
	case d.Allowed:
		return nil
	}
	r := limitedBy(checks, &d, limitsOf(checks, &d, ""))
	g.refused(&req, r)
	return r
}

// RefundJob gives back the request ChargeJob took for a job that its store then refused; id, the
// job's, makes it once.
func (g *Gate) RefundJob(ctx context.Context, req Request, id string) {
	var buf, refund [ratelimit.MaxChecks]ratelimit.Check
	back := policy.Unserved(refund[:0], callersRequests(buf[:0], req), false)
	if err := g.opts.Limiter.Settle(ctx, "job-refused:"+id, back, g.now()); err != nil {
		g.log.Error("give back the request of a job its store refused", "job", id, "err", err)
	}
}

// callersRequests appends to dst the checks of req on its caller's own request limits, each
// taking one request.
func callersRequests(dst []ratelimit.Check, req Request) []ratelimit.Check {
	all, _ := req.checks(dst, policy.Shared, "")
	return slices.DeleteFunc(all, func(c ratelimit.Check) bool { return !isCallersRequests(&c) && !isTenantsMark(&c) })
}

// isTenantsMark reports whether c is on the mark of the tenant's calendar windows, which its
// user's, its own and its endpoint's day and month quotas are trusted beside.
func isTenantsMark(c *ratelimit.Check) bool {
	return c.Limit.IsMark() && c.Limit.Level == ratelimit.LevelTenant
}

// giveBack returns what an earlier attempt of a job took from the limits and never settled,
// because its gateway stopped: a job is charged once.
func (g *Gate) giveBack(ctx context.Context, req Request) {
	if req.Held == (jobs.Cost{}) {
		return
	}
	// Cleared first, which only the job's running attempt can do, so that of two gateways that
	// took the job only one gives back. A give-back that then fails leaves the estimate taken:
	// the limits err on the safe side.
	if g.holdJob(ctx, req.Job, jobs.Cost{}) != nil {
		return
	}
	var taken, refund [ratelimit.MaxChecks]ratelimit.Check
	earlier := req // the same call: its provider counted it as this one
	earlier.Cost = policy.Cost{Tokens: req.Held.Tokens, InputTokens: req.Held.InputTokens, OutputTokens: req.Held.OutputTokens, MicroDollars: req.Held.MicroDollars}
	checks, _ := earlier.checks(taken[:0], policy.Shared, "")
	back := policy.Settlement(refund[:0], checks, req.Route.Provider, policy.Cost{}, 0)
	if err := g.opts.Limiter.Settle(ctx, fmt.Sprintf("give-back:%s:%d", req.Job.Job, req.Job.N), back, g.now()); err != nil {
		g.log.Error("give back what an earlier attempt of a job held", "job", req.Job.Job, "err", err)
	}
}

// SettleElsewhere settles, at usage u, a call that a gateway (this one or another, perhaps gone)
// admitted as req under lease, the store having taken the decision at took: the same settlement
// the call's Ticket.Settle makes, slots in flight freed, sent under the same lease, so that of
// the two only the first lands. It returns what the call was charged, or the store's error.
func (g *Gate) SettleElsewhere(ctx context.Context, req Request, lease string, took time.Time, u estimate.Usage) (policy.Cost, error) {
	var taken, settle [ratelimit.MaxChecks]ratelimit.Check
	checks, _ := req.checks(taken[:0], policy.Shared, lease)
	actual := req.costOf(u)
	settlement := policy.Release(policy.Settlement(settle[:0], checks, req.Route.Provider, actual, req.ProviderTokens), checks)
	for i := range settlement {
		settlement[i].Took = took
	}
	if err := g.opts.Limiter.Settle(ctx, lease, settlement, g.now()); err != nil {
		g.metrics.storeErrors.WithLabelValues("settle").Inc()
		return policy.Cost{}, err
	}
	tenant, provider := req.tenant(), req.provider()
	g.metrics.tokens.WithLabelValues(tenant, provider, "estimated").Add(float64(req.Cost.Tokens))
	g.metrics.tokens.WithLabelValues(tenant, provider, "actual").Add(float64(actual.Tokens))
	g.metrics.spend.WithLabelValues(tenant, provider).Add(float64(actual.MicroDollars))
	g.metrics.countBilled(tenant, provider, billed(u))
	return actual, nil
}

// BudgetBelow reports whether the tenant's budget, spent by calls to every provider it uses, has
// less than percent left. A peek reads it without taking anything; a store that cannot answer
// reports false, leaving the call as it is.
func (g *Gate) BudgetBelow(ctx context.Context, t *policy.Tenant, percent int32) bool {
	b := t.Budget()
	if b == nil {
		return false
	}
	r, err := g.opts.Limiter.Peek(ctx, ratelimit.Reads(b), g.now())
	return err == nil && r[0].Remaining*100 < int64(percent)*b.Capacity()
}

// Throttled takes in a provider's 429 or 503 and the retry-after it named (zero for none): our
// model of its limits is wrong. Its queue pauses and this replica's share of its in-flight cap
// is halved.
func (g *Gate) Throttled(provider string, retryAfter time.Duration) {
	g.usage.throttled(provider)
	g.dispatcher(provider).health.throttled(retryAfter)
}

// Reported takes in the limits a provider's answer reported, and reports whether the limits
// learned from the provider (those lower than configured) changed: the caller then compiles
// the configuration anew with Learned (see policy.CompileLearned), so that the provider's
// rolling windows hold to them. An answer that says a limit has nothing left pauses the provider's
// queue until it resets.
func (g *Gate) Reported(provider string, r Reported) bool {
	return g.dispatcher(provider).health.reported(r)
}

// Learned returns the limits learned from the providers that reported some lower than
// configured, by provider name.
func (g *Gate) Learned() map[string]gatewayv1.LearnedLimits {
	out := map[string]gatewayv1.LearnedLimits{}
	g.dispatchers.Range(func(name, d any) bool {
		if l := d.(*dispatcher).health.feedbackNow().learned; !l.IsZero() {
			out[name.(string)] = l
		}
		return true
	})
	return out
}

func (g *Gate) policy() *policy.Policy { return g.opts.Policy() }

// tenantWeight is a tenant's weight in the configuration in force; 1 for one it does not name.
func (g *Gate) tenantWeight(name string) int32 {
	if t := g.policy().Tenant(name); t != nil {
		return t.Config.Weight
	}
	return 1
}
