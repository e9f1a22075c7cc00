package server

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"time"

	gatewayv1 "github.com/sluicehq/sluice/api/gateway/v1"
	"github.com/sluicehq/sluice/cmd/gateway/internal/estimate"
	"github.com/sluicehq/sluice/cmd/gateway/internal/jobs"
	"github.com/sluicehq/sluice/cmd/gateway/internal/policy"
)

// Jobs keeps jobs: jobs.Memory or jobs.Redis. Add names the job; a job the store lost is
// jobs.ErrLost.
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
	NewEpoch(ctx context.Context) error
}

// jobEndpoints are the endpoints a job may call, by the path it names.
var jobEndpoints = map[string]estimate.Endpoint{
	"/v1/chat/completions": estimate.Chat,
	"/v1/responses":        estimate.Responses,
	"/v1/embeddings":       estimate.Embeddings,
	messagesPath:           estimate.Messages,
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
// answers 202 at once. Nothing is charged until the job runs. A job kept when the gateway traces
// its calls keeps the trace context of the request's span, which its attempts' spans link to.
func (s *Server) serveAddJob(w http.ResponseWriter, r *http.Request) {
	arrived := time.Now()
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
	span := s.startJobCreation(r, j, arrived)
	err := s.opts.Jobs.Add(r.Context(), j)
	endJobCreation(span, j, err)
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
		e := badRequest("invalid_endpoint", fmt.Sprintf("The endpoint %q cannot be called by a job: use /v1/chat/completions, /v1/responses, /v1/embeddings or /v1/messages.", req.Endpoint))
		e.Param = ptr("endpoint")
		return nil, nil, e
	}
	c, apiErr := s.checkJobCall(ctx, p, caller, endpoint, req.Body)
	if apiErr != nil {
		return nil, nil, apiErr
	}
	return &jobs.Job{Tenant: caller.Tenant.Name, TenantID: caller.Tenant.Config.ID(), User: caller.User,
		Endpoint: string(endpoint), Body: req.Body}, c, nil
}

// checkJobCall checks the body of a call nobody waits for (a job's, or a line of a batch) as a
// live call's would be checked, in the same reading: its size, its model in the caller's plan,
// the cap added, no stream and no background, and a call that no limit can ever hold refused.
func (s *Server) checkJobCall(ctx context.Context, p *policy.Policy, caller *policy.Caller, endpoint estimate.Endpoint, body []byte) (*call, *apiError) {
	if most := p.Config.Jobs.MaxBodyBytes; int64(len(body)) > most {
		return nil, &apiError{status: http.StatusRequestEntityTooLarge, Type: typeInvalidRequest, Code: "request_too_large", Param: ptr("body"),
			Message: fmt.Sprintf("A job's body is kept until it runs, and may be at most %d bytes; this one is %d.", most, len(body))}
	}
	c, apiErr := s.newCall(ctx, p, caller, endpoint, body)
	if apiErr != nil {
		return nil, apiErr
	}
	if c.request.Stream {
		e := badRequest("invalid_request", "A job's answer is kept, not streamed: leave stream unset.")
		e.Param = ptr("body.stream")
		return nil, e
	}
	if c.request.Kept != nil && c.request.Kept.Background {
		e := badRequest("invalid_request", "A job waits for its answer itself: leave background unset.")
		e.Param = ptr("body.background")
		return nil, e
	}
	if r := s.gate.TooLarge(c.admission()); r != nil {
		return nil, refusalError(nil, c, r)
	}
	return c, nil
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

// serveJob answers a job after do, when the caller may see it. A job its store lost is answered
// 410 job_lost to whoever asks (see jobLostError).
func (s *Server) serveJob(w http.ResponseWriter, r *http.Request, do func(context.Context, string) (*jobs.Job, error)) {
	caller, apiErr := s.authenticate(s.policy.Load(), r)
	if apiErr != nil {
		apiErr.write(w)
		return
	}
	id := r.PathValue("id")
	j, err := s.opts.Jobs.Get(r.Context(), id)
	if err == nil && !ownerOf(caller).Owns(j) {
		err = jobs.ErrNotFound // a job the caller may not see is not found, whatever it is: its id says nothing
	}
	if err == nil {
		j, err = do(r.Context(), id)
	}
	switch {
	case errors.Is(err, jobs.ErrLost):
		s.jobLost(id)
		jobLostError(id).write(w)
	case errors.Is(err, jobs.ErrNotFound):
		(&apiError{status: http.StatusNotFound, Type: typeInvalidRequest, Code: "job_not_found", Message: fmt.Sprintf("No job %q.", id)}).write(w)
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
