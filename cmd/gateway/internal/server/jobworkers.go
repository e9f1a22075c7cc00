package server

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strings"
	"sync"
	"time"

	gatewayv1 "github.com/sluicehq/sluice/api/gateway/v1"
	"github.com/sluicehq/sluice/cmd/gateway/internal/admission"
	"github.com/sluicehq/sluice/cmd/gateway/internal/estimate"
	"github.com/sluicehq/sluice/cmd/gateway/internal/jobs"
	"github.com/sluicehq/sluice/cmd/gateway/internal/policy"
	"github.com/sluicehq/sluice/cmd/gateway/internal/ratelimit"
)

// leaveTimeout bounds leaving the jobs' store as the gateway stops.
const leaveTimeout = 5 * time.Second

// RunJobs runs jobs, workers at a time, until ctx ends, renewing the ones it holds every renew
// so that no other replica reclaims them. When ctx ends it takes no more jobs and gives the
// attempts in progress grace to finish, then cancels them (a cancelled attempt is left to be
// reclaimed), and returns once every attempt has ended and this replica has left the store.
func (s *Server) RunJobs(ctx context.Context, workers int, renew, grace time.Duration) {
	work, stopWork := context.WithCancel(context.WithoutCancel(ctx))
	defer stopWork()
	go func() {
		<-ctx.Done()
		sleepCtx(work, grace)
		stopWork()
	}()
	running := &runningJobs{}
	renewed := make(chan struct{})
	go func() {
		defer close(renewed)
		s.renewJobs(work, renew, running)
	}()
	var attempts sync.WaitGroup
	s.takeJobs(ctx, work, workers, running, &attempts)
	attempts.Wait()
	stopWork()
	<-renewed
	leave, cancel := context.WithTimeout(context.Background(), leaveTimeout)
	defer cancel()
	if err := s.opts.Jobs.Leave(leave); err != nil {
		s.log.Error("leave the jobs' consumer group", "err", err)
	}
}

// takeJobs takes jobs until ctx ends and runs each, under work, in attempts.
func (s *Server) takeJobs(ctx, work context.Context, workers int, running *runningJobs, attempts *sync.WaitGroup) {
	slots := make(chan struct{}, workers)
	for {
		select {
		case slots <- struct{}{}:
		case <-ctx.Done():
			return
		}
		j, err := s.opts.Jobs.Take(ctx)
		if err != nil {
			<-slots
			if ctx.Err() != nil {
				return
			}
			s.log.Error("take a job", "err", err)
			sleepCtx(ctx, time.Second)
			continue
		}
		attempts.Go(func() {
			defer func() { <-slots }()
			s.runJob(work, j, running)
		})
	}
}

// runningJobs are the attempts this replica runs, by job id.
type runningJobs struct{ attempts sync.Map } // job id -> *runningAttempt

type runningAttempt struct{ cancel context.CancelFunc }

// start starts an attempt of a job under ctx; end ends it.
func (r *runningJobs) start(ctx context.Context, id string) (_ context.Context, end func()) {
	a := &runningAttempt{}
	ctx, a.cancel = context.WithCancel(ctx)
	r.attempts.Store(id, a)
	return ctx, func() {
		r.attempts.CompareAndDelete(id, a)
		a.cancel()
	}
}

// abandon cancels the attempt of a job this replica no longer holds.
func (r *runningJobs) abandon(id string) bool {
	a, ok := r.attempts.Load(id)
	if ok {
		a.(*runningAttempt).cancel()
	}
	return ok
}

// renewJobs renews the jobs this replica holds until ctx ends, and abandons the attempts of
// those another replica has reclaimed (this one stalled past the reclaim time), which are that
// replica's to run and record now, and of those the store lost, which nobody will read.
func (s *Server) renewJobs(ctx context.Context, every time.Duration, running *runningJobs) {
	t := time.NewTicker(every)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
			lost, err := s.opts.Jobs.Renew(ctx)
			if err != nil {
				s.log.Error("renew the jobs this gateway runs", "err", err)
			}
			for _, id := range lost {
				s.abandonJob(ctx, running, id)
			}
		}
	}
}

// abandonJob cancels the attempt of a job this replica no longer holds: another replica took it
// over, or the store lost it.
func (s *Server) abandonJob(ctx context.Context, running *runningJobs, id string) {
	if !running.abandon(id) {
		return
	}
	if _, err := s.opts.Jobs.Get(ctx, id); errors.Is(err, jobs.ErrLost) {
		s.jobLost(id)
		return
	}
	s.log.Warn("another gateway took over a job this one was running; its attempt is abandoned", "job", id)
}

func sleepCtx(ctx context.Context, d time.Duration) {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
	case <-t.C:
	}
}

