package admission

import (
	"cmp"
	"time"

	gatewayv1 "github.com/sluicehq/sluice/api/gateway/v1"
	"github.com/sluicehq/sluice/cmd/gateway/internal/estimate"
	"github.com/sluicehq/sluice/cmd/gateway/internal/fairqueue"
	"github.com/sluicehq/sluice/cmd/gateway/internal/jobs"
	"github.com/sluicehq/sluice/cmd/gateway/internal/policy"
	"github.com/sluicehq/sluice/cmd/gateway/internal/ratelimit"
)

// Request is what a call asks of the limits: who calls, where to, and what it is estimated to
// cost. Admit does not change it.
type Request struct {
	Caller   *policy.Caller
	Route    *policy.Route
	Endpoint gatewayv1.Endpoint
	// Cost is the call's estimate: its prompt and expected completion tokens and their price.
	Cost policy.Cost
	// ServiceTier is the service tier the call asked for: what it is charged at when its
	// answer names none (see costOf).
	ServiceTier string
	// ProviderTokens is what the call's provider counts against its own tokens per minute when
	// it admits the call, and holds for its minute whatever the call uses: for a provider that
	// counts characters and max_tokens, more than the encoding's count for text the encoding
	// packs densely, less for text it does not. Zero for a provider that counts usage alone.
	ProviderTokens int64
	// Pool is every provider of the call's model it may go to, in the configuration's order, each
	// with what the call costs there: Admit sends it to one, and the Ticket's call has that
	// provider's Route, Cost and ProviderTokens. Empty means Route alone.
	Pool []Choice
	// Job is the job attempt the call is; zero for a live call. A job waits in the Batch class,
	// passes no door, waits as long as the global and provider limits take (its own limits it
	// does not wait on), and is charged once however often it is delivered.
	Job jobs.Attempt
	// Held is what an earlier attempt of the job took from the limits and never settled, because
	// its gateway stopped. Admit gives it back first.
	Held jobs.Cost
	// RequestWhenRun says that the job took no request from its caller's own limits when it was
	// made (a batch's line, whose batch was made at once with all its lines): it takes it when it
	// runs, as a live call does.
	RequestWhenRun bool
}

// Choice is a provider a call may go to, and what the call costs there: its prices and how it
// counts tokens may differ from another's.
type Choice struct {
	Route          *policy.Route
	Cost           policy.Cost
	ProviderTokens int64
}

// choices are the providers the request may go to: its Pool, or its Route alone.
func (r *Request) choices() []Choice {
	if len(r.Pool) > 0 {
		return r.Pool
	}
	return []Choice{r.choice()}
}

// choice is the request's Route, with what the call costs there.
func (r *Request) choice() Choice {
	return Choice{Route: r.Route, Cost: r.Cost, ProviderTokens: r.ProviderTokens}
}

// at is the request sent to choice c.
func (r Request) at(c Choice) Request {
	r.Route, r.Cost, r.ProviderTokens = c.Route, c.Cost, c.ProviderTokens
	return r
}

func (r *Request) isJob() bool { return r.Job.Job != "" }

// providerCost is what the request takes from its provider's tokens (see Choice.providerCost).
// The queue drains in it.
func (r *Request) providerCost() int64 { return r.choice().providerCost() }

// takes is what the request takes of each kind of its provider's token limits (see
// Choice.takes).
func (r *Request) takes() byKind { return r.choice().takes() }

// providerCost is what a call takes from the provider's tokens: what the provider counts at
// admission, or the estimate as the provider counts it (see policy.Provider.Counted) for a
// provider that counts usage alone.
func (c Choice) providerCost() int64 {
	if c.ProviderTokens > 0 {
		return c.ProviderTokens
	}
	return c.Route.Provider.Counted(c.Cost).Tokens
}

// takes is what a call takes of each kind of the provider's token limits: its providerCost, and
// its input and output tokens as the provider counts them.
func (c Choice) takes() byKind {
	counted := c.Route.Provider.Counted(c.Cost)
	return byKind{allTokens: c.providerCost(), inputTokens: counted.InputTokens, outputTokens: counted.OutputTokens}
}

// served is what the request's provider counted of each kind of tokens of a call it served at
// actual: the more of what it took at admission and of its usage.
func (r *Request) served(actual policy.Cost) byKind {
	taken, used := r.takes(), r.Route.Provider.Counted(actual)
	return byKind{max(taken[allTokens], used.Tokens), max(taken[inputTokens], used.InputTokens), max(taken[outputTokens], used.OutputTokens)}
}

