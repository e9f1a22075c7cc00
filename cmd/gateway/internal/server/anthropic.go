package server

import (
	"bytes"
	"cmp"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strings"
	"time"

	gatewayv1 "github.com/sluicehq/sluice/api/gateway/v1"
	"github.com/sluicehq/sluice/cmd/gateway/internal/estimate"
	"github.com/sluicehq/sluice/cmd/gateway/internal/policy"
	"github.com/sluicehq/sluice/cmd/gateway/internal/upstream"
)

// Anthropic's Messages API, for clients and to providers.
//
// A client calls POST /v1/messages and /v1/messages/count_tokens with its key in x-api-key or as
// a bearer token. Its answers are in Anthropic's dialect (see anthropicWriter): the gateway's own
// errors in Anthropic's error body, the tenant's limits in anthropic-ratelimit-* headers, the
// call's id in request-id. A provider whose api is anthropic is called with its key in x-api-key
// and an anthropic-version header: the client's, else the provider's anthropicVersion. The
// gateway translates neither API to the other: a model is called in its provider's.

// messagesPath is the path under which Anthropic's Messages API is served.
const messagesPath = "/v1/messages"

// The headers of Anthropic's API.
const (
	headerAnthropicRequestID = "Request-Id"
	headerAnthropicVersion   = "Anthropic-Version"
	headerAnthropicBeta      = "Anthropic-Beta"
	headerXAPIKey            = "X-Api-Key"
)

// statusOverloaded is Anthropic's 529: its capacity is spent for the moment, not the account's
// limits.
const statusOverloaded = upstream.StatusOverloaded

// isAnthropic reports whether an endpoint is of Anthropic's Messages API.
func isAnthropic(e estimate.Endpoint) bool {
	return e == estimate.Messages || e == estimate.CountTokens
}

// withDialect answers the requests under /v1/messages in Anthropic's dialect, whatever answers
// them: the handler, a refusal before it or the 404 of an unknown path.
func withDialect(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == messagesPath || strings.HasPrefix(r.URL.Path, messagesPath+"/") {
			w = &anthropicWriter{ResponseWriter: w}
		}
		next.ServeHTTP(w, r)
	})
}

// anthropicWriter writes an answer in Anthropic's dialect: an apiError in Anthropic's error
// body (see apiError.write), and, as its header is written, the tenant's limits under
// Anthropic's names and the call's id as request-id. It is not safe for concurrent use.
type anthropicWriter struct {
	http.ResponseWriter
	wroteHeader bool
}

// Unwrap lets an http.ResponseController reach the connection's writer.
func (aw *anthropicWriter) Unwrap() http.ResponseWriter { return aw.ResponseWriter }

func (aw *anthropicWriter) WriteHeader(status int) {
	if !aw.wroteHeader {
		aw.wroteHeader = true
		toAnthropicHeaders(aw.Header(), time.Now())
	}
	aw.ResponseWriter.WriteHeader(status)
}

func (aw *anthropicWriter) Write(p []byte) (int, error) {
	if !aw.wroteHeader {
		aw.WriteHeader(http.StatusOK)
	}
	return aw.ResponseWriter.Write(p)
}

// anthropicLimitNames are the names Anthropic gives the rate-limit headers the gateway sets in
// OpenAI's form: requests, tokens, input tokens and output tokens, each with its limit, what
// remains and its reset.
var anthropicLimitNames = []struct {
	openai    dimensionHeaders
	anthropic dimensionHeaders
}{
	{requestsHeaders, anthropicRequests},
	{tokensHeaders, anthropicTokens},
	{inputTokensHeaders, anthropicInputTokens},
	{outputTokensHeaders, anthropicOutputTokens},
}

// toAnthropicHeaders renames the tenant's rate-limit headers, set in OpenAI's names, to
// Anthropic's, whose reset is the RFC 3339 time at which the limit is full again, and gives the
// answer its id as request-id, which Anthropic's SDKs show with their errors.
func toAnthropicHeaders(h http.Header, now time.Time) {
	for _, n := range anthropicLimitNames {
		if limit := h[n.openai.limit]; len(limit) > 0 {
			h[n.anthropic.limit], h[n.anthropic.remaining] = limit, h[n.openai.remaining]
			h[n.anthropic.reset] = []string{resetTime(headerValue(h, n.openai.reset), now)}
		}
		delete(h, n.openai.limit)
		delete(h, n.openai.remaining)
		delete(h, n.openai.reset)
	}
	id := cmp.Or(headerValue(h, headerAnthropicRequestID), headerValue(h, headerRequestID))
	if id != "" {
		h[headerAnthropicRequestID], h[headerRequestID] = []string{id}, []string{id}
	}
}

// resetTime is the RFC 3339 time, rounded up to the second, a reset of OpenAI's form (a
// duration such as 1.5s) from now names.
func resetTime(reset string, now time.Time) string {
	d, _ := time.ParseDuration(reset)
	at := now.Add(max(d, 0))
	if at.Truncate(time.Second) != at {
		at = at.Truncate(time.Second).Add(time.Second)
	}
	return at.UTC().Format(time.RFC3339)
}

// anthropicError is Anthropic's error body.
type anthropicError struct {
	Type  string `json:"type"`
	Error struct {
		Type    string `json:"type"`
		Message string `json:"message"`
	} `json:"error"`
	RequestID string `json:"request_id,omitempty"`
}

// anthropicBody is e as Anthropic's error body, {"type":"error","error":{"type","message"},
// "request_id"}, a line of JSON.
func (e *apiError) anthropicBody(requestID string) []byte {
	var a anthropicError
	a.Type, a.Error.Type, a.Error.Message, a.RequestID = "error", anthropicType(e), e.Message, requestID
	b, _ := json.Marshal(a) // strings: nothing fails to encode
	return append(b, '\n')
}

