package server

import (
	"context"
	"fmt"
	"net/http"
	"strconv"
	"sync"
	"time"

	gatewayv1 "github.com/sluicehq/sluice/api/gateway/v1"
	"github.com/sluicehq/sluice/cmd/gateway/internal/estimate"
	"github.com/sluicehq/sluice/cmd/gateway/internal/fairqueue"
	"github.com/sluicehq/sluice/cmd/gateway/internal/ratelimit"
)

// The queue's headers.
const (
	headerQueueWait     = "X-Sluice-Queue-Wait-Ms"
	headerQueuePosition = "X-Sluice-Queue-Position"
	headerQueueEstimate = "X-Sluice-Queue-Estimate-Ms"
)

const (
	// decideTimeout bounds one dispatch decision.
	decideTimeout = 2 * time.Second
	// inFlightPoll is how often a queue held by calls in flight looks again, in case a call on
	// another replica ended; a call ending on this one wakes it at once.
	inFlightPoll = 50 * time.Millisecond
	// drainWindow is how long a backlog must last before its measured drain replaces the
	// configured one in the door's estimate.
	drainWindow = 10 * time.Second
	// maxUnestimated bounds a queue whose drain the door cannot estimate (a provider with no
	// tokens per minute, before anything drained).
	maxUnestimated = 10_000
)

// dispatcher owns one provider's queue: it sends the next call in fair order whenever every
// limit allows it, in one limiter decision, so no call is sent to hit a limit and come back.
type dispatcher struct {
	s        *Server
	provider string
	wake     chan struct{}

	mu           sync.Mutex
	q            *fairqueue.Queue
	drained      lastMinute // tokens dispatched from the queue
	backlogSince time.Time  // when the queue last became non-empty
	feedback                // what the provider's throttles taught
}

// feedback is what a provider's 429s and 503s say: our model of its limits is wrong. Dispatch
// pauses for the time it asked, and the calls this replica keeps in flight to it are cut by half
// at each throttle and grow back by a step at each success (AIMD).
type feedback struct {
	pausedUntil time.Time
	share       float64 // of the in-flight cap; 1 when the provider is happy
	inFlight    int64   // this replica's calls to the provider
}

const (
	// minShare is the least share of the in-flight cap throttles leave.
	minShare = 1.0 / 32
	// shareStep is what each successful call gives back.
	shareStep = 1.0 / 64
	// minPause is the pause after a throttle that named no retry-after.
	minPause = time.Second
)

// waiter is a call in the queue.
type waiter struct {
	c    *call
	item *fairqueue.Item
	// done receives nil when the dispatcher took a decision (c.decision), or the error that
	// stopped it.
	done chan *apiError
}

// dispatcher returns the provider's dispatcher, starting it on first use.
func (s *Server) dispatcher(provider string) *dispatcher {
	if d, ok := s.dispatchers.Load(provider); ok {
		return d.(*dispatcher)
	}
	d := &dispatcher{s: s, provider: provider, wake: make(chan struct{}, 1), q: fairqueue.New(fairqueue.Options{}), feedback: feedback{share: 1}}
	actual, loaded := s.dispatchers.LoadOrStore(provider, d)
	if !loaded {
		go d.run(s.ctx)
	}
	return actual.(*dispatcher)
}

// idle reports whether nobody waits and the provider is open, so a new call may try to go at once.
func (d *dispatcher) idle() bool {
	d.mu.Lock()
	defer d.mu.Unlock()
	_, open := d.open(d.s.now())
	return d.q.Len() == 0 && open
}

// open reports whether a call may go to the provider at now, as far as its feedback and its
// configuration's pause go, and if not, how long to wait before looking again.
func (d *dispatcher) open(now time.Time) (time.Duration, bool) {
	if now.Before(d.pausedUntil) {
		return d.pausedUntil.Sub(now), false
	}
	if p := d.s.policy.Load().Provider(d.provider); p != nil && p.Config.Paused {
		return inFlightPoll, false // until a reload lifts the pause
	}
	if max := d.maxInFlight(); max > 0 && d.inFlight >= max {
		return inFlightPoll, false
	}
	return 0, true
}