// checks appends to dst every check the request must pass (see policy.Checks), its provider's
// own limits on all tokens charged providerCost, and each of its provider's token limits all it
// holds when that is a learned limit the call passes (see policy.Provider.TokensTaken). Settling
// keeps ProviderTokens on them when the usage is less (see policy.Settlement), and charges what
// the call took beyond them.
//
// A job's attempt takes no request from its caller's own limits: the job took it when it was
// created (see Gate.ChargeJob). It is still checked against them, as a call of no requests. A
// batch's line, which took none when made, takes it when it runs (RequestWhenRun).
func (r *Request) checks(dst []ratelimit.Check, share policy.Share, lease string) ([]ratelimit.Check, policy.Queueing) {
	start := len(dst)
	dst, queueing := policy.Checks(dst, r.Caller, r.Route, r.Endpoint, r.Cost, share, lease)
	for i := start; i < len(dst); i++ {
		switch c := &dst[i]; {
		case r.isJob() && !r.RequestWhenRun && isCallersRequests(c):
			c.Cost = 0
		case c.Limit.Level == ratelimit.LevelProvider && c.Limit.Dimension == ratelimit.Tokens:
			c.Cost = r.Route.Provider.TokensTaken(c.Limit, r.providerCost())
		case c.Limit.Level == ratelimit.LevelProvider && c.Limit.Dimension.CountsTokens():
			c.Cost = r.Route.Provider.TokensTaken(c.Limit, c.Cost)
		}
	}
	return dst, queueing
}

// isCallersRequests reports whether c is on the requests of a caller's own limits: its user's,
// its tenant's or its endpoint's.
func isCallersRequests(c *ratelimit.Check) bool {
	return c.Limit.Dimension == ratelimit.Requests && c.Limit.Level < ratelimit.LevelGlobal
}

// costOf is what a call that used u costs: its tokens, and what they are billed at its route's
// prices, at the service tier its answer names, else the one it asked for.
func (r *Request) costOf(u estimate.Usage) policy.Cost {
	return policy.Cost{
		Tokens: u.Tokens(), InputTokens: u.PromptTokens, OutputTokens: u.CompletionTokens, CachedInputTokens: u.CachedPromptTokens,
		MicroDollars: r.Route.Prices.CostMicros(cmp.Or(u.ServiceTier, r.ServiceTier), billed(u)),
	}
}

// billed is u by the classes of token a provider bills.
func billed(u estimate.Usage) gatewayv1.Tokens {
	return gatewayv1.Tokens{Prompt: u.PromptTokens, CachedPrompt: u.CachedPromptTokens, CacheWrite: u.CacheWriteTokens,
		AudioPrompt: u.AudioPromptTokens, Completion: u.CompletionTokens, Reasoning: u.ReasoningTokens, AudioCompletion: u.AudioCompletionTokens}
}

func (r *Request) tenant() string { return r.Caller.Tenant.Name }

func (r *Request) provider() string { return r.Route.Provider.Name }

// class is the request's priority class: its tenant's, or Batch for a job.
func (r *Request) class() fairqueue.Class {
	if r.isJob() || r.Caller.Tenant.Config.Priority == gatewayv1.PriorityBatch {
		return fairqueue.Batch
	}
	return fairqueue.Interactive
}

// queuesAt reports whether the request may wait in the queue when a limit at level refuses it.
// A job's attempt does not wait on its own limits (its user's, tenant's or endpoint's): it is
// refused at once, and its job goes back to the jobs' queue, so that it holds no worker while
// other tenants' jobs could run.
func (r *Request) queuesAt(level ratelimit.Level) bool {
	return !r.isJob() || level >= ratelimit.LevelGlobal
}

// waitsOut reports whether the request may wait out refusal in the queue: any refusal, but by a
// calendar window (a provider's day) only when it resets within the request's maxWait. A job,
// which has no maxWait, waits for none.
func (r *Request) waitsOut(refusal *Refusal) bool {
	return !refusal.Spent || (r.maxWait() > 0 && refusal.RetryAfter <= r.maxWait())
}

// maxWait is how long the request may wait in the queue; zero for a job, which has no bound.
func (r *Request) maxWait() time.Duration {
	if r.isJob() {
		return 0
	}
	return r.Caller.Tenant.Config.MaxWait.Duration
}
