package server

import (
	"bytes"
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

// Jobs keeps jobs: jobs.Memory or jobs.Redis.
type Jobs interface {
	Add(ctx context.Context, j *jobs.Job) error
	Get(ctx context.Context, id string) (*jobs.Job, error)
	List(ctx context.Context, o jobs.Owner, state jobs.State) ([]*jobs.Job, error)
	Cancel(ctx context.Context, id string) (*jobs.Job, error)
	Take(ctx context.Context) (*jobs.Job, error)
	Renew(ctx context.Context) ([]string, error)
	Leave(ctx context.Context) error
	Finish(ctx context.Context, a jobs.Attempt, o jobs.Outcome) (*jobs.Job, error)
	Hold(ctx context.Context, a jobs.Attempt, held jobs.Cost) error
	Charge(ctx context.Context, a jobs.Attempt) (bool, error)
}

// jobEndpoints are the endpoints a job may call, by the path it names.
var jobEndpoints = map[string]estimate.Endpoint{
	"/v1/chat/completions": estimate.Chat,
	"/v1/responses":        estimate.Responses,
	"/v1/embeddings":       estimate.Embeddings,
}

// jobPath is the path of a job's endpoint: its key in jobEndpoints.
func jobPath(e estimate.Endpoint) string {
	for path, endpoint := range jobEndpoints {
		if endpoint == e {
			return path
		}
	}
	return ""
}

// jobRequest is the body of POST /v1/jobs: the endpoint to call and the body to send it.
type jobRequest struct {
	Endpoint string          `json:"endpoint"`
	Body     json.RawMessage `json:"body"`
}

// jobAnswer is a job as clients read it, after OpenAI's batch objects.
type jobAnswer struct {
	ID        string       `json:"id"`
	Object    string       `json:"object"`
	Endpoint  string       `json:"endpoint"`
	Status    jobs.State   `json:"status"`
	Attempts  int          `json:"attempts"`
	CreatedAt int64        `json:"created_at"`
	UpdatedAt int64        `json:"updated_at"`
	Response  *jobResponse `json:"response"`
	Error     *jobError    `json:"error"`
}

type jobResponse struct {
	StatusCode int             `json:"status_code"`
	Body       json.RawMessage `json:"body"`
}

type jobError struct {
	Message string `json:"message"`
}

func answerOf(j *jobs.Job) jobAnswer {
	a := jobAnswer{ID: j.ID, Object: "job", Endpoint: jobPath(estimate.Endpoint(j.Endpoint)), Status: j.State, Attempts: j.Attempts,
		CreatedAt: j.Created.Unix(), UpdatedAt: j.Updated.Unix()}
	if j.State == jobs.Succeeded {
		a.Response = &jobResponse{StatusCode: j.Status, Body: j.Result}
	}
	if j.Error != "" {
		a.Error = &jobError{Message: j.Error}
	}
	return a
}

// writeJSON answers v as JSON, or the gateway's own 500 when v does not encode (a stored result
// that is not JSON), never a status with no body.
func writeJSON(w http.ResponseWriter, status int, v any) {
	body, err := json.Marshal(v)
	if err != nil {
		(&apiError{status: http.StatusInternalServerError, Type: typeServer, Code: "answer_unencodable",
			Message: "The gateway could not encode its answer."}).write(w)
		return
	}
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	w.Write(append(body, '\n'))
}

// serveAddJob takes a job: it checks the request as a call would be checked, keeps it, and
// answers 202 at once. Nothing is charged until the job runs.
func (s *Server) serveAddJob(w http.ResponseWriter, r *http.Request) {
	p := s.policy.Load()
	caller, apiErr := s.authenticate(p, r)
	if apiErr != nil {
		apiErr.write(w)
		return
	}
	body, apiErr := readBody(p, r)
	if apiErr != nil {
		apiErr.write(w)
		return
	}
	j, c, apiErr := s.checkJob(r.Context(), p, caller, body)
	if apiErr != nil {
		apiErr.write(w)
		return
	}
	if refusal := s.gate.ChargeJob(r.Context(), c.admission()); refusal != nil {
		refusalError(w.Header(), c, refusal).write(w)
		return
	}
	key, _ := bearerKey(r) // authenticated above
	j.KeyHash = gatewayv1.HashKey(key)
	err := s.opts.Jobs.Add(r.Context(), j)
	if err != nil {
		s.gate.RefundJob(r.Context(), c.admission(), j.ID)
	}
	switch {
	case errors.Is(err, jobs.ErrTooManyQueued):
		tooManyJobs("Your organization has as many jobs queued as it may. Wait for some to run, or cancel some, and try again.").write(w)
		return
	case errors.Is(err, jobs.ErrTooManyBytes):
		tooManyJobs("Your organization's jobs hold as many bytes as they may: the requests of those not finished and the results of those finished. " +
			"Wait for results to expire, or cancel some jobs, and try again.").write(w)
		return
	case err != nil:
		s.jobStoreFailed(w, err)
		return
	}
	writeJSON(w, http.StatusAccepted, answerOf(j))
}

// tooManyJobs is the answer to a job its tenant has no room for.
func tooManyJobs(message string) *apiError {
	return &apiError{status: http.StatusTooManyRequests, Type: typeRateLimit, Code: "too_many_jobs", retryAfter: time.Minute, Message: message}
}

// checkJob reads a job's request and checks its call as a live one would be checked.
func (s *Server) checkJob(ctx context.Context, p *policy.Policy, caller *policy.Caller, body []byte) (*jobs.Job, *call, *apiError) {
	var req jobRequest
	if err := json.Unmarshal(body, &req); err != nil {
		return nil, nil, badRequest("invalid_request", "The request body is not valid JSON: want {\"endpoint\": \"/v1/chat/completions\", \"body\": {...}}.")
	}
	endpoint, ok := jobEndpoints[req.Endpoint]
	if !ok {
		e := badRequest("invalid_endpoint", fmt.Sprintf("The endpoint %q cannot be called by a job: use /v1/chat/completions or /v1/embeddings.", req.Endpoint))
		e.Param = ptr("endpoint")
		return nil, nil, e
	}
	if most := p.Config.Jobs.MaxBodyBytes; int64(len(req.Body)) > most {
		return nil, nil, &apiError{status: http.StatusRequestEntityTooLarge, Type: typeInvalidRequest, Code: "request_too_large", Param: ptr("body"),
			Message: fmt.Sprintf("A job's body is kept until it runs, and may be at most %d bytes; this one is %d.", most, len(req.Body))}
	}
	c, apiErr := s.newCall(ctx, p, caller, endpoint, req.Body)
	if apiErr != nil {
		return nil, nil, apiErr
	}
	if c.request.Stream {
		e := badRequest("invalid_request", "A job's answer is kept, not streamed: leave stream unset.")
		e.Param = ptr("body.stream")
		return nil, nil, e
	}
	if r := s.gate.TooLarge(c.admission()); r != nil {
		return nil, nil, refusalError(nil, c, r)
	}
	return &jobs.Job{ID: jobs.NewID(), Tenant: caller.Tenant.Name, TenantID: caller.Tenant.Config.ID(), User: caller.User,
		Endpoint: string(endpoint), Body: req.Body}, c, nil
}

func ptr(s string) *string { return &s }

// ownerOf is whose jobs a caller may see: its tenant's, or its own when its plan's jobScope is
// User.
func ownerOf(caller *policy.Caller) jobs.Owner {
	o := jobs.Owner{TenantID: caller.Tenant.Config.ID()}
	if caller.Tenant.Config.JobScope == gatewayv1.JobScopeUser {
		o.User = caller.User
	}
	return o
}

// serveGetJob answers a job the caller may see.
func (s *Server) serveGetJob(w http.ResponseWriter, r *http.Request) {
	s.serveJob(w, r, s.opts.Jobs.Get)
}

// serveCancelJob cancels a job the caller may see that has not finished.
func (s *Server) serveCancelJob(w http.ResponseWriter, r *http.Request) {
	s.serveJob(w, r, func(ctx context.Context, id string) (*jobs.Job, error) {
		j, err := s.opts.Jobs.Cancel(ctx, id)
		if err == nil {
			s.metrics.jobsEnded.WithLabelValues(j.Tenant, string(j.State)).Inc()
		}
		return j, err
	})
}

// serveJob answers a job after do, when the caller may see it.
func (s *Server) serveJob(w http.ResponseWriter, r *http.Request, do func(context.Context, string) (*jobs.Job, error)) {
	caller, apiErr := s.authenticate(s.policy.Load(), r)
	if apiErr != nil {
		apiErr.write(w)
		return
	}
	id := r.PathValue("id")
	notFound := &apiError{status: http.StatusNotFound, Type: typeInvalidRequest, Code: "job_not_found", Message: fmt.Sprintf("No job %q.", id)}
	// A job the caller may not see is not found, whatever it is: its id says nothing.
	if j, err := s.opts.Jobs.Get(r.Context(), id); errors.Is(err, jobs.ErrNotFound) || (err == nil && !ownerOf(caller).Owns(j)) {
		notFound.write(w)
		return
	}
	j, err := do(r.Context(), id)
	switch {
	case errors.Is(err, jobs.ErrNotFound):
		notFound.write(w)
	case errors.Is(err, jobs.ErrFinished):
		(&apiError{status: http.StatusConflict, Type: typeInvalidRequest, Code: "job_finished",
			Message: fmt.Sprintf("The job %q has already finished (%s).", id, j.State)}).write(w)
	case err != nil:
		s.jobStoreFailed(w, err)
	default:
		writeJSON(w, http.StatusOK, answerOf(j))
	}
}

// serveListJobs lists the newest jobs the caller may see, in the state ?state= names.
func (s *Server) serveListJobs(w http.ResponseWriter, r *http.Request) {
	caller, apiErr := s.authenticate(s.policy.Load(), r)
	if apiErr != nil {
		apiErr.write(w)
		return
	}
	state := jobs.State(r.URL.Query().Get("state"))
	if state != "" && !state.Known() {
		e := badRequest("invalid_request", fmt.Sprintf("Unknown state %q: use queued, running, succeeded, failed or cancelled.", state))
		e.Param = ptr("state")
		e.write(w)
		return
	}
	list, err := s.opts.Jobs.List(r.Context(), ownerOf(caller), state)
	if err != nil {
		s.jobStoreFailed(w, err)
		return
	}
	out := struct {
		Object string      `json:"object"`
		Data   []jobAnswer `json:"data"`
	}{Object: "list", Data: []jobAnswer{}}
	for _, j := range list {
		out.Data = append(out.Data, answerOf(j))
	}
	writeJSON(w, http.StatusOK, out)
}

func (s *Server) jobStoreFailed(w http.ResponseWriter, err error) {
	s.log.Error("job store failed", "err", err)
	(&apiError{status: http.StatusServiceUnavailable, Type: typeServer, Code: "jobs_unavailable", retryAfter: time.Second,
		Message: "The gateway cannot reach its jobs right now. Try again shortly."}).write(w)
}

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
// those another replica has reclaimed (this one stalled past the reclaim time): they are that
// replica's to run and record now.
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
				if running.abandon(id) {
					s.log.Warn("another gateway took over a job this one was running; its attempt is abandoned", "job", id)
				}
			}
		}
	}
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
		s.jobEnded(j)
		return
	}
	ctx, end := running.start(work, j.ID)
	defer end()
	o := s.attempt(ctx, j)
	if ctx.Err() != nil {
		return // stopping, or lost: another replica, or this one restarted, takes it again
	}
	s.metrics.jobAttempts.WithLabelValues(j.Tenant, attemptResult(o)).Inc()
	done, err := s.opts.Jobs.Finish(context.WithoutCancel(ctx), j.Attempt(), o)
	switch {
	case errors.Is(err, jobs.ErrFinished), errors.Is(err, jobs.ErrNotFound):
		// cancelled while it ran, or ended by another gateway's attempt
	case errors.Is(err, jobs.ErrNotRunning):
		s.log.Warn("a job's attempt ended after another gateway took the job over; it is not recorded", "job", j.ID)
	case err != nil:
		s.log.Error("record a job's attempt", "job", j.ID, "err", err)
	case done.State.Final():
		s.jobEnded(done)
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

func (s *Server) jobEnded(j *jobs.Job) {
	s.metrics.jobsEnded.WithLabelValues(j.Tenant, string(j.State)).Inc()
	if j.State == jobs.Failed {
		s.log.Warn("job failed", "job", j.ID, "tenant", j.Tenant, "attempts", j.Attempts, "err", j.Error)
	}
}

// attempt sends a job's call through the queue, in the Batch class, and the provider. A refusal
// by the job's own limits (its user's, tenant's or endpoint's) defers the job until they allow
// it, uncounted, so that its worker takes another tenant's job meanwhile.
func (s *Server) attempt(ctx context.Context, j *jobs.Job) jobs.Outcome {
	c, apiErr := s.jobCall(ctx, s.policy.Load(), j)
	if apiErr != nil {
		return jobs.Outcome{Err: apiErr.Message, Retry: apiErr.status >= 500}
	}
	req := c.admission()
	req.Job, req.Held = j.Attempt(), j.Held
	t, refusal := s.gate.Admit(ctx, req)
	switch {
	case refusal == nil:
		return s.forward(ctx, c, t)
	case refusal.Reason == admission.Superseded:
		return jobs.Outcome{Err: "the job is no longer this attempt's", Retry: true}
	}
	apiErr = refusalError(nil, c, refusal)
	s.metrics.requests.WithLabelValues(c.tenant(), c.provider(), outcomeOf(apiErr)).Inc()
	o := jobs.Outcome{Err: apiErr.Message, Retry: refusal.Retryable()}
	if refusal.Reason == admission.Limited && refusal.Level < ratelimit.LevelGlobal {
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
	c, apiErr := s.newCall(ctx, p, caller, estimate.Endpoint(j.Endpoint), j.Body)
	if c != nil {
		c.requestID = j.ID
	}
	return c, apiErr
}

// forward sends an admitted job's call to its provider and reads the answer whole, within
// forwardTimeout. The call's ticket ends as a live call's would.
func (s *Server) forward(ctx context.Context, c *call, t *admission.Ticket) jobs.Outcome {
	limit := forwardTimeout(c.route.Provider.Config)
	ctx, cancel := context.WithTimeout(ctx, limit)
	defer cancel()
	o := s.newOutbound(ctx, c, t, nil)
	defer o.end()
	resp, err := s.send(o)
	if err != nil {
		e := s.unanswered(o, err)
		if e == nil || errors.Is(ctx.Err(), context.DeadlineExceeded) {
			return jobs.Outcome{Err: fmt.Sprintf("the provider did not answer within %s", limit), Retry: true}
		}
		return jobs.Outcome{Err: fmt.Sprintf("%d: %s", e.status, e.Message), Retry: e.status >= 500}
	}
	defer resp.Body.Close()
	most := s.policy.Load().Config.Jobs.MaxResultBytes
	body, err := io.ReadAll(io.LimitReader(resp.Body, most+1))
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
	return jobs.Outcome{Err: fmt.Sprintf("%d: %s", resp.StatusCode, errorMessage(body)),
		Retry: resp.StatusCode == http.StatusTooManyRequests || resp.StatusCode >= 500}
}

// send sends a job's call to its provider, through the provider's retrying transport, and
// settles the answer as the proxy settles a live call's.
func (s *Server) send(o *outbound) (*http.Response, error) {
	req, err := http.NewRequestWithContext(o.ctx, http.MethodPost, o.target(jobPath(o.endpoint)).String(), bytes.NewReader(o.body))
	if err != nil {
		return nil, err
	}
	req.Header = providerHeaders(http.Header{"Content-Type": {"application/json"}}, o.call)
	resp, err := s.proxy(o.route.Provider).Transport.RoundTrip(req)
	if err != nil {
		return nil, err
	}
	if err := s.settleResponse(resp, o); err != nil {
		resp.Body.Close()
		return nil, err
	}
	return resp, nil
}

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
