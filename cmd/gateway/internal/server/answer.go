package server

import (
	"encoding/json"
	"fmt"
	"net/http"
	"strconv"
	"time"

	gatewayv1 "github.com/sluicehq/sluice/api/gateway/v1"
	"github.com/sluicehq/sluice/cmd/gateway/internal/admission"
	"github.com/sluicehq/sluice/cmd/gateway/internal/estimate"
	"github.com/sluicehq/sluice/cmd/gateway/internal/ratelimit"
)

// apiError is an answer in OpenAI's error body, {"error":{"message","type","param","code"}}.
type apiError struct {
	status int
	// retryAfter, when set, goes out as the Retry-After header.
	retryAfter time.Duration
	Message    string  `json:"message"`
	Type       string  `json:"type"`
	Param      *string `json:"param"`
	Code       string  `json:"code"`
}

// The error types clients branch on, as OpenAI names them.
const (
	typeInvalidRequest = "invalid_request_error"
	typeRateLimit      = "rate_limit_error"
	typeServer         = "api_error"
	typeQuota          = "insufficient_quota"
)

// codeQuotaSpent is the code of a refusal by a spent quota or budget, as OpenAI names it.
const codeQuotaSpent = "insufficient_quota"

// statusClientClosed is the status logged for a client that left: it never sees it.
const statusClientClosed = 499

// The headers Sluice adds to the answers of calls, besides the providers' own rate-limit names.
const (
	headerRequestID       = "X-Request-Id"
	headerQueueWait       = "X-Sluice-Queue-Wait-Ms"
	headerQueuePosition   = "X-Sluice-Queue-Position"
	headerQueueEstimate   = "X-Sluice-Queue-Estimate-Ms"
	headerBudgetRemaining = "X-Sluice-Budget-Remaining"
	headerBudgetReset     = "X-Sluice-Budget-Reset"
	// headerDegradedModel names the cheaper model a call was sent to because the tenant's budget
	// ran low.
	headerDegradedModel = "X-Sluice-Degraded-Model"
)

func badRequest(code, message string) *apiError {
	return &apiError{status: http.StatusBadRequest, Type: typeInvalidRequest, Code: code, Message: message}
}

// write sends the error. Headers already set on w (rate limits) go with it. Every 429 and 503
// says when to come back, at least a second from now; an answer that no retry can change says so
// in x-should-retry, which the OpenAI SDKs follow before their own rules.
func (e *apiError) write(w http.ResponseWriter) {
	h := w.Header()
	if e.retryAfter > 0 || e.status == http.StatusTooManyRequests || e.status == http.StatusServiceUnavailable {
		h.Set("Retry-After", strconv.FormatInt(int64(admission.RetryAfter(e.retryAfter)/time.Second), 10))
	}
	if !e.retryable() {
		h.Set("X-Should-Retry", "false")
	}
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(e.status)
	w.Write(e.body())
}

// body is the error as OpenAI's error body, a line of JSON.
func (e *apiError) body() []byte {
	b, _ := json.Marshal(struct {
		Error *apiError `json:"error"`
	}{e}) // strings and a pointer to one: nothing fails to encode
	return append(b, '\n')
}

// retryable reports whether the same request may succeed later: a limit, a queue or a store
// that comes back. A bad request, a refused key, a provider that refuses the gateway's own
// credentials or a job that has finished will answer the same.
func (e *apiError) retryable() bool {
	switch {
	case e.Code == "provider_auth_failed", e.Code == "job_finished", e.Code == codeQuotaSpent:
		return false
	case e.status == http.StatusTooManyRequests, e.status == http.StatusRequestTimeout:
		return true
	}
	return e.status >= 500
}