// maxInFlight is this replica's share of the provider's in-flight cap, after throttles; zero
// means no cap.
func (d *dispatcher) maxInFlight() int64 {
	p := d.s.policy.Load().Provider(d.provider)
	if p == nil || p.Config.MaxInFlight == 0 || d.share >= 1 {
		return 0
	}
	return max(int64(d.share*float64(p.Config.WithHeadroom(p.Config.MaxInFlight))), 1)
}

// throttled takes in a 429 or 503 from the provider.
func (d *dispatcher) throttled(retryAfter time.Duration) {
	d.mu.Lock()
	defer d.mu.Unlock()
	until := d.s.now().Add(max(retryAfter, minPause))
	if until.After(d.pausedUntil) {
		d.pausedUntil = until
	}
	d.share = max(d.share/2, minShare)
	d.s.metrics.providerShare.WithLabelValues(d.provider).Set(d.share)
}

// started counts a call going to the provider.
func (d *dispatcher) started() {
	d.mu.Lock()
	defer d.mu.Unlock()
	d.inFlight++
}

// ended counts a call back from the provider, and grows the share after a success.
func (d *dispatcher) ended(ok bool) {
	d.mu.Lock()
	d.inFlight--
	if ok && d.share < 1 {
		d.share = min(d.share+shareStep, 1)
		d.s.metrics.providerShare.WithLabelValues(d.provider).Set(d.share)
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

// wait queues a call after the door's estimate, and returns when it has been decided: allowed (it
// may go), refused, abandoned by its client, or, for a call someone waits for, still queued after
// its plan's maxWait (the door's estimate was wrong, or the provider is paused).
func (d *dispatcher) wait(ctx context.Context, c *call, w http.ResponseWriter) *apiError {
	start := d.s.now()
	wt := &waiter{c: c, done: make(chan *apiError, 1)}
	wt.item = &fairqueue.Item{
		Tenant: c.caller.Tenant.Name, User: c.caller.User, Weight: c.caller.Tenant.Config.Weight,
		Class: class(c), Cost: c.cost.Tokens, Value: wt,
	}
	if apiErr := d.push(wt, w, start); apiErr != nil {
		return apiErr
	}
	d.kick()
	var expired <-chan time.Time
	if !c.isJob() {
		timer := time.NewTimer(c.caller.Tenant.Config.MaxWait.Duration)
		defer timer.Stop()
		expired = timer.C
	}
	select {
	case apiErr := <-wt.done:
		return d.waited(c, w, apiErr, start)
	case <-ctx.Done():
		return d.abandon(wt)
	case <-expired:
		select {
		case apiErr := <-wt.done: // decided as the time ran out
			return d.waited(c, w, apiErr, start)
		default:
		}
		return d.expire(wt, w)
	}
}

// waited records how long a decided call waited and turns the decision into its answer.
func (d *dispatcher) waited(c *call, w http.ResponseWriter, apiErr *apiError, start time.Time) *apiError {
	c.waited = d.s.now().Sub(start)
	d.s.metrics.queueWait.WithLabelValues(d.provider).Observe(c.waited.Seconds())
	return d.s.decided(c, w, apiErr)
}

// expire takes a call that waited its plan's maxWait out of the queue and answers it busy, as the
// door would have, with the wait its lane would still have.
func (d *dispatcher) expire(wt *waiter, w http.ResponseWriter) *apiError {
	d.mu.Lock()
	estimate := d.q.EstimateWait(wt.item, d.drainRate(d.s.now()))
	ahead, _ := d.q.Ahead(wt.item.Class, wt.item.Tenant)
	d.mu.Unlock()
	d.abandon(wt) // a decision made meanwhile is given back
	maxWait := wt.c.caller.Tenant.Config.MaxWait.Duration
	if estimate < 0 {
		estimate = maxWait // unknown, as for a paused provider: ask to come back after another maxWait
	}
	return d.s.busy(wt.c, w, maxWait+estimate, maxWait, max(ahead, 1)) // ahead counts this call
}

// push lets a call in at the door, or answers busy when its estimated wait passes the plan's
// maxWait: before anything is charged. A job, which nobody waits for, passes no door.
func (d *dispatcher) push(wt *waiter, w http.ResponseWriter, now time.Time) *apiError {
	d.mu.Lock()
	defer d.mu.Unlock()
	it, c := wt.item, wt.c
	estimate := d.q.EstimateWait(it, d.drainRate(now))
	maxWait := c.caller.Tenant.Config.MaxWait.Duration
	if !c.isJob() && (estimate > maxWait || (estimate < 0 && d.q.Len() >= maxUnestimated)) {
		ahead, _ := d.q.Ahead(it.Class, it.Tenant)
		return d.s.busy(c, w, max(estimate, maxWait), maxWait, ahead+1)
	}
	if d.q.Len() == 0 {
		d.backlogSince = now
	}
	d.q.Push(it)
	d.s.queued(c, it, 1)
	return nil
}

// abandon takes a call whose client left out of the queue. If the dispatcher let it go in the
// meantime, what it was charged is given back: the call is never made.
func (d *dispatcher) abandon(wt *waiter) *apiError {
	d.mu.Lock()
	queued := wt.item.Queued()
	d.q.Remove(wt.item)
	if queued {
		d.s.queued(wt.c, wt.item, -1)
	}
	d.mu.Unlock()
	select {
	case apiErr := <-wt.done:
		if apiErr == nil && wt.c.decision.Allowed {
			d.s.settle(wt.c, estimate.Usage{}, false)
		}
	default:
	}
	d.kick() // the head of the queue may have changed
	return errClientClosed
}

// statusClientClosed is the status logged for a client that left: it never sees it.
const statusClientClosed = 499

// decided turns the dispatcher's decision into the call's answer.
func (s *Server) decided(c *call, w http.ResponseWriter, apiErr *apiError) *apiError {
	if apiErr != nil {
		return apiErr
	}
	setLimitHeaders(w.Header(), c)
	if c.decision.Allowed {
		return nil
	}
	return s.refuse(c, w)
}

// busy answers a call the door turned away, with its place and the estimate.
func (s *Server) busy(c *call, w http.ResponseWriter, estimate, maxWait time.Duration, position int) *apiError {
	s.metrics.doorRefusals.WithLabelValues(c.provider(), c.tenant()).Inc()
	w.Header().Set(headerQueuePosition, strconv.Itoa(position))
	w.Header().Set(headerQueueEstimate, strconv.FormatInt(estimate.Milliseconds(), 10))
	w.Header().Set("Retry-After", strconv.FormatInt(int64(retryAfter(estimate-maxWait)/time.Second), 10))
	return &apiError{status: http.StatusTooManyRequests, Type: typeRateLimit, Code: "queue_busy",
		Message: fmt.Sprintf("The queue is busy: your request would wait about %s, more than your plan's %s. You are number %d in your lane.",
			estimate.Round(time.Second), maxWait, position)}
}

// class is the call's priority class: its tenant's, or Batch for a job.
func class(c *call) fairqueue.Class {
	if c.isJob() || c.caller.Tenant.Config.Priority == gatewayv1.PriorityBatch {
		return fairqueue.Batch
	}
	return fairqueue.Interactive
}

// run dispatches until ctx ends, sleeping while nothing may go.
func (d *dispatcher) run(ctx context.Context) {
	timer := time.NewTimer(time.Hour)
	defer timer.Stop()
	for {
		sleep := d.step()
		if sleep == 0 {
			continue
		}
		timer.Reset(sleep)
		select {
		case <-ctx.Done():
			return
		case <-d.wake:
		case <-timer.C:
		}
	}
}

// step offers the next call in fair order to the limiter and returns how long to sleep before the
// next step: zero to go on at once. The limiter's decision (a Redis round trip) is taken without
// d.mu: calls arriving, ending or leaving meanwhile are not held up. The call stays queued while
// it is decided, so a new call still waits behind it.
func (d *dispatcher) step() time.Duration {
	wt, sleep := d.next()
	if wt == nil {
		return sleep
	}
	ctx, cancel := context.WithTimeout(d.s.ctx, decideTimeout)
	apiErr := d.s.take(ctx, wt.c)
	cancel()
	return d.conclude(wt, apiErr)
}

// next returns the call to decide next, left in the queue, or nil and how long to sleep.
func (d *dispatcher) next() (*waiter, time.Duration) {
	d.mu.Lock()
	defer d.mu.Unlock()
	now := d.s.now()
	if wait, open := d.open(now); !open {
		return nil, wait
	}
	it, opens := d.q.Next(now)
	if it == nil {
		if opens.IsZero() {
			return nil, time.Hour // until a call arrives or ends
		}
		return nil, max(opens.Sub(now), time.Millisecond)
	}
	return it.Value.(*waiter), 0
}

// conclude acts on the limiter's decision on a call that next returned, and returns how long to
// sleep before the next step.
func (d *dispatcher) conclude(wt *waiter, apiErr *apiError) time.Duration {
	allowed := apiErr == nil && wt.c.decision.Allowed
	d.mu.Lock()
	if !wt.item.Queued() { // its client left while the limiter decided: give back what it took
		if allowed {
			d.inFlight++ // settling frees it
		}
		d.mu.Unlock()
		if allowed {
			d.s.settle(wt.c, estimate.Usage{}, false)
		}
		return 0
	}
	defer d.mu.Unlock()
	now := d.s.now()
	switch {
	case apiErr != nil:
		d.finish(wt, apiErr, false)
		return 0
	case allowed:
		d.inFlight++
		d.drained.add(now, wt.item.Cost)
		d.finish(wt, nil, true)
		return 0
	case !wt.c.queues() || (!wt.c.isJob() && wt.c.decision.RetryAfter > wt.c.caller.Tenant.Config.MaxWait.Duration):
		d.finish(wt, nil, false) // refused: waiting would not help, or would take too long
		return 0
	}
	return d.hold(wt, now)
}

// finish takes a decided call out of the queue and tells its handler.
func (d *dispatcher) finish(wt *waiter, apiErr *apiError, served bool) {
	if served {
		d.q.Pop(wt.item)
	} else {
		d.q.Remove(wt.item)
	}
	d.s.queued(wt.c, wt.item, -1)
	wt.done <- apiErr
}

// hold keeps a refused call queued: a limit of its own lane holds only that lane; a global or
// provider limit holds everyone, until it refills or a call in flight ends.
func (d *dispatcher) hold(wt *waiter, now time.Time) time.Duration {
	dec := &wt.c.decision
	until := now.Add(max(dec.RetryAfter, time.Millisecond))
	switch dec.RefusedBy(wt.c.checks).Level {
	case ratelimit.LevelUser:
		d.q.Block(wt.item, until, false)
		return 0
	case ratelimit.LevelTenant, ratelimit.LevelEndpoint:
		d.q.Block(wt.item, until, true)
		return 0
	}
	if dec.RetryAfter > 0 {
		return dec.RetryAfter
	}
	return inFlightPoll
}

// drainRate is the tokens per second the door expects the queue to drain: what it measured once
// a backlog has lasted drainWindow, else the provider's tokens per minute (after headroom).
func (d *dispatcher) drainRate(now time.Time) float64 {
	if d.q.Len() > 0 && now.Sub(d.backlogSince) >= drainWindow {
		if measured := float64(d.drained.sumWithin(now, drainWindow)) / drainWindow.Seconds(); measured > 0 {
			return measured
		}
	}
	p := d.s.policy.Load().Provider(d.provider)
	if p == nil {
		return -1
	}
	return float64(p.Config.WithHeadroom(p.Config.TokensPerMinute)) / 60
}

// queued counts a call into (+1) or out of (-1) its provider's queue.
func (s *Server) queued(c *call, it *fairqueue.Item, delta int64) {
	class := "interactive"
	if it.Class == fairqueue.Batch {
		class = "batch"
	}
	s.metrics.queueDepth.WithLabelValues(c.provider(), class, c.tenant()).Add(float64(delta))
	s.metrics.queueTokens.WithLabelValues(c.provider(), class, c.tenant()).Add(float64(delta * it.Cost))
	s.usage.queued(c, delta, delta*it.Cost)
}
