package admission

import (
	"cmp"
	"time"

	gatewayv1 "github.com/sluicehq/sluice/api/gateway/v1"
	"github.com/sluicehq/sluice/cmd/gateway/internal/policy"
)

const (
	// minShare is the least share of the in-flight cap throttles leave.
	minShare = 1.0 / 32
	// shareStep is what each successful call gives back.
	shareStep = 1.0 / 64
	// minPause is the pause after a throttle that named no retry-after.
	minPause = time.Second
)

// feedback is what a provider's answers say. A 429 or 503 says our model of its limits is
// wrong: dispatch pauses for the time it asked, and the calls this replica keeps in flight to it
// are cut by half at each throttle and grow back by a step at each success (AIMD). Its rate-limit
// headers say what its limits are: those lower than configured are learned.
type feedback struct {
	pausedUntil time.Time
	share       float64 // of the in-flight cap; 1 when the provider is happy
	// throttledBase is the in-flight cap the share cuts from when the provider has none
	// configured: the calls in flight at the first throttle. Zero while the share is 1.
	throttledBase int64
	learned       gatewayv1.LearnedLimits // lower than configured, as last reported, above their floor
	// confirmed and served are what holds learned up, or lets it go (see learning.go).
	confirmed confirmations
	served    served
	// lastReport is what the last answer reported (see reported); nil when the next answer is to
	// be learned from whatever it reports.
	lastReport *lastReport
}

// maxInFlight is this replica's share of the provider's in-flight cap, after throttles; zero
// means no cap of the throttles' own (the limiter still holds a configured maxInFlight). A
// provider with no maxInFlight is capped at the calls that were in flight when it first
// throttled. The caller holds h.mu.
func (h *health) maxInFlight() int64 {
	if h.share >= 1 {
		return 0
	}
	base := h.throttledBase
	if p := h.g.policy().Provider(h.provider); p != nil && p.Config.MaxInFlight > 0 {
		base = p.Config.WithHeadroom(p.Config.MaxInFlight)
	}
	return max(int64(h.share*float64(base)), 1)
}

// throttled takes in a 429 or 503 from the provider. The pause it asks for is held to the
// provider's retry maxDelay: a provider cannot stop its queue for longer than the gateway would
// wait between two attempts.
func (h *health) throttled(retryAfter time.Duration) {
	h.mu.Lock()
	defer h.mu.Unlock()
	pause := min(max(retryAfter, minPause), h.maxPause())
	h.pauseFor(pause)
	if h.share >= 1 {
		// The throttled call is still in flight, so the base is at least one.
		h.throttledBase = max(h.g.usage.inFlight(h.provider), 1)
	}
	h.setShare(max(h.share/2, minShare))
}

// pauseFor stops dispatch to the provider from now, unless it is stopped for longer already. The
// caller holds h.mu.
func (h *health) pauseFor(pause time.Duration) {
	if until := h.g.now().Add(pause); until.After(h.pausedUntil) {
		h.pausedUntil = until
	}
}

// setShare sets the share of the in-flight cap; back at 1, the provider is happy and the base
// a throttle took is forgotten. The caller holds h.mu.
func (h *health) setShare(share float64) {
	h.share = share
	if share >= 1 {
		h.throttledBase = 0
	}
	h.g.metrics.providerShare.WithLabelValues(h.provider).Set(share)
}

// maxPause is the longest pause the provider's answers may ask for: its retry maxDelay, and
// never less than minPause.
func (h *health) maxPause() time.Duration {
	if p := h.g.policy().Provider(h.provider); p != nil {
		return max(p.Config.Retry.MaxDelay.Duration, minPause)
	}
	return minPause
}

// ended takes in a call back from the provider: a success grows the share, and notes what the
// call took (see servedCall).
func (h *health) ended(served bool, tokens byKind) {
	if !served {
		return
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	h.servedCall(tokens, h.g.now())
	if h.share < 1 {
		h.setShare(min(h.share+shareStep, 1))
	}
}

// reported takes in the limits a provider's answer reported and reports whether the limits
// learned from it changed: those lower than configured are learned, held at or above their
// floor (see policy.Lower: a hundredth of the configured limit, and the largest call the provider
// was seen to serve), and one reported no longer lower is forgotten, as is one no answer
// confirmed for learnedTTL. A remaining count of zero pauses dispatch until the provider said
// it resets, held to minPause: its reset is when all of its limit is back, and a provider that
// counts a rolling minute (as OpenAI's do) earns it back all along, while the gateway's own
// rolling minute already holds to the limit. Held to maxPause, the queue stood still for up to its
// retry maxDelay whenever the provider's minute was exactly full.
//
// An answer that reports what the last one did, under the same configuration, with nothing
// exhausted, within confirmEvery of it, teaches nothing new (learning is the same again) and is
// passed over: most answers are such.
func (h *health) reported(r Reported) bool {
	h.mu.Lock()
	defer h.mu.Unlock()
	pol, now := h.g.policy(), h.g.now()
	if last := h.lastReport; !r.Exhausted && last != nil && last.repeats(pol, r.Limits, now) {
		return false
	}
	if r.Exhausted {
		h.pauseFor(min(r.Reset, minPause))
	}
	p := pol.Provider(h.provider)
	if p == nil {
		return false
	}
	h.confirmed.confirm(r.Limits, now)
	learned := policy.Lower(p.Config, r.keepUnreported(h.unexpired(now)), h.served.evidence(now))
	changed := learned != h.learned
	h.learned = learned
	h.lastReport = &lastReport{policy: pol, limits: r.Limits, at: now}
	return changed
}

// lastReport is the limits a provider's answer last reported, the configuration in force then,
// and when.
type lastReport struct {
	policy *policy.Policy
	limits gatewayv1.LearnedLimits
	at     time.Time
}

// repeats reports whether an answer at now that reports limits under pol says what the last one
// did, soon enough after it that the learned limits need no confirming yet.
func (l *lastReport) repeats(pol *policy.Policy, limits gatewayv1.LearnedLimits, now time.Time) bool {
	return l.policy == pol && l.limits == limits && now.Sub(l.at) < confirmEvery
}

// learning is what the provider's answers taught, as the usage snapshot reports it.
type learning struct {
	learned  gatewayv1.LearnedLimits
	inFlight int64 // the throttles' in-flight cap; zero for none
	breaker  gatewayv1.BreakerState
	opens    int64 // how many times the breaker opened
}

// feedbackNow returns what the provider's answers taught so far.
func (h *health) feedbackNow() learning {
	h.mu.Lock()
	defer h.mu.Unlock()
	return learning{learned: h.learned, inFlight: h.maxInFlight(), breaker: h.breaker.state(h.g.now()), opens: h.breaker.opens}
}

// Reported is what one of a provider's answers says of its limits, in OpenAI's x-ratelimit-*
// headers or Anthropic's anthropic-ratelimit-*. The zero value says nothing.
type Reported struct {
	// Limits are the limits per minute it reported. A zero field was not in the answer.
	Limits gatewayv1.LearnedLimits
	// Exhausted is true when one of them had nothing remaining.
	Exhausted bool
	// Reset is, when Exhausted, how long until the exhausted limit resets. Zero means the answer
	// did not say.
	Reset time.Duration
}

// keepUnreported returns r's limits, with those the answer did not carry taken from learned.
func (r Reported) keepUnreported(learned gatewayv1.LearnedLimits) gatewayv1.LearnedLimits {
	return r.Limits.Combine(learned, func(_ gatewayv1.Dimension, reported, learned int64) int64 {
		return cmp.Or(reported, learned)
	})
}
