package admission

import (
	"time"

	gatewayv1 "github.com/sluicehq/sluice/api/gateway/v1"
)

// breaker is a provider's circuit breaker (see gatewayv1.Breaker): attempts that fail in a row
// open it, and the provider leaves the pools of its models until it has been open for its
// openFor; then one call at a time probes it, and the first served closes it again. Its
// provider's health keeps it under its lock.
type breaker struct {
	failures  int32     // attempts in a row that failed
	openUntil time.Time // when an open breaker lets a probe through; zero while closed
	probeAt   time.Time // when the last probe was let through; zero for none
	opens     int64     // how many times it opened
}

// state is the breaker's state at now.
func (b *breaker) state(now time.Time) gatewayv1.BreakerState {
	switch {
	case b.openUntil.IsZero():
		return gatewayv1.BreakerClosed
	case now.Before(b.openUntil):
		return gatewayv1.BreakerOpen
	}
	return gatewayv1.BreakerHalfOpen
}

// allows reports whether a call may go to the provider at now: always while the breaker is
// closed, never while it is open, and once it is half open, when no probe is out, or the last has
// had openFor without an answer.
func (b *breaker) allows(now time.Time, cfg gatewayv1.Breaker) bool {
	switch b.state(now) {
	case gatewayv1.BreakerClosed:
		return true
	case gatewayv1.BreakerOpen:
		return false
	}
	return b.probeAt.IsZero() || now.Sub(b.probeAt) >= cfg.OpenFor.Duration
}

// sent takes in a call sent to the provider at now: while the breaker is half open, its probe.
func (b *breaker) sent(now time.Time) {
	if b.state(now) == gatewayv1.BreakerHalfOpen {
		b.probeAt = now
	}
}

// attempted takes in an attempt's result: served (an answer below 500, or a 503, which is the
// provider's throttle) or failed (no answer, or a 5xx). It reports whether the breaker opened.
func (b *breaker) attempted(served bool, now time.Time, cfg gatewayv1.Breaker) bool {
	if served {
		*b = breaker{opens: b.opens}
		return false
	}
	b.failures++
	half := b.state(now) == gatewayv1.BreakerHalfOpen
	if !half && (b.failures < max(cfg.Failures, 1) || !b.openUntil.IsZero()) {
		return false
	}
	b.openUntil, b.probeAt = now.Add(cfg.OpenFor.Duration), time.Time{}
	b.opens++
	return true
}

// nextProbe is when the breaker next lets a call through: when an open breaker lets its probe
// through, or when a half-open one lets another if its probe is still out then; zero while it is
// closed.
func (b *breaker) nextProbe(cfg gatewayv1.Breaker) time.Time {
	if b.openUntil.IsZero() || b.probeAt.IsZero() {
		return b.openUntil
	}
	return b.probeAt.Add(cfg.OpenFor.Duration)
}

// retryAfter is how long until an open breaker lets a probe through.
func (b *breaker) retryAfter(now time.Time) time.Duration {
	return max(b.openUntil.Sub(now), 0)
}

// outOfPool reports whether the provider's breaker is open, and if so how long until it lets a
// probe through. A half-open provider is in its pools: with its probe out it sends nothing, but
// calls may wait in its queue for the probe's answer (and move to the others if it fails).
func (h *health) outOfPool() (bool, time.Duration) {
	h.mu.Lock()
	defer h.mu.Unlock()
	now := h.g.now()
	if h.breaker.state(now) == gatewayv1.BreakerOpen {
		return true, h.breaker.retryAfter(now)
	}
	return false, 0
}

// attempted takes in the result of an attempt to call the provider, and reports whether the
// breaker's state changed and whether it opened.
func (h *health) attempted(served bool) (changed, opened bool) {
	h.mu.Lock()
	defer h.mu.Unlock()
	now := h.g.now()
	was := h.breaker.state(now)
	opened = h.breaker.attempted(served, now, h.breakerConfig())
	state := h.breaker.state(now)
	if state != was {
		h.g.metrics.breakerOpen.WithLabelValues(h.provider).Set(boolGauge(state != gatewayv1.BreakerClosed))
		h.g.log.Warn("provider breaker", "provider", h.provider, "state", state)
	}
	if opened {
		h.g.metrics.breakerOpens.WithLabelValues(h.provider).Inc()
	}
	return state != was, opened
}

// attempted takes in the result of an attempt to call the provider. When the breaker closes
// again, the calls waiting for the probe's answer may go; when it opens, every call waiting for
// the provider is moved: it is admitted again among its pool's others, or answered that its
// provider is down.
func (d *dispatcher) attempted(served bool) {
	changed, opened := d.health.attempted(served)
	if changed {
		d.kick()
	}
	if !opened {
		return
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	for _, it := range d.q.Items() {
		d.finish(it.Value.(*waiter), verdict{moved: true}, false)
	}
}

func boolGauge(b bool) float64 {
	if b {
		return 1
	}
	return 0
}

// sent takes in a call sent to the provider at now: while the breaker is half open, its probe.
func (h *health) sent(now time.Time) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.breaker.sent(now)
}

// nextProbe is when the breaker next lets a call through (see breaker.nextProbe); zero while it
// is closed.
func (h *health) nextProbe() time.Time {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.breaker.nextProbe(h.breakerConfig())
}

// Attempted takes in the result of an attempt to call a provider: served (any answer below 500,
// or a 503, the provider's throttle), or failed (no answer, a timeout, another 5xx). Failures in
// a row open its breaker (see gatewayv1.Breaker).
func (g *Gate) Attempted(provider string, served bool) {
	g.dispatcher(provider).attempted(served)
}

// poolProbe is how long until the first provider of provider's pools that is out behind its
// breaker (open, or half open with its probe out) may take a call again; zero when none is out. A
// call turned away meanwhile is told to come back by then: the capacity the door's estimate left
// out may be back.
func (g *Gate) poolProbe(provider string, now time.Time) time.Duration {
	p := g.policy().Provider(provider)
	if p == nil {
		return 0
	}
	var soonest time.Duration
	for _, name := range p.Pooled {
		d := g.existingDispatcher(name)
		if d == nil {
			continue
		}
		if in := d.health.nextProbe().Sub(now); in > 0 && (soonest == 0 || in < soonest) {
			soonest = in
		}
	}
	return soonest
}
