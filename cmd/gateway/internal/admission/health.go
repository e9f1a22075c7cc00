package admission

import (
	"sync"
	"time"

	gatewayv1 "github.com/sluicehq/sluice/api/gateway/v1"
)

// health is what a provider's answers say of it: its breaker (breaker.go), the pause and the
// share of its in-flight cap that its throttles set (feedback.go), and the limits its headers
// teach (learning.go). It keeps them under a lock of its own, apart from the provider's queue:
// its methods never take the dispatcher's lock, which may be held when they are called. It is
// safe for concurrent use.
type health struct {
	g        *Gate
	provider string

	mu      sync.Mutex
	breaker breaker
	feedback
}

func newHealth(g *Gate, provider string) *health {
	return &health{g: g, provider: provider, feedback: feedback{share: 1}}
}

// open reports whether a call may go to the provider at now, as far as its pause, its breaker,
// its configuration's pause and the in-flight cap its throttles left go; if not, how long to
// wait before looking again.
func (h *health) open(now time.Time) (time.Duration, bool) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if now.Before(h.pausedUntil) {
		return h.pausedUntil.Sub(now), false
	}
	if !h.breaker.allows(now, h.breakerConfig()) { // open, or half open with its probe out
		return max(h.breaker.retryAfter(now), inFlightPoll), false
	}
	if p := h.g.policy().Provider(h.provider); p != nil && p.Config.Paused {
		return inFlightPoll, false // until a reload lifts the pause
	}
	if max := h.maxInFlight(); max > 0 && h.g.usage.inFlight(h.provider) >= max {
		return inFlightPoll, false
	}
	return 0, true
}

// paused reports whether the provider is paused at now: by its configuration, or after a
// throttle.
func (h *health) paused(now time.Time) bool {
	h.mu.Lock()
	defer h.mu.Unlock()
	p := h.g.policy().Provider(h.provider)
	return now.Before(h.pausedUntil) || (p != nil && p.Config.Paused)
}

// inPool reports whether the provider takes calls at now as far as its breaker goes: closed, or
// half open with no probe out. A provider out behind its breaker drains nothing.
func (h *health) inPool(now time.Time) bool {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.breaker.allows(now, h.breakerConfig())
}

// breakerConfig is the provider's breaker as the configuration in force sets it.
func (h *health) breakerConfig() gatewayv1.Breaker {
	if p := h.g.policy().Provider(h.provider); p != nil {
		return p.Config.Breaker
	}
	return gatewayv1.Breaker{}
}
