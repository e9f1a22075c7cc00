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
}

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
	d := &dispatcher{s: s, provider: provider, wake: make(chan struct{}, 1), q: fairqueue.New(fairqueue.Options{})}
	actual, loaded := s.dispatchers.LoadOrStore(provider, d)
	if !loaded {
		go d.run(s.ctx)
	}
	return actual.(*dispatcher)
}

// idle reports whether nobody waits, so a new call may try to go at once.
func (d *dispatcher) idle() bool {
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.q.Len() == 0
}

// kick wakes the dispatcher: a call arrived, or one ended and gave back what it held.
func (d *dispatcher) kick() {
	select {
	case d.wake <- struct{}{}:
	default:
	}
}

// wait queues a call after the door's estimate, and returns when it has been decided: allowed (it
// may go), refused, or abandoned by its client.
func (d *dispatcher) wait(ctx context.Context, c *call, w http.ResponseWriter) *apiError {
	start := d.s.now()
	wt := &waiter{c: c, done: make(chan *apiError, 1)}
	wt.item = &fairqueue.Item{
		Tenant: c.caller.Tenant.Name, User: c.caller.User, Weight: c.caller.Tenant.Config.Weight,
		Class: class(c.caller.Tenant.Config.Priority), Cost: c.cost.Tokens, Value: wt, Enqueued: start,
	}
	if apiErr := d.push(wt, w, start); apiErr != nil {
		return apiErr
	}
	d.kick()
	select {
	case apiErr := <-wt.done:
		c.waited = d.s.now().Sub(start)
		d.s.metrics.queueWait.WithLabelValues(d.provider).Observe(c.waited.Seconds())
		return d.s.decided(c, w, apiErr)
	case <-ctx.Done():
		return d.abandon(wt)
	}
}

// push lets a call in at the door, or answers busy when its estimated wait passes the plan's
// maxWait: before anything is charged.
func (d *dispatcher) push(wt *waiter, w http.ResponseWriter, now time.Time) *apiError {
	d.mu.Lock()
	defer d.mu.Unlock()
	it, c := wt.item, wt.c
	estimate := d.q.EstimateWait(it, d.drainRate(now))
	if maxWait := c.caller.Tenant.Config.MaxWait.Duration; estimate > maxWait {
		ahead, _ := d.q.Ahead(it.Class, it.Tenant)
		return d.s.busy(c, w, estimate, maxWait, ahead+1)
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
	return &apiError{status: statusClientClosed, Type: typeInvalidRequest, Code: "client_closed", Message: "The client closed the request while it waited."}
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

func class(p gatewayv1.Priority) fairqueue.Class {
	if p == gatewayv1.PriorityBatch {
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
// next step: zero to go on at once.
func (d *dispatcher) step() time.Duration {
	d.mu.Lock()
	defer d.mu.Unlock()
	now := d.s.now()
	it, opens := d.q.Next(now)
	if it == nil {
		if opens.IsZero() {
			return time.Hour // until a call arrives or ends
		}
		return max(opens.Sub(now), time.Millisecond)
	}
	wt := it.Value.(*waiter)
	ctx, cancel := context.WithTimeout(d.s.ctx, decideTimeout)
	defer cancel()
	if apiErr := d.s.take(ctx, wt.c); apiErr != nil {
		d.finish(wt, apiErr, false)
		return 0
	}
	if wt.c.decision.Allowed {
		d.drained.add(now, it.Cost)
		d.finish(wt, nil, true)
		return 0
	}
	if !wt.c.queues() {
		d.finish(wt, nil, false)
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
	s.usage.queued(c, delta)
}