// refusalError turns a refusal into the answer a client reads and, when h is not nil, sets its
// headers: the limits a decision left, the place in the queue and the estimate for a busy door.
// Retry-After goes out with the answer.
func refusalError(h http.Header, c *call, r *admission.Refusal) *apiError {
	if h != nil {
		setRefusalHeaders(h, r)
	}
	switch r.Reason {
	case admission.Limited:
		if r.Spent {
			return quotaSpentError(r)
		}
		if r.Dimension == ratelimit.InFlight {
			return inFlightError(r)
		}
		return &apiError{status: http.StatusTooManyRequests, Type: typeRateLimit, Code: "rate_limit_exceeded", retryAfter: r.RetryAfter,
			Message: fmt.Sprintf("Rate limit reached: %s. Try again in %s.", limitText(r), r.RetryAfter.Round(time.Millisecond))}
	case admission.TooLarge:
		return tooLargeError(c, r)
	case admission.Busy:
		return &apiError{status: http.StatusTooManyRequests, Type: typeRateLimit, Code: "queue_busy", retryAfter: r.RetryAfter, Message: busyMessage(r)}
	case admission.Unavailable:
		return &apiError{status: http.StatusServiceUnavailable, Type: typeServer, Code: "limiter_unavailable", retryAfter: r.RetryAfter,
			Message: "The gateway cannot check your limits right now. Try again shortly."}
	case admission.Gone:
		return errClientClosed
	case admission.ProviderDown:
		return &apiError{status: http.StatusServiceUnavailable, Type: typeServer, Code: "provider_unavailable", retryAfter: r.RetryAfter,
			Message: fmt.Sprintf("Every provider of this model failed its recent calls; the gateway tries one again in %s. Nothing was charged.", r.RetryAfter)}
	}
	return &apiError{status: http.StatusInternalServerError, Type: typeServer, Code: "limiter_error", Message: "The gateway failed to check your limits."}
}

// quotaSpentError answers a call refused by a quota or a budget that is spent until its reset:
// 429 with OpenAI's insufficient_quota, which no retry before the reset changes. The SDKs, told
// so by x-should-retry, raise it at once instead of sleeping until Retry-After.
func quotaSpentError(r *admission.Refusal) *apiError {
	return &apiError{status: http.StatusTooManyRequests, Type: typeQuota, Code: codeQuotaSpent, retryAfter: r.RetryAfter,
		Message: fmt.Sprintf("Quota exceeded: %s. It resets in %s.", limitText(r), r.RetryAfter.Round(time.Second))}
}

// inFlightError answers a call refused because its plan's calls at once are all running: 429,
// to try again when one of them ends.
func inFlightError(r *admission.Refusal) *apiError {
	return &apiError{status: http.StatusTooManyRequests, Type: typeRateLimit, Code: "rate_limit_exceeded", retryAfter: r.RetryAfter,
		Message: fmt.Sprintf("Too many calls at once: %s. Try again when one of them ends.", limitText(r))}
}

// busyMessage tells a caller turned away at the door how long it would have waited, against
// which bound.
func busyMessage(r *admission.Refusal) string {
	if r.Horizon > 0 {
		return fmt.Sprintf("The queue is busy and new users keep joining it: behind your earlier requests, the gateway promises no wait longer than %s now, and this one would wait about %s. You are number %d in your lane.",
			r.Horizon.Round(time.Millisecond), r.Estimate.Round(time.Second), r.Position)
	}
	return fmt.Sprintf("The queue is busy: your request would wait about %s, more than your plan's %s. You are number %d in your lane.",
		r.Estimate.Round(time.Second), r.MaxWait, r.Position)
}

func setRefusalHeaders(h http.Header, r *admission.Refusal) {
	setLimitHeaders(h, r.Limits)
	switch r.Reason {
	case admission.Limited:
		h.Set("Retry-After-Ms", strconv.FormatInt(r.RetryAfter.Milliseconds(), 10))
	case admission.Busy:
		h.Set(headerQueuePosition, strconv.Itoa(r.Position))
		h.Set(headerQueueEstimate, strconv.FormatInt(r.Estimate.Milliseconds(), 10))
	}
}

