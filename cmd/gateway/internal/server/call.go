package server

import (
	"context"
	"crypto/rand"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"time"

	gatewayv1 "github.com/sluicehq/sluice/api/gateway/v1"
	"github.com/sluicehq/sluice/cmd/gateway/internal/estimate"
	"github.com/sluicehq/sluice/cmd/gateway/internal/jobs"
	"github.com/sluicehq/sluice/cmd/gateway/internal/policy"
	"github.com/sluicehq/sluice/cmd/gateway/internal/ratelimit"
)

// call is one request on its way through the gateway.
type call struct {
	endpoint estimate.Endpoint
	caller   *policy.Caller
	route    *policy.Route
	request  *estimate.Request
	body     []byte // as sent upstream
	estimate estimate.Estimate
	cost     policy.Cost
	checks   []ratelimit.Check
	queueing policy.Queueing
	decision ratelimit.Decision
	lease    string
	waited   time.Duration // in the queue
	// degradedFrom is the model the client asked for when the call went to the plan's fallback.
	degradedFrom string
	started      time.Time // when the call went upstream
	// job is the job attempt the call is; zero for a live call. A job waits in the Batch class,
	// passes no door, and is charged once however often it is delivered.
	job     jobs.Attempt
	limiter Limiter // the store that took the decision, which settles it too
	// usageAdded is true when the gateway asked for the stream's usage chunk itself, so the
	// client, which did not ask, does not receive it.
	usageAdded bool
	settleOnce sync.Once
}

func (s *Server) serveCall(endpoint estimate.Endpoint) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		p := s.policy.Load()
		c, apiErr := s.identify(p, endpoint, r)
		if apiErr == nil {
			s.metrics.arrivals.WithLabelValues(c.provider()).Inc()
			apiErr = s.admit(r.Context(), c, w)
		}
		w.Header().Set(headerQueueWait, strconv.FormatInt(c.waited.Milliseconds(), 10))
		if c.degradedFrom != "" {
			w.Header().Set(headerDegradedModel, c.request.Model)
		}
		if apiErr != nil {
			s.metrics.requests.WithLabelValues(c.tenant(), c.provider(), outcomeOf(apiErr)).Inc()
			apiErr.write(w)
			return
		}
		if r.Context().Err() != nil {
			s.settle(c, estimate.Usage{}, false) // the client left before the call went out
			return
		}
		s.proxy(c.route.Provider).ServeHTTP(w, r.WithContext(withCall(r.Context(), c)))
	}
}

// identify finds who calls, what and where to, and estimates the call. The call it returns is
// never nil, so that a refusal can be counted under its tenant and provider when they are known.
func (s *Server) identify(p *policy.Policy, endpoint estimate.Endpoint, r *http.Request) (*call, *apiError) {
	c := &call{endpoint: endpoint}
	caller, apiErr := s.authenticate(p, r)
	if apiErr != nil {
		return c, apiErr
	}
	c.caller = caller
	return c, s.read(p, c, r)
}

// admit lets a call go now when every limit allows it and nobody waits before it; otherwise a
// refusal by a limit that queues puts it in its provider's queue, and any other refusal is
// answered at once. On success every limit has been charged the estimate.
func (s *Server) admit(ctx context.Context, c *call, w http.ResponseWriter) *apiError {
	d := s.dispatcher(c.route.Provider.Name)
	if limit := c.exceeds(); limit != nil {
		return s.tooLarge(c, limit)
	}
	if d.idle() {
		if apiErr := s.take(ctx, c); apiErr != nil {
			return apiErr
		}
		if c.decision.Allowed {
			d.started()
			setLimitHeaders(w.Header(), c)
			return nil
		}
		if !c.queues() {
			setLimitHeaders(w.Header(), c)
			return s.refuse(c, w)
		}
	}
	return d.wait(ctx, c, w)
}

