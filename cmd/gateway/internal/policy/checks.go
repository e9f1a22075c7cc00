package policy

import (
	"math"
	"slices"

	gatewayv1 "github.com/sluicehq/sluice/api/gateway/v1"
	"github.com/sluicehq/sluice/cmd/gateway/internal/ratelimit"
)

// Cost is what a call costs: estimated before it, or its actual cost when it is settled.
type Cost struct {
	// Tokens are its input and output tokens together.
	Tokens int64
	// InputTokens are its prompt's tokens, and OutputTokens its completion's: the completion's cap
	// in an estimate.
	InputTokens, OutputTokens int64
	// CachedInputTokens are the input tokens it read from the provider's cache, of InputTokens:
	// known from its usage only, zero in an estimate.
	CachedInputTokens int64
	MicroDollars      int64
}

// Counted is cost c as p's own limits count it: its input without what it read from the cache
// when p leaves cache reads out (see gatewayv1.Provider.CountsCachedInput), its output
// outputTokenWeight times, and its tokens the two together. Plan and global limits count a call
// as its Cost says.
func (p *Provider) Counted(c Cost) Cost {
	var cached int64
	if !p.Config.CountsCachedInput() {
		cached = min(max(c.CachedInputTokens, 0), c.InputTokens)
	}
	extra := mulSat(c.OutputTokens, p.Config.OutputWeight()-1)
	if cached <= 0 && extra == 0 {
		return c
	}
	c.InputTokens -= cached
	c.Tokens = addSat(c.Tokens-cached, extra)
	c.OutputTokens = addSat(c.OutputTokens, extra)
	return c
}

// addSat adds two counts, stopping at math.MaxInt64.
func addSat(a, b int64) int64 {
	if b > 0 && a > math.MaxInt64-b {
		return math.MaxInt64
	}
	return a + b
}

// mulSat multiplies two counts of zero or more, stopping at math.MaxInt64.
func mulSat(a, b int64) int64 {
	if a > 0 && b > math.MaxInt64/a {
		return math.MaxInt64
	}
	return a * b
}

// Queueing says, bit i for check i of a call, whether a refusal by that check waits in the queue
// (onLimit: Queue) rather than being answered 429 at once.
type Queueing uint32

// Queues reports whether a refusal by check i waits in the queue.
func (q Queueing) Queues(i int) bool { return i >= 0 && q&(1<<i) != 0 }

// Share says which form of each limit a decision takes.
type Share uint8

// The shares.
const (
	// Shared is the whole limit, kept in the configured store for every replica.
	Shared Share = iota
	// Local is this replica's share of it, used only when Redis is unreachable and the store
	// fails open.
	Local
)

// Checks appends to dst every check a call must pass: the caller's user limits, the tenant's
// limits and budget, the endpoint's limits (each a total over the tenant's providers), then the
// global limits and the route's provider's own, at the given share of each limit; and, on the
// shared store, the mark of each scope with calendar windows among them (see Scope). lease names
// the call's in-flight slot. The provider's own limits take cost as it counts it (see Counted).
func Checks(dst []ratelimit.Check, c *Caller, r *Route, ep gatewayv1.Endpoint, cost Cost, share Share, lease string) ([]ratelimit.Check, Queueing) {
	levels := [...][]rule{c.limits, c.Tenant.limits, c.Tenant.endpoints[ep], r.Provider.limits}
	most := 1 + len(r.Provider.scopes) // the marks
	for _, rules := range levels {
		most += len(rules)
	}
	dst = slices.Grow(dst, most) // room for all at once: one allocation at most
	counted := r.Provider.Counted(cost)
	var queueing Queueing
	for _, rules := range levels {
		for _, rl := range rules {
			l := rl.shared
			if share == Local {
				l = rl.local
			}
			if rl.queue {
				queueing |= 1 << len(dst)
			}
			dst = append(dst, ratelimit.Check{Limit: l, Cost: charge(l, cost, counted), Lease: lease})
		}
	}
	if share == Shared {
		dst = c.Tenant.scope.appendMark(dst)
		for _, s := range r.Provider.scopes {
			dst = s.appendMark(dst)
		}
	}
	return dst, queueing
}

// charge is what a call takes from limit l: one request, its tokens (all, its input's or its
// output's), its dollars or one call in flight; its cost as its Cost says on a plan's or the
// global limits, as counted on its provider's own.
func charge(l *ratelimit.Limit, cost, counted Cost) int64 {
	if l.Level == ratelimit.LevelProvider {
		cost = counted
	}
	switch l.Dimension {
	case ratelimit.Tokens:
		return cost.Tokens
	case ratelimit.InputTokens:
		return cost.InputTokens
	case ratelimit.OutputTokens:
		return cost.OutputTokens
	case ratelimit.MicroDollars:
		return cost.MicroDollars
	default:
		return 1
	}
}

// Settlement appends to dst what settles a call to provider p that passed checks, each of which
// took its Cost, at the call's actual cost: every token and dollar limit is charged the
// difference between actual (as p counts it, on p's own limits) and what it took. p's own limits
// on all tokens keep at least providerHeld: what p counted when it admitted the call, which it
// holds for its minute whatever the call used (zero for a provider that counts usage alone).
func Settlement(dst []ratelimit.Check, checks []ratelimit.Check, p *Provider, actual Cost, providerHeld int64) []ratelimit.Check {
	counted := p.Counted(actual)
	for _, c := range checks {
		if !c.Limit.Dimension.CountsTokens() && c.Limit.Dimension != ratelimit.MicroDollars {
			continue
		}
		want := charge(c.Limit, actual, counted)
		if c.Limit.Level == ratelimit.LevelProvider && c.Limit.Dimension == ratelimit.Tokens {
			want = max(want, providerHeld)
		}
		if d := want - c.Cost; d != 0 {
			dst = append(dst, ratelimit.Check{Limit: c.Limit, Cost: d})
		}
	}
	return dst
}

// Unserved appends to dst what gives back the request a call its provider did not serve took
// on every limit, save its provider's own request limits when the call was sent: the provider
// may have counted it.
func Unserved(dst []ratelimit.Check, checks []ratelimit.Check, sent bool) []ratelimit.Check {
	for _, c := range checks {
		if c.Limit.Dimension == ratelimit.Requests && !(sent && c.Limit.Level == ratelimit.LevelProvider) {
			dst = append(dst, ratelimit.Check{Limit: c.Limit, Cost: -c.Cost})
		}
	}
	return dst
}

// Release appends to dst what gives back the in-flight slots of a call that passed checks and
// has ended.
func Release(dst []ratelimit.Check, checks []ratelimit.Check) []ratelimit.Check {
	for _, c := range checks {
		if c.Limit.Dimension == ratelimit.InFlight {
			dst = append(dst, ratelimit.Check{Limit: c.Limit, Cost: -1, Lease: c.Lease})
		}
	}
	return dst
}

// Rejecting appends to dst the shared limits of c's own (its user's, its tenant's and its
// endpoint's) that answer 429 at their limit rather than queue: once one has nothing left, it
// refuses every call, whatever its size.
func Rejecting(dst []*ratelimit.Limit, c *Caller, ep gatewayv1.Endpoint) []*ratelimit.Limit {
	for _, rules := range [...][]rule{c.limits, c.Tenant.limits, c.Tenant.endpoints[ep]} {
		for _, rl := range rules {
			if !rl.queue {
				dst = append(dst, rl.shared)
			}
		}
	}
	return dst
}
