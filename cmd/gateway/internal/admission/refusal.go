package admission

import (
	"time"

	"github.com/sluicehq/sluice/cmd/gateway/internal/ratelimit"
)

// Reason is why a call was refused.
type Reason uint8

// The reasons.
const (
	// Limited: a limit has not enough left. RetryAfter is when it would have.
	Limited Reason = iota + 1
	// TooLarge: the call costs more than a limit ever holds. Waiting will not help.
	TooLarge
	// Busy: the door turned the call away (or it waited its plan's maxWait), because its lane
	// would wait longer than its maxWait. Nothing was charged.
	Busy
	// Unavailable: the limits' store could not decide and the gateway fails closed, or fails
	// open but a calendar window covers the call.
	Unavailable
	// Failed: neither the store nor this replica's local limits could decide.
	Failed
	// Gone: the caller left (its context ended) before the call went.
	Gone
	// Superseded: the job is no longer this attempt's to run (another gateway took it over, or
	// it was cancelled). What the attempt took is given back.
	Superseded
	// ProviderDown: the breaker of every provider that may serve the call is open (see
	// gatewayv1.Breaker). RetryAfter is when the first lets a probe through. Nothing was charged.
	ProviderDown
)

var reasonNames = [...]string{"", "limited", "too_large", "busy", "unavailable", "failed", "gone", "superseded", "provider_down"}

func (r Reason) String() string {
	if int(r) < len(reasonNames) {
		return reasonNames[r]
	}
	return "unknown"
}

// Refusal says why a call may not go, and when to come back. Which fields are set depends on
// the Reason.
type Refusal struct {
	Reason Reason
	// Level and Dimension name the limit that refused (Limited, TooLarge).
	Level     ratelimit.Level
	Dimension ratelimit.Dimension
	// Capacity is the refusing limit as its configuration states it, counted Per ("a minute",
	// "a day", "at once"; empty for a bucket's burst), Remaining what it had left and Requested
	// what the call asked of it (Limited, TooLarge; Remaining is -1 when no decision was taken).
	Capacity, Remaining, Requested int64
	Per                            string
	// Spent reports that the refusing limit is a calendar window (a day's or a month's quota, or
	// the budget): nothing comes back to it until it resets, RetryAfter from now (Limited).
	Spent bool
	// RetryAfter is how long to wait before asking again: exact for Limited (but inFlightRetry
	// for calls in flight, which free when a call ends), a promise spread over the queue's drain
	// for Busy, a short pause for Unavailable; zero for TooLarge.
	RetryAfter time.Duration
	// Position is the call's place in its lane, itself included (Busy).
	Position int
	// Estimate is the wait the door estimated for the call's lane, and MaxWait the plan's bound
	// (Busy).
	Estimate, MaxWait time.Duration
	// Horizon, when not zero, is the shorter bound the call passed: the door promises no longer
	// a wait behind a caller's earlier calls while new lanes join the queue (Busy; see
	// fairqueue.Queue.Horizon).
	Horizon time.Duration
	// Waited is how long the call queued before it was refused.
	Waited time.Duration
	// Limits are the caller's limits as the refusing decision left them; zero when none was
	// taken.
	Limits Limits
}

// limitedOn is a refusal by l, Limited, with l as its configuration states it.
func limitedOn(l *ratelimit.Limit) *Refusal {
	r := &Refusal{Reason: Limited, Level: l.Level, Dimension: l.Dimension, Spent: l.IsWindow()}
	r.Capacity, r.Per = l.Stated()
	return r
}

// inFlightRetry is when a caller that calls in flight refused is told to come back: a slot
// frees when a call ends, which no limit foresees.
const inFlightRetry = time.Second

// RetryAfter is the wait a Retry-After header states for a wait of d: whole seconds, rounded up,
// at least one (a client told 0 retries at once). A caller that follows it comes back then.
func RetryAfter(d time.Duration) time.Duration {
	return max(((d+time.Second-1)/time.Second)*time.Second, time.Second)
}

// Retryable reports whether the same call may pass later: a limit that refills, a queue that
// drains, a store that comes back.
func (r *Refusal) Retryable() bool {
	return r.Reason != TooLarge && r.Reason != Gone
}

// Limits are what the caller's own limits have left after a decision, as the rate-limit headers
// report them. A Headroom whose Capacity is zero is absent.
type Limits struct {
	// Requests and Tokens are the caller's own limits (user, tenant or endpoint) on requests and
	// on tokens with the least left; the global and provider limits are not the caller's to see.
	Requests, Tokens Headroom
	// Budget is the tenant's budget, in micro-dollars.
	Budget Headroom
}

// Headroom is one limit after a decision.
type Headroom struct {
	Capacity, Remaining int64
	// Reset is the time until the limit is whole again.
	Reset time.Duration
}

// limitsOf reads the caller's limits from a decision on checks. budget is the key of the
// tenant's budget, or "".
func limitsOf(checks []ratelimit.Check, d *ratelimit.Decision, budget string) Limits {
	var l Limits
	requests, tokens := -1, -1
	for i, c := range checks {
		switch {
		case budget != "" && c.Limit.Key == budget:
			l.Budget = headroom(checks, d, i)
		case c.Limit.Level >= ratelimit.LevelGlobal:
		case c.Limit.Dimension == ratelimit.Requests:
			requests = tighter(d, requests, i)
		case c.Limit.Dimension == ratelimit.Tokens:
			tokens = tighter(d, tokens, i)
		}
	}
	l.Requests, l.Tokens = headroom(checks, d, requests), headroom(checks, d, tokens)
	return l
}

// tighter returns whichever of checks i and j has less left; i may be -1 (none yet).
func tighter(d *ratelimit.Decision, i, j int) int {
	if i < 0 || d.Remaining[j] < d.Remaining[i] {
		return j
	}
	return i
}

func headroom(checks []ratelimit.Check, d *ratelimit.Decision, i int) Headroom {
	if i < 0 {
		return Headroom{}
	}
	return Headroom{Capacity: checks[i].Limit.Capacity(), Remaining: d.Remaining[i], Reset: d.Reset[i]}
}