func (s *Server) authenticate(p *policy.Policy, r *http.Request) (*policy.Caller, *apiError) {
	if p == nil {
		return nil, &apiError{status: http.StatusServiceUnavailable, Type: typeServer, Code: "not_ready", Message: "The gateway has no configuration yet."}
	}
	key, ok := strings.CutPrefix(r.Header.Get("Authorization"), "Bearer ")
	if !ok || key == "" {
		return nil, &apiError{status: http.StatusUnauthorized, Type: typeInvalidRequest, Code: "missing_api_key",
			Message: "You didn't provide an API key. Send it as 'Authorization: Bearer YOUR_KEY'."}
	}
	caller := p.Caller(key)
	if caller == nil {
		return nil, &apiError{status: http.StatusUnauthorized, Type: typeInvalidRequest, Code: "invalid_api_key",
			Message: "Incorrect API key provided."}
	}
	return caller, nil
}

// read reads and parses the body, finds the model's provider and estimates the call.
func (s *Server) read(p *policy.Policy, c *call, r *http.Request) *apiError {
	body, apiErr := readBody(p, r)
	if apiErr != nil {
		return apiErr
	}
	return s.parse(r.Context(), p, c, body)
}

// readBody reads a request's body, at most server.maxBodyBytes of it.
func readBody(p *policy.Policy, r *http.Request) ([]byte, *apiError) {
	body, err := io.ReadAll(http.MaxBytesReader(nil, r.Body, p.Config.Server.MaxBodyBytes))
	if err != nil {
		var tooLarge *http.MaxBytesError
		if errors.As(err, &tooLarge) {
			return nil, &apiError{status: http.StatusRequestEntityTooLarge, Type: typeInvalidRequest, Code: "request_too_large",
				Message: fmt.Sprintf("The request body is larger than %d bytes.", tooLarge.Limit)}
		}
		return nil, badRequest("unreadable_body", "The request body could not be read.")
	}
	return body, nil
}

// parse parses a call's body, finds the model's provider and estimates the call.
func (s *Server) parse(ctx context.Context, p *policy.Policy, c *call, body []byte) *apiError {
	var err error
	if c.request, err = estimate.Parse(c.endpoint, body); err != nil {
		return requestError(err)
	}
	if c.route = p.Route(c.request.Model); c.route == nil {
		return &apiError{status: http.StatusNotFound, Type: typeInvalidRequest, Code: "model_not_found",
			Message: fmt.Sprintf("The model %q does not exist or you do not have access to it.", c.request.Model)}
	}
	if !c.caller.Tenant.Uses(c.route.Provider.Name) {
		return &apiError{status: http.StatusForbidden, Type: typeInvalidRequest, Code: "provider_not_allowed",
			Message: fmt.Sprintf("Your plan does not include the provider of the model %q.", c.request.Model)}
	}
	body, apiErr := s.degrade(ctx, p, c, body)
	if apiErr != nil {
		return apiErr
	}
	return s.prepare(c, body)
}

// degrade sends a call for the plan's expensive model to its cheaper fallback while the tenant's
// budget left is below the plan's threshold, and returns the body to send.
func (s *Server) degrade(ctx context.Context, p *policy.Policy, c *call, body []byte) ([]byte, *apiError) {
	d := c.caller.Tenant.Config.Degrade
	if d == nil || c.request.Model != d.Model || !s.budgetLow(ctx, c, d.BelowPercent) {
		return body, nil
	}
	body, err := estimate.WithModel(body, d.Fallback)
	if err != nil {
		return nil, requestError(err)
	}
	c.route, c.request.Model, c.degradedFrom = p.Route(d.Fallback), d.Fallback, d.Model
	return body, nil
}