// runJob makes one attempt of a job taken from the store and records how it ended.
//
// An attempt whose context ends (the gateway stops, or another replica reclaimed the job) is not
// recorded: the job is another attempt's now. Its call, if it had gone out, stays charged at its
// estimate, since the provider counted it; the job is still charged once, because the first
// attempt to settle marks it charged and every later one is refunded (see admission.Ticket.Settle).
func (s *Server) runJob(work context.Context, j *jobs.Job, running *runningJobs) {
	if j.State.Final() { // the store found it out of attempts
		s.jobEnded(work, j)
		return
	}
	ctx, end := running.start(work, j.ID)
	defer end()
	o, held := s.lineHeldBack(ctx, j)
	if !held {
		o = s.attempt(ctx, j)
	}
	if ctx.Err() != nil {
		return // stopping, or lost: another replica, or this one restarted, takes it again
	}
	s.metrics.jobAttempts.WithLabelValues(j.Tenant, attemptResult(o)).Inc()
	done, err := s.opts.Jobs.Finish(context.WithoutCancel(ctx), j.Attempt(), o)
	switch {
	case errors.Is(err, jobs.ErrLost):
		s.jobLost(j.ID)
	case errors.Is(err, jobs.ErrFinished), errors.Is(err, jobs.ErrNotFound):
		// cancelled while it ran, or ended by another gateway's attempt
	case errors.Is(err, jobs.ErrNotRunning):
		s.log.Warn("a job's attempt ended after another gateway took the job over; it is not recorded", "job", j.ID)
	case err != nil:
		s.log.Error("record a job's attempt", "job", j.ID, "err", err)
	case done.State.Final():
		s.jobEnded(context.WithoutCancel(ctx), done)
	}
	if held && !o.NotBefore.IsZero() {
		// A line put off to a valley: its worker waits too, rather than take the batch's next
		// line only to put it off as well.
		sleepCtx(ctx, valleyWait)
	}
}

// attemptResult names how an attempt ended, for the attempts' metric.
func attemptResult(o jobs.Outcome) string {
	switch {
	case !o.NotBefore.IsZero():
		return "deferred"
	case o.Err != "":
		return "failed"
	}
	return "ok"
}

// jobEnded counts a job that ended and, for a batch's line, records it in its batch.
func (s *Server) jobEnded(ctx context.Context, j *jobs.Job) {
	s.metrics.jobsEnded.WithLabelValues(j.Tenant, string(j.State)).Inc()
	if j.Batch != "" {
		s.lineEnded(ctx, j)
		return
	}
	if j.State == jobs.Failed {
		s.log.Warn("job failed", "job", j.ID, "tenant", j.Tenant, "attempts", j.Attempts, "err", j.Error)
	}
}

// attempt sends a job's call through the queue, in the Batch class, and the provider of its pool
// the gate chose. A refusal by the job's own limits (its user's, tenant's or endpoint's), by a
// quota spent until it resets (a provider's day included), or because every provider of its
// model is out of the pool, defers the job until they allow it or a probe is due, uncounted, so
// that its worker takes another tenant's job meanwhile.
func (s *Server) attempt(ctx context.Context, j *jobs.Job) jobs.Outcome {
	c, apiErr := s.jobCall(ctx, s.policy.Load(), j)
	if apiErr != nil {
		return jobs.Outcome{Err: apiErr.Message, Retry: apiErr.status >= 500}
	}
	req := c.admission()
	req.Job, req.Held, req.RequestWhenRun = j.Attempt(), j.Held, j.Batch != ""
	t, refusal := s.admit(ctx, c, req)
	c.admitted(t, refusal)
	switch {
	case refusal == nil:
		return s.forward(ctx, c)
	case refusal.Reason == admission.Superseded:
		return jobs.Outcome{Err: "the job is no longer this attempt's", Retry: true}
	}
	apiErr = refusalError(nil, c, refusal)
	s.finish(c, answered(apiErr, keepTicket))
	o := jobs.Outcome{Err: apiErr.Message, Retry: refusal.Retryable(), Status: apiErr.status, Result: apiErr.body()}
	switch {
	case j.Batch != "" && refusal.Spent:
		// A batch's line past a spent budget or quota fails as a live call would, and so do the
		// rest of its batch's: the batch stops at the budget rather than wait for its reset.
		o.Retry = false
	case (refusal.Reason == admission.Limited && (refusal.Level < ratelimit.LevelGlobal || refusal.Spent)) || refusal.Reason == admission.ProviderDown:
		o.NotBefore = time.Now().Add(max(refusal.RetryAfter, minDeferral))
	}
	return o
}

// minDeferral is the least a job refused by its own limits waits before it is taken again.
const minDeferral = 100 * time.Millisecond