// anthropicType is the type of Anthropic's error that answers as e does: by its status, as
// Anthropic's SDKs read it.
func anthropicType(e *apiError) string {
	switch e.status {
	case http.StatusUnauthorized:
		return "authentication_error"
	case http.StatusForbidden:
		return "permission_error"
	case http.StatusNotFound:
		return "not_found_error"
	case http.StatusRequestEntityTooLarge:
		return "request_too_large"
	case http.StatusTooManyRequests:
		return "rate_limit_error"
	case http.StatusServiceUnavailable, statusOverloaded:
		return "overloaded_error"
	}
	if e.status >= 500 {
		return "api_error"
	}
	return "invalid_request_error"
}

// errorEvent is the event that carries e in a stream: Anthropic's error event for a Messages
// stream, else a data line of OpenAI's error body.
func errorEvent(e *apiError, endpoint estimate.Endpoint, requestID string) []byte {
	body := e.body()
	if isAnthropic(endpoint) {
		body = e.anthropicBody(requestID)
	}
	return streamedError(endpoint, bytes.TrimSuffix(body, []byte("\n")))
}

// streamedError is the event that carries an error body, one line of JSON, in a stream of
// endpoint's dialect: Anthropic's error event, or OpenAI's data line, which its SDKs raise.
func streamedError(endpoint estimate.Endpoint, line []byte) []byte {
	if isAnthropic(endpoint) {
		return fmt.Appendf(nil, "event: error\ndata: %s\n\n", line)
	}
	return fmt.Appendf(nil, "data: %s\n\n", line)
}

// apiMismatch returns an error that names the API a model is served in, when endpoint is of the
// other: the gateway translates neither to the other.
func apiMismatch(endpoint estimate.Endpoint, route *policy.Route) *apiError {
	api := route.Provider.Config.API
	switch {
	case isAnthropic(endpoint) && api != gatewayv1.APIAnthropic:
		return badRequest("wrong_api", fmt.Sprintf("The model %q is served in OpenAI's API: call it at /v1/chat/completions or /v1/responses. The gateway does not translate Anthropic's Messages API to OpenAI's.", route.Model.Name))
	case !isAnthropic(endpoint) && api == gatewayv1.APIAnthropic:
		return badRequest("wrong_api", fmt.Sprintf("The model %q is served in Anthropic's Messages API: call it at /v1/messages. The gateway does not translate OpenAI's API to Anthropic's.", route.Model.Name))
	}
	return nil
}

// setAnthropicHeaders sets the headers of a call to an Anthropic provider: its key in
// x-api-key, the client's anthropic-version (else the provider's) and the beta features the
// client asks for.
func setAnthropicHeaders(h, in http.Header, p *policy.Provider) {
	if p.APIKey != "" {
		h[headerXAPIKey] = []string{p.APIKey}
	}
	h[headerAnthropicVersion] = []string{cmp.Or(headerValue(in, headerAnthropicVersion), p.Config.AnthropicVersion, gatewayv1.DefaultAnthropicVersion)}
	if beta := in[headerAnthropicBeta]; len(beta) > 0 {
		h[headerAnthropicBeta] = beta
	}
}

// errorBody is e as the call's client reads an error: Anthropic's body for a Messages call,
// OpenAI's for any other.
func (c *call) errorBody(e *apiError) []byte {
	if isAnthropic(c.endpoint) {
		return e.anthropicBody(c.requestID)
	}
	return e.body()
}

// codeAccountSpent is the code of the error that answers a call whose Anthropic provider said
// the gateway's account has no credit left or has reached its spend limit.
const codeAccountSpent = "provider_account_spent"

// errAccountSpent stands for an Anthropic provider's 400 that says the gateway's account has no
// credit left or has reached its spend limit: no retry changes it, and the client is not to read
// of the gateway's billing.
var errAccountSpent = errors.New("the provider's account has spent its credit or reached its spend limit")

// maxErrorBytes bounds what the gateway reads of a provider's error to tell what it says.
const maxErrorBytes = 64 << 10

// accountSpent reports whether a provider's answer is Anthropic's refusal of an account whose
// credit is spent ("Your credit balance is too low") or that has reached its spend limit ("You
// have reached your specified API usage limits"): a 400 invalid_request_error. The answer's body
// reads as it did.
func accountSpent(resp *http.Response, p *policy.Provider) bool {
	if resp.StatusCode != http.StatusBadRequest || p.Config.API != gatewayv1.APIAnthropic {
		return false
	}
	body, _ := readAtMost(resp.Body, resp.ContentLength, maxErrorBytes)
	resp.Body = readCloser{io.MultiReader(bytes.NewReader(body), resp.Body), resp.Body}
	var e anthropicError
	if json.Unmarshal(body, &e) != nil || e.Error.Type != "invalid_request_error" {
		return false
	}
	msg := strings.ToLower(e.Error.Message)
	return strings.Contains(msg, "credit balance") || strings.Contains(msg, "usage limits")
}

// accountSpentError is the error of a call whose provider's account is spent: another provider
// of its pool serves it if it may, else the gateway answers it (see unansweredError).
func (s *Server) accountSpentError(o *outbound) error {
	s.log.Warn("the provider's account has spent its credit or reached its spend limit", "provider", o.provider(), "request_id", o.requestID)
	if o.canFailOver() {
		return errFailOver
	}
	return errAccountSpent
}

// planEndpoint is the endpoint whose limits a plan names for a call to endpoint: count_tokens
// counts under messages.
func planEndpoint(endpoint estimate.Endpoint) gatewayv1.Endpoint {
	if endpoint == estimate.CountTokens {
		return gatewayv1.EndpointMessages
	}
	return gatewayv1.Endpoint(endpoint)
}