// budgetLow reports whether the tenant's budget on the call's provider has less than percent
// left. A decision of cost zero reads it without taking anything; a store that cannot answer
// leaves the call as it is.
func (s *Server) budgetLow(ctx context.Context, c *call, percent int32) bool {
	b := c.caller.Tenant.Budget(c.route.Provider.Name)
	if b == nil {
		return false
	}
	d, err := s.opts.Limiter.Decide(ctx, []ratelimit.Check{{Limit: b}}, s.now())
	return err == nil && d.Remaining[0]*100 < int64(percent)*b.Capacity()
}

// prepare estimates the call and makes the body to send upstream.
func (s *Server) prepare(c *call, body []byte) *apiError {
	m := c.route.Model
	c.estimate = c.request.Estimate(s.counter, m.Encoding, m.DefaultMaxTokens)
	c.cost = policy.Cost{
		Tokens:       c.estimate.Total(),
		MicroDollars: c.route.Provider.Config.Prices.CostMicros(c.estimate.PromptTokens, c.estimate.CompletionTokens),
	}
	c.body = body
	if c.request.Stream {
		withUsage, err := estimate.WithStreamUsage(body)
		if err != nil {
			return requestError(err)
		}
		c.usageAdded = len(withUsage) != len(body) || string(withUsage) != string(body)
		c.body = withUsage
	}
	return nil
}

func requestError(err error) *apiError {
	var re *estimate.RequestError
	if errors.As(err, &re) {
		e := badRequest("invalid_request", re.Error())
		if re.Param != "" {
			e.Param = &re.Param
		}
		return e
	}
	return badRequest("invalid_request", "The request body is not valid.")
}

// take checks every limit and takes the estimate from all of them, or from none; c.decision says
// which. It fails only when no store can decide.
func (s *Server) take(ctx context.Context, c *call) *apiError {
	if c.lease == "" {
		c.lease = rand.Text()
	}
	c.limiter = s.opts.Limiter
	c.checks, c.queueing = policy.Checks(c.checks[:0], c.caller, c.route, gatewayv1.Endpoint(c.endpoint), c.cost, false, c.lease)
	d, err := s.timedDecide(ctx, "shared", c.limiter, c.checks)
	if err != nil && ctx.Err() != nil {
		return errClientClosed // the client left; the store did not fail
	}
	if err != nil {
		s.metrics.storeUp.Set(0)
		if s.opts.Fallback == nil {
			s.metrics.storeErrors.WithLabelValues("refused").Inc()
			s.log.Error("limiter store failed; refusing (failMode: closed)", "err", err)
			return &apiError{status: http.StatusServiceUnavailable, Type: typeServer, Code: "limiter_unavailable", retryAfter: time.Second,
				Message: "The gateway cannot check your limits right now. Try again shortly."}
		}
		s.metrics.storeErrors.WithLabelValues("local").Inc()
		c.limiter = s.opts.Fallback
		c.checks, c.queueing = policy.Checks(c.checks[:0], c.caller, c.route, gatewayv1.Endpoint(c.endpoint), c.cost, true, c.lease)
		if d, err = s.timedDecide(ctx, "local", c.limiter, c.checks); err != nil {
			return &apiError{status: http.StatusInternalServerError, Type: typeServer, Code: "limiter_error", Message: "The gateway failed to check your limits."}
		}
	} else {
		s.metrics.storeUp.Set(1)
	}
	c.decision = d
	if d.Allowed {
		c.started = s.now()
		s.usage.started(c, c.started)
	}
	return nil
}

// exceeds returns a limit the call costs more than it can ever hold, or nil. Such a call never
// waits: no wait makes it fit.
func (c *call) exceeds() *ratelimit.Limit {
	var buf [ratelimit.MaxChecks]ratelimit.Check
	checks, _ := policy.Checks(buf[:0], c.caller, c.route, gatewayv1.Endpoint(c.endpoint), c.cost, false, "")
	for _, check := range checks {
		if check.Cost > check.Limit.Capacity() {
			return check.Limit
		}
	}
	return nil
}

