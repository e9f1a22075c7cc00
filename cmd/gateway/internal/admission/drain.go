package admission

import "time"

const (
	// drainWindow is how far back the door looks for the queue's drain, and minFullSeconds how
	// many of its seconds must have been full (see dispatcher.heldBack) for the measure to
	// replace the configured drain: a gateway's share of a provider swings from second to second
	// as the gateways sharing it take turns, so the measure spans many seconds.
	drainWindow    = 30 * time.Second
	minFullSeconds = 10
)

// drainRate is the tokens per second the door expects the queue to drain: what it drained in the
// recent seconds a limit it shares held it back, when there were enough of them, else this
// gateway's share of what the provider's tokens per minute let through while a backlog lasts, the
// gateways sharing it taking equal shares. A second the queue ran short of calls measures its
// callers, not its drain, and is left out. The caller holds d.mu.
func (d *dispatcher) drainRate(now time.Time) float64 {
	if tokens, full := d.drained.sumWhere(now, drainWindow, &d.full); full >= minFullSeconds {
		return float64(tokens) / float64(full)
	}
	p := d.g.policy().Provider(d.provider)
	if p == nil {
		return -1
	}
	return float64(p.SustainedTokensPerMinute()) / 60 / float64(d.g.policy().Replicas)
}

// heldBack records that a limit shared with other calls than the queue's next (the provider's,
// a global one, the calls in flight, a pause, the lanes of other gateways) held the queue back
// at now: this second measures the queue's drain. The caller holds d.mu.
func (d *dispatcher) heldBack(now time.Time) { d.full.add(now, 1) }
