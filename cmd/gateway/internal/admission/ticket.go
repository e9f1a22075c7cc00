package admission

import (
	"context"
	"errors"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	gatewayv1 "github.com/sluicehq/sluice/api/gateway/v1"
	"github.com/sluicehq/sluice/cmd/gateway/internal/estimate"
	"github.com/sluicehq/sluice/cmd/gateway/internal/jobs"
	"github.com/sluicehq/sluice/cmd/gateway/internal/policy"
	"github.com/sluicehq/sluice/cmd/gateway/internal/ratelimit"
)

// settleTimeout bounds each later try to settle a call (see settleLater), a renewal of its slots
// and the record of a job's charge; a call's first try is bounded by the limiter itself.
const settleTimeout = 5 * time.Second

// renewEvery is how often a running call's slots in flight are renewed: three times a lease.
const renewEvery = policy.LeaseTTL / 3

// The backoff between tries of a settlement the store failed, which go on for a lease: the
// settlement's id makes a try that had landed unseen do nothing.
const (
	firstSettleRetry = 500 * time.Millisecond
	lastSettleRetry  = 8 * time.Second
)

// Ticket is a call the limits let go. It holds the estimate on every limit it passed, and one
// slot in flight, until it ends: exactly once, in Settle, Refund or Withdraw. It is safe for
// concurrent use; a second end does nothing.
type Ticket struct {
	// Waited is how long the call queued before it was let go.
	Waited time.Duration
	// Estimated is the wait the door estimated when the call queued; zero for a call that did
	// not queue, or whose wait the door could not estimate.
	Estimated time.Duration
	// Limits are the caller's limits as the decision that let the call go left them.
	Limits Limits

	g        *Gate
	req      Request
	lease    string          // names the call's slot on in-flight limits
	limiter  Limiter         // the store that took the decision, which settles it too
	queueing policy.Queueing // which checks queue when they refuse
	checks   []ratelimit.Check
	decision ratelimit.Decision // the last decision on checks
	started  time.Time
	took     time.Time // when the store took the decision that let the call go, by its clock
	ended    atomic.Bool
	charged  policy.Cost // what the call was charged as it ended; set once, by end
}

// Route is where the call goes: of its pool, the provider the gate chose.
func (t *Ticket) Route() *policy.Route { return t.req.Route }

// Lease names the call's slots in flight and its settlement: a settlement under it lands once,
// whichever gateway sends it (see Gate.SettleElsewhere).
func (t *Ticket) Lease() string { return t.lease }

// Took is when the store took the decision that let the call go, by its clock.
func (t *Ticket) Took() time.Time { return t.took }

// Abandon ends the ticket here without a word to the store: another gateway has settled the
// call under its lease (see Gate.SettleElsewhere). It reports whether it ended the ticket.
func (t *Ticket) Abandon() bool {
	if !t.ended.CompareAndSwap(false, true) {
		return false
	}
	t.g.renewals.remove(t)
	return true
}

// Settle ends a call the provider served: its real usage is charged in place of the estimate on
// every limit the estimate was taken from (its provider's token limits keep what the provider
// counted at admission when that is more), and its slot in flight is freed. A job already
// charged by an earlier delivery is refunded instead. It reports whether it ended the ticket.
func (t *Ticket) Settle(u estimate.Usage) bool { return t.end(&u, true) }

// Refund ends a call that went to its provider and was not served (an error, no answer):
// everything it took is given back, save what its provider may have counted: the request on its
// provider's own request limits (see policy.Unserved), and its admission count on their tokens. A job's delivery that Settle does not charge, its job's earlier one having
// been, is given back the same way. It reports whether it ended the ticket.
func (t *Ticket) Refund() bool { return t.end(nil, true) }

// Withdraw ends a call that never went to its provider: everything it took is given back. It
// reports whether it ended the ticket.
func (t *Ticket) Withdraw() bool { return t.end(nil, false) }