// tooLarge answers a call that is larger than one of its limits.
func (s *Server) tooLarge(c *call, limit *ratelimit.Limit) *apiError {
	s.metrics.refusals.WithLabelValues(limit.Level.String(), limit.Dimension.String()).Inc()
	s.usage.refused(c, limit)
	return &apiError{status: http.StatusTooManyRequests, Type: typeRateLimit, Code: "request_too_large",
		Message: fmt.Sprintf("This request is larger than the %s limit on %s (%d). Waiting will not help; make the request smaller.",
			limit.Level, limit.Dimension, limit.Capacity())}
}

// isJob reports whether the call is a job's attempt rather than a live call.
func (c *call) isJob() bool { return c.job.Job != "" }

// queues reports whether the call's refusal waits in the queue rather than being answered now.
func (c *call) queues() bool {
	return !c.decision.Never && c.queueing.Queues(c.decision.Refused)
}

func (s *Server) timedDecide(ctx context.Context, store string, l Limiter, checks []ratelimit.Check) (ratelimit.Decision, error) {
	start := time.Now()
	d, err := l.Decide(ctx, checks, s.now())
	s.metrics.decisions.WithLabelValues(store).Observe(time.Since(start).Seconds())
	return d, err
}

// refuse answers 429 for a refused decision, saying which limit and when to come back.
func (s *Server) refuse(c *call, w http.ResponseWriter) *apiError {
	limit := c.decision.RefusedBy(c.checks)
	check := c.checks[c.decision.Refused]
	s.metrics.refusals.WithLabelValues(limit.Level.String(), limit.Dimension.String()).Inc()
	s.usage.refused(c, limit)
	e := &apiError{status: http.StatusTooManyRequests, Type: typeRateLimit, Code: "rate_limit_exceeded"}
	what := fmt.Sprintf("the %s limit on %s: limit %d, remaining %d, requested %d", limit.Level, limit.Dimension,
		limit.Capacity(), c.decision.Remaining[c.decision.Refused], check.Cost)
	if c.decision.Never {
		e.Code = "request_too_large"
		e.Message = "This request is larger than " + what + ". Waiting will not help; make the request smaller."
		return e
	}
	retry := retryAfter(c.decision.RetryAfter)
	w.Header().Set("Retry-After", fmt.Sprint(int64(retry/time.Second)))
	w.Header().Set("Retry-After-Ms", fmt.Sprint(c.decision.RetryAfter.Milliseconds()))
	e.Message = fmt.Sprintf("Rate limit reached: %s. Try again in %s.", what, c.decision.RetryAfter.Round(time.Millisecond))
	return e
}

// retryAfter rounds a wait up to whole seconds, at least one: a client told 0 retries at once.
func retryAfter(d time.Duration) time.Duration {
	return max(((d+time.Second-1)/time.Second)*time.Second, time.Second)
}

func (c *call) tenant() string {
	if c.caller == nil {
		return ""
	}
	return c.caller.Tenant.Name
}

func (c *call) provider() string {
	if c.route == nil {
		return ""
	}
	return c.route.Provider.Name
}

func outcomeOf(e *apiError) string {
	switch e.status {
	case http.StatusTooManyRequests:
		return outcomeRefused
	case http.StatusUnauthorized:
		return outcomeUnauthorized
	case http.StatusForbidden:
		return outcomeForbidden
	case http.StatusServiceUnavailable, http.StatusInternalServerError:
		return outcomeStoreDown
	case statusClientClosed:
		return outcomeClientClosed
	}
	return outcomeBadRequest
}

// errClientClosed is the answer to a client that left: it never sees it.
var errClientClosed = &apiError{status: statusClientClosed, Type: typeInvalidRequest, Code: "client_closed",
	Message: "The client closed the request."}

type callKey struct{}

func withCall(ctx context.Context, c *call) context.Context {
	return context.WithValue(ctx, callKey{}, c)
}

func callFrom(ctx context.Context) *call { return ctx.Value(callKey{}).(*call) }
