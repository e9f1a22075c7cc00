package admission

import (
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/sluicehq/sluice/cmd/gateway/internal/fairqueue"
)

const (
	// minShare is the least share of the in-flight cap throttles leave.
	minShare = 1.0 / 32
	// shareStep is what each successful call gives back.
	shareStep = 1.0 / 64
	// minPause is the pause after a throttle that named no retry-after.
	minPause = time.Second
)

// dispatcher owns one provider's queue: it sends the next call in fair order whenever every
// limit allows it, in one limiter decision, so no call is sent to hit a limit and come back.
type dispatcher struct {
	g        *Gate
	provider string
	wake     chan struct{}
	// arrivals, callDuration and queueWait are the provider's series, looked up once.
	arrivals     prometheus.Counter
	callDuration prometheus.Observer
	queueWait    prometheus.Observer

	// estimateRatio and comebackError measure the door: a call's wait against its estimate, and
	// when a caller turned away came back against when it was told to.
	estimateRatio prometheus.Observer
	comebackError prometheus.Observer

	mu           sync.Mutex
	q            *fairqueue.Queue
	drained      lastMinute           // tokens dispatched from the queue
	backlogSince time.Time            // when the queue last became non-empty
	horizon      time.Time            // the latest comeback given to a call turned away
	promised     map[string]time.Time // when each caller turned away was told to come back
	feedback                          // what the provider's throttles taught
}

// feedback is what a provider's 429s and 503s say: our model of its limits is wrong. Dispatch
// pauses for the time it asked, and the calls this replica keeps in flight to it are cut by half
// at each throttle and grow back by a step at each success (AIMD).
type feedback struct {
	pausedUntil time.Time
	share       float64 // of the in-flight cap; 1 when the provider is happy
}

func newDispatcher(g *Gate, provider string) *dispatcher {
	return &dispatcher{g: g, provider: provider, wake: make(chan struct{}, 1),
		arrivals:      g.metrics.arrivals.WithLabelValues(provider),
		callDuration:  g.metrics.callDuration.WithLabelValues(provider),
		queueWait:     g.metrics.queueWait.WithLabelValues(provider),
		estimateRatio: g.metrics.estimateRatio.WithLabelValues(provider),
		comebackError: g.metrics.comebackError.WithLabelValues(provider),
		q:             fairqueue.New(fairqueue.Options{}), promised: map[string]time.Time{}, feedback: feedback{share: 1}}
}

// idle reports whether nobody waits and the provider is open, so a new call may try to go at once.
func (d *dispatcher) idle() bool {
	d.mu.Lock()
	defer d.mu.Unlock()
	_, open := d.open(d.g.now())
	return d.q.Len() == 0 && open
}

// open reports whether a call may go to the provider at now, as far as its feedback and its
// configuration's pause go, and if not, how long to wait before looking again.
func (d *dispatcher) open(now time.Time) (time.Duration, bool) {
	if now.Before(d.pausedUntil) {
		return d.pausedUntil.Sub(now), false
	}
	p := d.g.policy().Provider(d.provider)
	if p != nil && p.Config.Paused {
		return inFlightPoll, false // until a reload lifts the pause
	}
	if max := d.maxInFlight(); max > 0 && d.g.usage.inFlight(d.provider) >= max {
		return inFlightPoll, false
	}
	return 0, true
}

// maxInFlight is this replica's share of the provider's in-flight cap, after throttles; zero
// means no cap.
func (d *dispatcher) maxInFlight() int64 {
	p := d.g.policy().Provider(d.provider)
	if p == nil || p.Config.MaxInFlight == 0 || d.share >= 1 {
		return 0
	}
	return max(int64(d.share*float64(p.Config.WithHeadroom(p.Config.MaxInFlight))), 1)
}

// throttled takes in a 429 or 503 from the provider. The pause it asks for is held to the
// provider's retry maxDelay: a provider cannot stop its queue for longer than the gateway would
// wait between two attempts.
func (d *dispatcher) throttled(retryAfter time.Duration) {
	d.mu.Lock()
	defer d.mu.Unlock()
	pause := max(retryAfter, minPause)
	if p := d.g.policy().Provider(d.provider); p != nil {
		pause = min(pause, max(p.Config.Retry.MaxDelay.Duration, minPause))
	}
	until := d.g.now().Add(pause)
	if until.After(d.pausedUntil) {
		d.pausedUntil = until
	}
	d.share = max(d.share/2, minShare)
	d.g.metrics.providerShare.WithLabelValues(d.provider).Set(d.share)
}

// ended takes in a call back from the provider: its slot is free, and a success grows the share.
func (d *dispatcher) ended(served bool) {
	d.mu.Lock()
	if served && d.share < 1 {
		d.share = min(d.share+shareStep, 1)
		d.g.metrics.providerShare.WithLabelValues(d.provider).Set(d.share)
	}
	d.mu.Unlock()
	d.kick()
}

// kick wakes the dispatcher: a call arrived, or one ended and gave back what it held.
func (d *dispatcher) kick() {
	select {
	case d.wake <- struct{}{}:
	default:
	}
}