// end settles the ticket at usage u, or refunds it when u is nil, once; sent says whether the
// call went to its provider.
func (t *Ticket) end(u *estimate.Usage, sent bool) bool {
	if !t.ended.CompareAndSwap(false, true) {
		return false
	}
	var actual policy.Cost
	var bill gatewayv1.Tokens
	charged := t.isCharged(u)
	if charged {
		actual, bill = t.req.costOf(*u), billed(*u)
	}
	t.charged = actual
	var held int64 // what the provider counted of a call it was sent, whoever is charged
	if sent {
		held = t.req.ProviderTokens
	}
	buf := settlements.Get().(*[ratelimit.MaxChecks]ratelimit.Check)
	defer settlements.Put(buf)
	settlement := policy.Release(policy.Settlement(buf[:0], t.checks, t.req.Route.Provider, actual, held), t.checks)
	if !charged {
		settlement = policy.Unserved(settlement, t.checks, sent)
	}
	for i := range settlement {
		settlement[i].Took = t.took
	}
	t.g.renewals.remove(t)
	// No deadline of its own: the limiter bounds its wait (the Redis pipeline's callerWait), and a
	// settlement is tried again on failure.
	if now := t.g.now(); t.limiter.Settle(context.Background(), t.lease, settlement, now) != nil {
		t.g.metrics.storeErrors.WithLabelValues("settle").Inc()
		go t.settleLater(slices.Clone(settlement), now)
	}
	t.g.ended(t, actual, bill, u != nil)
	return true
}

// settlements are the buffers calls' settlements are made in, reused rather than allocated at
// every call: a limiter keeps none of a settlement once Settle returns, and a settlement tried
// again later is a copy.
var settlements = sync.Pool{New: func() any { return new([ratelimit.MaxChecks]ratelimit.Check) }}

// settleLater tries again a settlement the store failed, with backoff, until it lands, a lease
// has passed (its slots in flight have freed themselves), or the gate closes.
func (t *Ticket) settleLater(settlement []ratelimit.Check, now time.Time) {
	give := time.NewTimer(policy.LeaseTTL)
	defer give.Stop()
	for wait := firstSettleRetry; ; wait = min(2*wait, lastSettleRetry) {
		select {
		case <-t.g.ctx.Done():
			return
		case <-give.C:
			t.g.log.Error("a call's settlement did not reach the store in time: its estimate stays charged",
				"tenant", t.req.tenant(), "provider", t.req.provider())
			return
		case <-time.After(wait):
		}
		ctx, cancel := context.WithTimeout(t.g.ctx, settleTimeout)
		err := t.limiter.Settle(ctx, t.lease, settlement, now)
		cancel()
		if err == nil {
			return
		}
		t.g.metrics.storeErrors.WithLabelValues("settle").Inc()
	}
}

// holdsSlots reports whether the call holds a slot in flight on one of its limits: only those
// have leases to renew while it runs.
func (t *Ticket) holdsSlots() bool {
	return slices.ContainsFunc(t.checks, func(c ratelimit.Check) bool { return c.Limit.Dimension == ratelimit.InFlight })
}

// renew keeps the call's slots in flight for another lease, unless the ticket has ended.
func (t *Ticket) renew() {
	if t.ended.Load() {
		return
	}
	ctx, cancel := context.WithTimeout(t.g.ctx, settleTimeout)
	defer cancel()
	if err := t.limiter.Renew(ctx, t.checks, t.g.now()); err != nil {
		t.g.metrics.storeErrors.WithLabelValues("renew").Inc()
	}
}

// Charged is what the call was charged as its ticket ended: its usage at its route's prices
// when it was settled, nothing when it was refunded or withdrawn. It is zero before the ticket
// ends; read it from the goroutine that ended it.
func (t *Ticket) Charged() policy.Cost { return t.charged }

// isCharged reports whether the call is charged as it ends: it was served (u is its usage), and
// it is not a job whose earlier delivery was charged.
func (t *Ticket) isCharged(u *estimate.Usage) bool {
	if t.req.isJob() {
		return t.g.chargeJob(t.req.Job, u != nil)
	}
	return u != nil
}

// chargeJob records a job attempt's end in the job store and reports whether it is to be
// charged: a served attempt is, if it is the job's first to be (a store that cannot answer, or
// that lost the job, charges it); an unserved one holds nothing any more.
func (g *Gate) chargeJob(a jobs.Attempt, served bool) bool {
	ctx, cancel := context.WithTimeout(context.Background(), settleTimeout)
	defer cancel()
	if !served {
		g.holdJob(ctx, a, jobs.Cost{})
		return false
	}
	first, err := g.opts.Jobs.Charge(ctx, a)
	switch {
	case errors.Is(err, jobs.ErrLost):
		return true // its worker reports the loss
	case err != nil:
		g.log.Error("mark a job charged", "job", a.Job, "err", err)
		return true
	}
	return first
}

// holdJob records what a job's attempt holds, and returns the store's error: one that says the
// job is no longer the attempt's (jobs.Superseded), or another, which it logs.
func (g *Gate) holdJob(ctx context.Context, a jobs.Attempt, held jobs.Cost) error {
	err := g.opts.Jobs.Hold(ctx, a, held)
	if err != nil && !jobs.Superseded(err) {
		g.log.Error("record what a job's attempt holds", "job", a.Job, "err", err)
	}
	return err
}