// jobCall builds the call of a job's attempt, under the configuration in force now.
func (s *Server) jobCall(ctx context.Context, p *policy.Policy, j *jobs.Job) (*call, *apiError) {
	if p == nil {
		return nil, &apiError{status: http.StatusServiceUnavailable, Message: "The gateway has no configuration yet."}
	}
	caller := p.CallerOf(j.KeyHash)
	if caller == nil || caller.Tenant.Config.ID() != j.TenantID {
		return nil, &apiError{status: http.StatusUnauthorized, Message: "The API key that sent this job is no longer valid."}
	}
	arrived := time.Now()
	c, apiErr := s.newCall(ctx, p, caller, estimate.Endpoint(j.Endpoint), j.Body)
	c.requestID, c.arrived = j.ID, arrived
	c.forgetPromptTexts()
	if apiErr == nil {
		c.traced = s.startJobCall(j, arrived)
	}
	return c, apiErr
}

// forward sends an admitted job's call to its provider and reads the answer whole, within
// forwardTimeout. The call's ticket ends as a live call's would; a panic on its way ends the call
// as one (see endPanicked) and fails the attempt, to be tried again, rather than the gateway.
func (s *Server) forward(ctx context.Context, c *call) (out jobs.Outcome) {
	defer func() {
		if v := recover(); v != nil {
			s.endPanicked(c, v) // a job's worker has no net/http to recover it
			out = jobs.Outcome{Err: "the gateway failed the attempt", Retry: true}
		}
	}()
	limit := forwardTimeout(c.route.Provider.Config)
	ctx, cancel := context.WithTimeout(ctx, limit)
	defer cancel()
	o := s.newOutbound(c.traced.context(ctx), c, nil)
	defer o.end()
	resp, err := s.send(o, jobPath(o.endpoint), jobHeaders)
	if err != nil {
		e := s.unanswered(o, err)
		if e == nil || errors.Is(ctx.Err(), context.DeadlineExceeded) {
			e = &apiError{status: http.StatusGatewayTimeout, Type: typeServer, Code: "provider_timeout",
				Message: fmt.Sprintf("The provider did not answer within %s.", limit)}
			return jobs.Outcome{Err: fmt.Sprintf("the provider did not answer within %s", limit), Retry: true, Status: e.status, Result: e.body()}
		}
		return jobs.Outcome{Err: fmt.Sprintf("%d: %s", e.status, e.Message), Retry: e.status >= 500, Status: e.status, Result: e.body()}
	}
	defer resp.Body.Close()
	most := s.policy.Load().Config.Jobs.MaxResultBytes
	body, err := io.ReadAll(io.LimitReader(resp.Body, most+1))
	if int64(len(body)) > most {
		servedInPart := served(o.usageSoFar())
		servedInPart.detail = "the answer was larger than a job keeps"
		s.finish(c, servedInPart) // a stream read in part; a JSON answer has ended already
	}
	switch {
	case int64(len(body)) > most:
		return jobs.Outcome{Err: fmt.Sprintf("response too large: the provider's answer is over the %d bytes a job keeps", most)}
	case err != nil:
		return jobs.Outcome{Err: "the provider's answer was cut off", Retry: true}
	case resp.StatusCode/100 == 2 && !json.Valid(body):
		// Billed, so not retried; kept as it is, the result would be no JSON to read.
		return jobs.Outcome{Err: "the provider's answer is not JSON"}
	case resp.StatusCode/100 == 2:
		return jobs.Outcome{Status: resp.StatusCode, Result: body}
	}
	failed := jobs.Outcome{Err: fmt.Sprintf("%d: %s", resp.StatusCode, errorMessage(body)),
		Retry: resp.StatusCode == http.StatusTooManyRequests || resp.StatusCode >= 500, Status: resp.StatusCode}
	if json.Valid(body) {
		failed.Result = body
	}
	return failed
}

// jobHeaders are the headers a job's call is sent with, as a client's would be.
var jobHeaders = http.Header{"Content-Type": {"application/json"}}

// forwardTimeout bounds a job's call at its provider, answer included: each of the provider's
// attempts has its timeout to answer, with the longest backoff between them, and one more
// timeout reads the answer. A live call needs no such bound, since its client can leave; a job
// has nobody to leave, and a provider that stalls in the middle of its answer would hold a
// worker, renewed as running, for ever.
func forwardTimeout(p *gatewayv1.Provider) time.Duration {
	attempts := time.Duration(max(p.Retry.MaxAttempts, 1))
	return (attempts+1)*p.Timeout.Duration + (attempts-1)*p.Retry.MaxDelay.Duration
}

// errorMessage is the message of an OpenAI error body, or the start of any other.
func errorMessage(body []byte) string {
	var e struct {
		Error struct{ Message string }
	}
	if json.Unmarshal(body, &e) == nil && e.Error.Message != "" {
		return e.Error.Message
	}
	const most = 200
	if len(body) > most {
		body = body[:most]
	}
	return strings.TrimSpace(string(body))
}