// tooLargeError answers a call that costs more than one of its limits can ever hold: a bad
// request, which no wait or retry changes. On tokens it names the field to make smaller and, when
// the prompt leaves room, the largest value that fits.
func tooLargeError(c *call, r *admission.Refusal) *apiError {
	e := badRequest("request_too_large", "This request is larger than "+limitText(r)+". Waiting will not help; make the request smaller.")
	var prompt int64 // what the call's prompt takes from the limit
	switch r.Dimension {
	case ratelimit.OutputTokens:
	case ratelimit.Tokens, ratelimit.InputTokens:
		prompt = c.estimate.PromptTokens
	default:
		return e
	}
	weight := int64(1) // what each output token takes from the limit
	if r.Level == ratelimit.LevelProvider {
		weight = c.route.Provider.Config.OutputWeight()
	}
	room := (r.Capacity - prompt) / weight
	if r.Dimension == ratelimit.InputTokens || room < c.request.N {
		e.Param = ptr(promptParam[c.endpoint])
		e.Message += fmt.Sprintf(" Its prompt alone is about %d tokens.", c.estimate.PromptTokens)
		return e
	}
	param := c.request.MaxTokensParam
	if param == "" { // unset, it counted as the model's default
		param = "max_tokens"
		if c.endpoint == estimate.Responses {
			param = "max_output_tokens"
		}
	}
	e.Param = &param
	e.Message += fmt.Sprintf(" The largest %s that fits is %d.", param, room/max(c.request.N, 1))
	return e
}

// promptParam names the field that holds each endpoint's prompt.
var promptParam = map[estimate.Endpoint]string{estimate.Chat: "messages", estimate.Completions: "prompt", estimate.Embeddings: "input",
	estimate.Responses: "input", estimate.Moderations: "input"}

// limitText names the limit that refused, with its numbers.
func limitText(r *admission.Refusal) string {
	limit := fmt.Sprintf("the %s limit on %s: limit %d", r.Level, dimensionText(r.Dimension), r.Capacity)
	if r.Per != "" {
		limit += " " + r.Per
	}
	if r.Remaining < 0 {
		return fmt.Sprintf("%s, requested %d", limit, r.Requested)
	}
	return fmt.Sprintf("%s, remaining %d, requested %d", limit, r.Remaining, r.Requested)
}

// dimensionText names a limit's dimension as the configuration does where it names it.
func dimensionText(d ratelimit.Dimension) string {
	switch d {
	case ratelimit.InFlight:
		return string(gatewayv1.DimensionInFlight)
	case ratelimit.InputTokens:
		return string(gatewayv1.DimensionInputTokens)
	case ratelimit.OutputTokens:
		return string(gatewayv1.DimensionOutputTokens)
	}
	return d.String()
}

// errClientClosed is the answer to a client that left: it never sees it.
var errClientClosed = &apiError{status: statusClientClosed, Type: typeInvalidRequest, Code: "client_closed",
	Message: "The client closed the request."}

// dimensionHeaders are the names of x-ratelimit-{limit,remaining,reset}-<dimension>, in their
// canonical form, so that setting them does not build the names again.
type dimensionHeaders struct{ limit, remaining, reset string }

var (
	requestsHeaders = dimensionHeaders{"X-Ratelimit-Limit-Requests", "X-Ratelimit-Remaining-Requests", "X-Ratelimit-Reset-Requests"}
	tokensHeaders   = dimensionHeaders{"X-Ratelimit-Limit-Tokens", "X-Ratelimit-Remaining-Tokens", "X-Ratelimit-Reset-Tokens"}
)

// setLimitHeaders writes the rate-limit headers a provider would send, for the tightest of the
// caller's limits on requests and on tokens, and the tenant's budget left with its reset time.
func setLimitHeaders(h http.Header, l admission.Limits) {
	setHeadroom(h, l.Requests, requestsHeaders)
	setHeadroom(h, l.Tokens, tokensHeaders)
	if l.Budget.Capacity > 0 {
		h.Set(headerBudgetRemaining, string(gatewayv1.MoneyFromMicro(l.Budget.Remaining)))
		h.Set(headerBudgetReset, time.Now().Add(l.Budget.Reset).UTC().Format(time.RFC3339))
	}
}

func setHeadroom(h http.Header, r admission.Headroom, names dimensionHeaders) {
	if r.Capacity == 0 {
		return
	}
	// The names are canonical already: set without canonicalizing them again. The values share
	// one array, each capped so that adding to one cannot write over the next.
	values := []string{strconv.FormatInt(r.Capacity, 10), strconv.FormatInt(r.Remaining, 10), r.Reset.Round(time.Millisecond).String()}
	h[names.limit], h[names.remaining], h[names.reset] = values[0:1:1], values[1:2:2], values[2:3:3]
}
