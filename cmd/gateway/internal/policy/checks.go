package policy

import (
	"slices"

	gatewayv1 "github.com/sluicehq/sluice/api/gateway/v1"
	"github.com/sluicehq/sluice/cmd/gateway/internal/ratelimit"
)

// Cost is what a call costs: estimated before it, or its actual cost when it is settled.
type Cost struct {
	Tokens       int64
	MicroDollars int64
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
// the call's in-flight slot.
func Checks(dst []ratelimit.Check, c *Caller, r *Route, ep gatewayv1.Endpoint, cost Cost, share Share, lease string) ([]ratelimit.Check, Queueing) {
	levels := [...][]rule{c.limits, c.Tenant.limits, c.Tenant.endpoints[ep], r.Provider.limits}
	most := 1 + len(r.Provider.scopes) // the marks
	for _, rules := range levels {
		most += len(rules)
	}
	dst = slices.Grow(dst, most) // room for all at once: one allocation at most
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
			dst = append(dst, ratelimit.Check{Limit: l, Cost: charge(l.Dimension, cost), Lease: lease})
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

// charge is what cost takes from a limit of dimension d: one request, its tokens, its dollars
// or one call in flight.
func charge(d ratelimit.Dimension, cost Cost) int64 {
	switch d {
	case ratelimit.Tokens:
		return cost.Tokens
	case ratelimit.MicroDollars:
		return cost.MicroDollars
	default:
		return 1
	}
}

// Settlement appends to dst what settles a call that passed checks, each of which took its Cost,
// at the call's actual cost: every token and dollar limit is charged the difference between
// actual and what it took. Its provider's own token limits keep at least providerHeld: what the
// provider counted when it admitted the call, which it holds for its minute whatever the call
// used (zero for a provider that counts usage alone).
func Settlement(dst []ratelimit.Check, checks []ratelimit.Check, actual Cost, providerHeld int64) []ratelimit.Check {
	for _, c := range checks {
		if c.Limit.Dimension != ratelimit.Tokens && c.Limit.Dimension != ratelimit.MicroDollars {
			continue
		}
		want := charge(c.Limit.Dimension, actual)
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
